from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge
from reprolm.score.reward_benchmarks import write_correlations
from reprolm.stopping import watch_for_stop
from reprolm.studies.flr.ranking import RankingProgress, load_elo, model_ranking, progress_key, read_rows

# A stop signal from SLURM saves the scores so far after the chunk in hand (reprolm.stopping).
watch_for_stop()
with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    inputs = {name: path for name, path in snakemake.input.items() if isinstance(path, str)}
    key = progress_key(inputs, snakemake.params.judge, getattr(judge, "batching", None))
    progress = RankingProgress(snakemake.output[0], key)
    ranking = model_ranking(judge, read_rows(snakemake.input.rows), load_elo(snakemake.input.elo), progress)
    write_correlations(snakemake, judge, ranking, log)
    progress.remove()
