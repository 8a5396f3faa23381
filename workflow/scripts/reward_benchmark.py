import pyarrow.parquet as pq

from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge
from reprolm.score.reward_benchmarks import rating_agreement, write_correlations

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    rows = pq.read_table(snakemake.input.rows).to_pylist()
    write_correlations(snakemake, judge, rating_agreement(judge, rows), log)
