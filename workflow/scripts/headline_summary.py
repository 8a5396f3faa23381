from reprolm.forkserver import run_in_forkserver

run_in_forkserver()

from reprolm.aggregate.report_pages import write_headline_summary
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_headline_summary(snakemake.input.headlines, snakemake.input.directions, snakemake.output[0])
