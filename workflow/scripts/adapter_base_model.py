from reprolm.models.local import merge_adapter_base
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    merged = merge_adapter_base(snakemake.params.path, snakemake.params.base_folder, snakemake.output[0])
    log.info("adapter merged into its base: %s; content %s", merged, snakemake.params.content)
