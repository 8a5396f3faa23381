from reprolm.models.local import register_local_checkpoint
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    files = register_local_checkpoint(snakemake.params.path, snakemake.output[0])
    log.info("%s: %d files linked, content %s", snakemake.params.path, files, snakemake.params.content)
