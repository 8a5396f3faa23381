from reprolm.models.base import download_base_model
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    download_base_model(snakemake.params.hub, snakemake.output[0])
