from reprolm.forkserver import run_in_forkserver

run_in_forkserver()

from pathlib import Path

from reprolm.aggregate.report_pages import write_table_page
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    table = Path(snakemake.input.table)
    write_table_page(table, snakemake.output.page, f"{snakemake.wildcards.study}: {table.parent.name}")
