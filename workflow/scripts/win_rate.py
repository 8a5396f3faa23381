import pyarrow.parquet as pq

from reprolm.provenance import tracked_step
from reprolm.score.judges import make_judge
from reprolm.score.judging import reference_answers, win_rates
from reprolm.score.metrics import write_json

with tracked_step(snakemake) as log:
    rows = pq.read_table(snakemake.input.answers).to_pylist()
    reference_file = snakemake.input.get("reference")
    references = reference_answers(rows, snakemake.input.answers,
                                   pq.read_table(reference_file).to_pylist() if reference_file else None,
                                   reference_file)
    judge = make_judge(snakemake.params.judge, snakemake.input.get("judge_model"), snakemake.params.seed,
                       snakemake.input.get("followups"))
    answers = [row["text"] for row in rows]
    result = win_rates(judge.prefer([row["instruction"] for row in rows], answers, references), answers, references)
    log.info("win rate %.2f, length-controlled %.2f (n=%d)", result["win_rate"], result["lc_win_rate"], result["n"])
    write_json({"metric": "win_rate", "judge": snakemake.wildcards.judge,
                "reference": snakemake.params.reference, **result}, snakemake.output[0])
