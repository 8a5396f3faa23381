from pathlib import Path

from reprolm.aggregate.paper_comparison import write_paper_comparison
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_paper_comparison(
        snakemake.input.headlines,
        snakemake.params.study_headlines,
        Path(snakemake.input.tables[0]).parent,
        snakemake.params.studies,
        snakemake.output.headlines,
        snakemake.output.directions,
        snakemake.params.claims,
    )
