from reprolm.data.hub_assets import download_nltk_package
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    download_nltk_package(snakemake.wildcards.package, snakemake.output[0], snakemake.params.locked)
