import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.reward_benchmarks import rating_agreement

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    rows = pq.read_table(snakemake.input.rows).to_pylist()
    metric = snakemake.params.metric
    result = rating_agreement(judge, rows)
    log.info(
        "%s: pearson %.3f, spearman %.3f, kendall %.3f",
        metric,
        result["pearson"],
        result["spearman"],
        result["kendall"],
    )
    write_json(
        {
            "metric": metric,
            "judge": snakemake.wildcards.judge,
            "dataset": snakemake.wildcards.dataset,
            "split": snakemake.wildcards.split,
            **result,
            **request_counts(judge),
        },
        snakemake.output[0],
    )
