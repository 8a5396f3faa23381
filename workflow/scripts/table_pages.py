from reprolm.aggregate.report_pages import served_model_notes, write_table_pages
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_table_pages(
        snakemake.input.tables,
        snakemake.output.pages,
        snakemake.wildcards.study,
        snakemake.params.judges,
        snakemake.input.get("agreement"),
        served_model_notes(snakemake.params.endpoint_generations),
    )
