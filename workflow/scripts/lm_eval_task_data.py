from reprolm.forkserver import run_in_forkserver

run_in_forkserver(warm_up="lm_eval")

from reprolm.provenance import tracked_step
from reprolm.score.lm_eval_bridge import cache_lm_eval_task

with tracked_step(snakemake) as log:
    manifest = cache_lm_eval_task(snakemake.wildcards.task, snakemake.output[0])
    log.info("documents per task and split: %s", {name: entry["documents"] for name, entry in manifest.items()})
