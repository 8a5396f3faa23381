from reprolm.aggregate.leaderboard import write_leaderboard
from reprolm.provenance import tracked_step

with tracked_step(snakemake):
    write_leaderboard(
        snakemake.params.models,
        snakemake.input.grades,
        snakemake.input.models,
        snakemake.params.studies,
        snakemake.output[0],
    )
