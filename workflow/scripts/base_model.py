from reprolm.models.base import build_base_model, download_base_model
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    spec = snakemake.params.spec
    if "build" in spec:
        corpus_names = spec["build"]["pretrain"]["corpus"]
        result = build_base_model(
            spec["build"], snakemake.input.tokenizer, dict(zip(corpus_names, snakemake.input.corpus)),
            snakemake.params.schemas, snakemake.params.seed, snakemake.output[0],
        )
        log.info("pretraining: %s", result)
    else:
        download_base_model(spec["hub"], snakemake.output[0])
