from reprolm.models.tokenizer import train_tokenizer_from_sources
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    corpus = snakemake.params.spec["corpus"]
    size = train_tokenizer_from_sources(
        dict(zip(corpus, snakemake.input)),
        snakemake.params.schemas,
        snakemake.params.spec["vocab_size"],
        snakemake.output[0],
    )
    log.info("tokenizer with %d tokens", size)
