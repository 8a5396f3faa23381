import reprolm.studies  # noqa: F401  (the studies register their own rules' stages)
from reprolm.io import atomic_path
from reprolm.provenance import tracked_step
from reprolm.provenance.cost import cost_table, lineage_jobs, summary

with tracked_step(snakemake) as log:
    table = cost_table(lineage_jobs([snakemake.input.tables, snakemake.input.plots]))
    with atomic_path(snakemake.output[0]) as tmp:
        table.to_csv(tmp, index=False, float_format="%.6g")
    log.info("%s", summary(table, f"{snakemake.wildcards.study}'s tables and plots"))
