from reprolm.aggregate.report_pages import write_table_page
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    for table, page, title in zip(snakemake.input, snakemake.output, snakemake.params.titles, strict=True):
        write_table_page(table, page, title)
