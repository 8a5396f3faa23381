import pyarrow.parquet as pq

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.metrics import compute

with tracked_step(snakemake) as log:
    rows = pq.read_table(snakemake.input.generations).to_pylist()
    inputs = snakemake.input
    assets = {"nltk_data": list(inputs.nltk_data)}
    if inputs.encoder:
        assets["encoder_dir"] = inputs.encoder[0]
    if inputs.model:
        assets["tokenizer_dir"] = inputs.model[0]
    result = compute(
        snakemake.wildcards.metric,
        rows,
        {"length_targets": snakemake.params.length_targets, **snakemake.params.settings, **assets},
    )
    write_json(result, snakemake.output[0])
