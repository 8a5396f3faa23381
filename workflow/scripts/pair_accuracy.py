import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.judging import pair_accuracy

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    result = pair_accuracy(judge, pq.read_table(snakemake.input.pairs).to_pylist())
    log.info(
        "pair accuracy %.1f%% [%.1f, %.1f] on %d pairs",
        result["accuracy"],
        result["ci_low"],
        result["ci_high"],
        result["n"],
    )
    write_json(
        {
            "metric": "pair_accuracy",
            "judge": snakemake.wildcards.judge,
            "dataset": snakemake.wildcards.dataset,
            "split": snakemake.wildcards.split,
            **result,
            **request_counts(judge),
        },
        snakemake.output[0],
    )
