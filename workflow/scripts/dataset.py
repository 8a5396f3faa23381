from pathlib import Path

import reprolm.studies  # noqa: F401  (the studies register their own dataset builders)
from reprolm.data.builders import BuildContext, build_split
from reprolm.length import configured_targets
from reprolm.provenance import tracked_step

with tracked_step(snakemake) as log:
    context = BuildContext(
        sources={name: Path(path) for name, path in snakemake.input.items()},
        schemas=snakemake.params.schemas,
        params=snakemake.params.options,
        targets=configured_targets(snakemake.params.length_targets),
    )
    rows = build_split(snakemake.params.builder, context, snakemake.wildcards.split, snakemake.output[0])
    log.info("%d rows", rows)
