from reprolm.aggregate.studies import write_study_tables
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_study_tables(
        snakemake.wildcards.study, snakemake.input, snakemake.params.study,
        snakemake.params.config, snakemake.output.tables, snakemake.output.plots,
    )
