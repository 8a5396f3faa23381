from reprolm.data.sources import write_source
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    spec = {"name": snakemake.wildcards.source, **snakemake.params.spec}
    log.info("rows per split: %s", write_source(spec, snakemake.output[0]))
