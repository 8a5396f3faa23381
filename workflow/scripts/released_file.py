from reprolm.data.released_ratings import ReleasedFile, download_released_file
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    params = snakemake.params
    released = ReleasedFile(params.key, snakemake.output[0], params.url, params.checksum, "")
    download_released_file(released, log)
