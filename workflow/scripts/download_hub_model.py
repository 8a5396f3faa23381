from reprolm.data.hub_assets import download_hub_model
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    download_hub_model(snakemake.params.repo, snakemake.output[0], snakemake.params.revision)
