from reprolm.provenance import tracked_step
from reprolm.studies import study

with tracked_step(snakemake):
    study({"study_modules": snakemake.params.study_modules}, snakemake.wildcards.study).write_tables(
        snakemake.input.scores,
        snakemake.params.study,
        snakemake.params.config,
        snakemake.output.tables,
        snakemake.output.plots,
    )
