import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.judging import grade_generations

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    rows = pq.read_table(snakemake.input.generations).to_pylist()
    result = grade_generations(judge, rows)
    log.info("mean grade %.4f over %d prompts (%d unparsed)", result["mean"], len(rows), result["unparsed"])
    write_json(
        {"metric": "grade", "judge": snakemake.wildcards.judge, **result, **request_counts(judge)}, snakemake.output[0]
    )
