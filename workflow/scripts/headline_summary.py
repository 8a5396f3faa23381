from reprolm.aggregate.report_pages import write_headline_summary
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_headline_summary(snakemake.input.headlines, snakemake.input.directions, snakemake.output[0])
