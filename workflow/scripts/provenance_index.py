from reprolm.provenance import tracked_step
from reprolm.provenance.query import write_provenance_table

with tracked_step(snakemake) as log:
    log.info("%d artifacts", write_provenance_table(snakemake.input, snakemake.output[0]))
