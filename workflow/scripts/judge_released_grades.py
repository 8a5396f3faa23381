import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.judging import grade_released_answers

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    records = pq.read_table(snakemake.input.grades).to_pylist()
    questions = pq.read_table(snakemake.input.questions).to_pylist()
    successor = grade_released_answers(judge, records, questions)
    log.info(
        "%s graded %d released answers of %s", snakemake.wildcards.judge, len(records), snakemake.wildcards.retired
    )
    write_json(
        {
            "judge": snakemake.wildcards.judge,
            "retired": snakemake.wildcards.retired,
            "records": [{key: record[key] for key in ("model", "question_id", "turn", "score")} for record in records],
            "successor": successor,
            **request_counts(judge),
        },
        snakemake.output[0],
    )
