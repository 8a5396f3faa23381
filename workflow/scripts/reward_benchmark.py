from reprolm.forkserver import run_in_forkserver

run_in_forkserver()

import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import make_judge
from reprolm.score.reward_benchmarks import load_elo, model_ranking, rating_agreement

with tracked_step(snakemake) as log:
    judge = make_judge(snakemake.params.judge, snakemake.input, snakemake.params.seed)
    rows = pq.read_table(snakemake.input.rows).to_pylist()
    if snakemake.rule == "model_ranking":
        result = model_ranking(judge, rows, load_elo(snakemake.input.elo))
    else:
        result = rating_agreement(judge, rows)
    log.info("%s: pearson %.3f, spearman %.3f, kendall %.3f", snakemake.rule, result["pearson"],
             result["spearman"], result["kendall"])
    write_json({"metric": snakemake.rule, "judge": snakemake.wildcards.judge, "dataset": snakemake.wildcards.dataset,
                "split": snakemake.wildcards.split, **result}, snakemake.output[0])
