from pathlib import Path

from reprolm.aggregate.judge_agreement import succession_table
from reprolm.io import write_table
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    table = Path(snakemake.output.table)
    judged = {
        retired: snakemake.input[retired]
        for retired in snakemake.params.succession
        if retired in snakemake.input.keys()
    }
    write_table(
        succession_table(snakemake.params.succession, judged), table.parent, table.stem, decimals=4, markdown=False
    )
