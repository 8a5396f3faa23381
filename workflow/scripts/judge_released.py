from reprolm.aggregate.judge_agreement import balanced_sample, released_items
from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.judging import judge_released_items

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    items = released_items(snakemake.input.released)
    sample = snakemake.params.sample
    if sample:
        items = balanced_sample(items, sample["per_outcome"], sample.get("seed", snakemake.params.seed))
    successor = judge_released_items(judge, items)
    log.info("%s judged %d released items of %s", snakemake.wildcards.judge, len(items), snakemake.wildcards.retired)
    write_json(
        {
            "judge": snakemake.wildcards.judge,
            "retired": snakemake.wildcards.retired,
            "items": items,
            "successor": successor,
            **request_counts(judge),
        },
        snakemake.output[0],
    )
