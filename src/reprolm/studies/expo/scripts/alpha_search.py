import json
from pathlib import Path

from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.studies.expo import choose_alpha

with tracked_step(snakemake) as log:
    grades = {
        float(alpha): json.loads(Path(path).read_text())
        for alpha, path in zip(snakemake.params.alphas, snakemake.input, strict=True)
    }
    result = choose_alpha(grades)
    log.info(
        "alpha curve %s; best alpha %g",
        {point["alpha"]: point["mean_grade"] for point in result["curve"]},
        result["best_alpha"],
    )
    write_json(
        {"metric": "alpha_search", "base": snakemake.wildcards.base, "recipe": snakemake.wildcards.recipe, **result},
        snakemake.output[0],
    )
