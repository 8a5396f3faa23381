from reprolm.data.hub_assets import cache_lm_eval_task
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    manifest = cache_lm_eval_task(snakemake.wildcards.task, snakemake.output[0], snakemake.params.revisions)
    log.info("documents per task and split: %s", {name: entry["documents"] for name, entry in manifest.items()})
