import pandas as pd

from reprolm.provenance import atomic_path, tracked_step
from reprolm.provenance.query import provenance_table

with tracked_step(snakemake) as log:
    rows = provenance_table(snakemake.input)
    log.info("%d artifacts", len(rows))
    with atomic_path(snakemake.output[0]) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
