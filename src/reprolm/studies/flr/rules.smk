# FLR's own step: each judge's mean score per model on a benchmark of models' answers,
# ranked against the models' arena ELO (flr.ranking). Included by the Snakefile with every
# registered study's rules; two rules, as every judge stage (judge.smk).
localrules:
    model_ranking_api,


for api in (False, True):

    rule:
        name:
            judge_rule("model_ranking", api)
        input:
            unpack(judged_dataset_inputs),
            elo=lambda wildcards: config["flr"]["ranking"]["elo"],
        output:
            "results/scores/model_ranking/{judge}/{dataset}/{split}.json",
        log:
            "logs/model_ranking/{judge}/{dataset}/{split}.log",
        wildcard_constraints:
            judge=judge_name_pattern(api),
        group:
            pack_group(judge_rule("model_ranking", api))
        conda:
            os.path.join(ENVS, "evaluate.yaml")
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code(study(config, "flr").script("model_ranking.py")),
            judge=judge_spec,
            metric="model_ranking",
            seed=config["seed"],
        script:
            "scripts/model_ranking.py"
