# ExPO's own step: the alpha search over each aligned model's extrapolations (the
# extrapolate rule, a shared stage, builds them). Included by the Snakefile with every
# registered study's rules.
from reprolm.studies.expo import alpha_search_grades


# Data-dependent: which extrapolation the ExPO tables evaluate is known only once the
# judge has graded the grid.
checkpoint alpha_search:
    input:
        lambda wildcards: list(
            alpha_search_grades(config, wildcards.base, wildcards.recipe).values()
        ),
    output:
        "results/scores/alpha_search/{base}/{recipe}/{promptset}.json",
    log:
        "logs/alpha_search/{base}/{recipe}/{promptset}.log",
    conda:
        os.path.join(ENVS, "core.yaml")
    params:
        code=library_code(study(config, "expo").script("alpha_search.py")),
        alphas=lambda wildcards: list(
            alpha_search_grades(config, wildcards.base, wildcards.recipe)
        ),
    script:
        "scripts/alpha_search.py"
