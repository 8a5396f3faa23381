from reprolm.provenance import tracked_step
from reprolm.train.pretrain import build_base_model

with tracked_step(snakemake) as log:
    corpus_names = snakemake.params.build["pretrain"]["corpus"]
    result = build_base_model(
        snakemake.params.build,
        snakemake.input.tokenizer,
        dict(zip(corpus_names, snakemake.input.corpus)),
        snakemake.params.schemas,
        snakemake.params.seed,
        snakemake.output[0],
    )
    log.info("pretraining: %s", result)
