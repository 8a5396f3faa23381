from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.judges import job_judge, request_counts
from reprolm.score.judging import judge_win_rate

with tracked_step(snakemake) as log:
    judge = job_judge(snakemake)
    result = judge_win_rate(judge, snakemake.input.answers, snakemake.input.get("reference"))
    log.info("win rate %.2f, length-controlled %.2f (n=%d)", result["win_rate"], result["lc_win_rate"], result["n"])
    write_json(
        {
            "metric": "win_rate",
            "judge": snakemake.wildcards.judge,
            "reference": snakemake.params.reference,
            **result,
            **request_counts(judge),
        },
        snakemake.output[0],
    )
