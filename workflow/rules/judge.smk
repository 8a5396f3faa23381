rule grade:
    input:
        unpack(judge_inputs),
        generations="results/generations/{base}/{recipe}/{promptset}.parquet",
    output:
        "results/scores/grade_{judge}/{base}/{recipe}/{promptset}.json",
    log:
        "logs/grade/{judge}/{base}/{recipe}/{promptset}.log",
    benchmark:
        "benchmarks/grade/{judge}/{base}/{recipe}/{promptset}.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: judge_threads
    resources:
        **judge_routing(),
        gpu=judge_resource("gpus"),
        mem_mb=judge_resource("mem_mb"),
        runtime=judge_resource("runtime"),
    params:
        code=library_code("grade.py"),
        judge=judge_spec,
        seed=config["seed"],
    script:
        "../scripts/grade.py"


rule win_rate:
    input:
        unpack(win_rate_inputs),
    output:
        "results/scores/win_rate_{judge}/{base}/{recipe}/{promptset}.json",
    log:
        "logs/win_rate/{judge}/{base}/{recipe}/{promptset}.log",
    benchmark:
        "benchmarks/win_rate/{judge}/{base}/{recipe}/{promptset}.tsv"
    conda:
        "../envs/evaluate.yaml"
    threads: judge_threads
    resources:
        **judge_routing(),
        gpu=judge_resource("gpus"),
        mem_mb=judge_resource("mem_mb"),
        runtime=judge_resource("runtime"),
    params:
        code=library_code("win_rate.py"),
        judge=judge_spec,
        reference=lambda wildcards: config["promptsets"][wildcards.promptset].get(
            "reference", "dataset"
        ),
        seed=config["seed"],
    script:
        "../scripts/win_rate.py"


rule pair_accuracy:
    input:
        unpack(judge_inputs),
        pairs="results/datasets/{dataset}/{split}.parquet",
    output:
        "results/scores/pair_accuracy/{judge}/{dataset}/{split}.json",
    log:
        "logs/pair_accuracy/{judge}/{dataset}/{split}.log",
    conda:
        "../envs/evaluate.yaml"
    threads: judge_threads
    resources:
        **judge_routing(),
        gpu=judge_resource("gpus"),
        mem_mb=judge_resource("mem_mb"),
        runtime=judge_resource("runtime"),
    params:
        code=library_code("pair_accuracy.py"),
        judge=judge_spec,
        seed=config["seed"],
    script:
        "../scripts/pair_accuracy.py"


rule rating_agreement:
    input:
        unpack(judged_dataset_inputs),
    output:
        "results/scores/rating_agreement/{judge}/{dataset}/{split}.json",
    log:
        "logs/rating_agreement/{judge}/{dataset}/{split}.log",
    conda:
        "../envs/evaluate.yaml"
    threads: judge_threads
    resources:
        **judge_routing(),
        gpu=judge_resource("gpus"),
        mem_mb=judge_resource("mem_mb"),
        runtime=judge_resource("runtime"),
    params:
        code=library_code("reward_benchmark.py"),
        judge=judge_spec,
        seed=config["seed"],
    script:
        "../scripts/reward_benchmark.py"


rule model_ranking:
    input:
        unpack(judged_dataset_inputs),
        elo=lambda wildcards: config["flr"]["ranking"]["elo"],
    output:
        "results/scores/model_ranking/{judge}/{dataset}/{split}.json",
    log:
        "logs/model_ranking/{judge}/{dataset}/{split}.log",
    conda:
        "../envs/evaluate.yaml"
    threads: judge_threads
    resources:
        **judge_routing(),
        gpu=judge_resource("gpus"),
        mem_mb=judge_resource("mem_mb"),
        runtime=judge_resource("runtime"),
    params:
        code=library_code("reward_benchmark.py"),
        judge=judge_spec,
        seed=config["seed"],
    script:
        "../scripts/reward_benchmark.py"
