# Every judge stage is two rules (common.smk: judge_rule): `{stage}` for judges that run a
# model, submitted like any model job, and `{stage}_api` for judges that only send requests
# to an API, run on the submitting host (compute nodes often have no internet) and at most
# `--resources api_requests=N` at once. The judge wildcard's constraint keeps them disjoint.
localrules:
    grade_api,
    win_rate_api,
    pair_accuracy_api,
    rating_agreement_api,
    judge_released_api,
    judge_released_grades_api,


for api in (False, True):

    rule:
        name:
            judge_rule("grade", api)
        input:
            unpack(judge_inputs),
            generations="results/generations/{base}/{recipe}/{promptset}.parquet",
        output:
            "results/scores/grade_{judge}/{base}/{recipe}/{promptset}.json",
        log:
            "logs/grade/{judge}/{base}/{recipe}/{promptset}.log",
        benchmark:
            "benchmarks/grade/{judge}/{base}/{recipe}/{promptset}.tsv"
        wildcard_constraints:
            judge=judge_name_pattern(api),
        group:
            pack_group(judge_rule("grade", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("grade.py"),
            judge=judge_spec,
            seed=config["seed"],
        script:
            "../scripts/grade.py"

    rule:
        name:
            judge_rule("win_rate", api)
        input:
            unpack(win_rate_inputs),
        output:
            "results/scores/win_rate_{judge}/{base}/{recipe}/{promptset}.json",
        log:
            "logs/win_rate/{judge}/{base}/{recipe}/{promptset}.log",
        benchmark:
            "benchmarks/win_rate/{judge}/{base}/{recipe}/{promptset}.tsv"
        wildcard_constraints:
            judge=judge_name_pattern(api),
        group:
            pack_group(judge_rule("win_rate", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("win_rate.py"),
            judge=judge_spec,
            reference=lambda wildcards: lookups.promptset_spec(
                config, wildcards.promptset
            ).get("reference", "dataset"),
            seed=config["seed"],
        script:
            "../scripts/win_rate.py"

    rule:
        name:
            judge_rule("pair_accuracy", api)
        input:
            unpack(judge_inputs),
            pairs="results/datasets/{dataset}/{split}.parquet",
        output:
            "results/scores/pair_accuracy/{judge}/{dataset}/{split}.json",
        log:
            "logs/pair_accuracy/{judge}/{dataset}/{split}.log",
        wildcard_constraints:
            judge=judge_name_pattern(api),
        group:
            pack_group(judge_rule("pair_accuracy", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("pair_accuracy.py"),
            judge=judge_spec,
            seed=config["seed"],
        script:
            "../scripts/pair_accuracy.py"

    rule:
        name:
            judge_rule("rating_agreement", api)
        input:
            unpack(judged_dataset_inputs),
        output:
            "results/scores/rating_agreement/{judge}/{dataset}/{split}.json",
        log:
            "logs/rating_agreement/{judge}/{dataset}/{split}.log",
        wildcard_constraints:
            judge=judge_name_pattern(api),
        group:
            pack_group(judge_rule("rating_agreement", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("reward_benchmark.py"),
            judge=judge_spec,
            metric="rating_agreement",
            seed=config["seed"],
        script:
            "../scripts/reward_benchmark.py"


for api in (False, True):

    rule:
        name:
            judge_rule("judge_released", api)
        input:
            unpack(judge_inputs),
            released=released_verdict_files,
        output:
            "results/scores/judge_released/{judge}/{retired}.json",
        log:
            "logs/judge_released/{judge}/{retired}.log",
        wildcard_constraints:
            judge=judge_name_pattern(api),
            retired=retired_judge_pattern(),
        group:
            pack_group(judge_rule("judge_released", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("judge_released.py"),
            judge=judge_spec,
            sample=released_sample,
            seed=config["seed"],
        script:
            "../scripts/judge_released.py"


for api in (False, True):

    rule:
        name:
            judge_rule("judge_released_grades", api)
        input:
            unpack(released_grade_inputs),
        output:
            "results/scores/judge_released_grades/{judge}/{retired}.json",
        log:
            "logs/judge_released_grades/{judge}/{retired}.log",
        wildcard_constraints:
            judge=judge_name_pattern(api),
            retired=retired_judge_pattern(),
        group:
            pack_group(judge_rule("judge_released_grades", api))
        conda:
            "../envs/evaluate.yaml"
        threads: judge_threads
        resources:
            **judge_job_resources(api),
        params:
            code=library_code("judge_released_grades.py"),
            judge=judge_spec,
            seed=config["seed"],
        script:
            "../scripts/judge_released_grades.py"


rule judge_agreement:
    input:
        unpack(judged_released_items),
    output:
        # The report shows it as a rendered page (rule judge_agreement_page).
        table="results/tables/judge_agreement/{study}.csv",
    log:
        "logs/judge_agreement/{study}.log",
    conda:
        "../envs/evaluate.yaml"
    params:
        code=library_code("judge_agreement.py"),
        succession=lambda wildcards: canonical(study_succession(wildcards.study)),
    script:
        "../scripts/judge_agreement.py"
