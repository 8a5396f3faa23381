import pyarrow.parquet as pq

from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge
from reprolm.score.reward_benchmarks import write_correlations
from reprolm.studies.flr.ranking import load_elo, model_ranking

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    rows = pq.read_table(snakemake.input.rows).to_pylist()
    write_correlations(snakemake, judge, model_ranking(judge, rows, load_elo(snakemake.input.elo)), log)
