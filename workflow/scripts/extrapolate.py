from reprolm.merge.extrapolate import extrapolate
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    summary = extrapolate(snakemake.input.sft, snakemake.input.aligned, snakemake.params.alpha, snakemake.output[0])
    log.info("extrapolation: %s", summary)
