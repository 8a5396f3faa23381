from reprolm.forkserver import run_in_forkserver

run_in_forkserver()

import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import make_judge
from reprolm.score.judging import grade_generations

with tracked_step(snakemake) as log:
    judge = make_judge(snakemake.params.judge, snakemake.input, snakemake.params.seed)
    rows = pq.read_table(snakemake.input.generations).to_pylist()
    result = grade_generations(judge, rows)
    log.info("mean grade %.4f over %d prompts (%d unparsed)", result["mean"], len(rows), result["unparsed"])
    write_json({"metric": "grade", "judge": snakemake.wildcards.judge, **result}, snakemake.output[0])
