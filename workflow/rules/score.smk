rule score:
    input:
        unpack(metric_inputs),
    output:
        "results/scores/{metric}/{base}/{recipe}/{promptset}.json",
    log:
        "logs/score/{metric}/{base}/{recipe}/{promptset}.log",
    group:
        pack_group("score")
    conda:
        "../envs/core.yaml"
    threads: score_threads
    resources:
        **score_routing(),
        **pack_resources("score"),
        gpu=score_resource("gpus"),
        mem_mb=score_resource("mem_mb"),
        runtime=score_resource("runtime"),
    params:
        code=metric_code,
        length_targets=metric_targets,
        settings=lambda wildcards: canonical(
            config.get("metrics", {}).get(wildcards.metric, {})
        ),
    script:
        "../scripts/score.py"


rule lm_eval:
    input:
        unpack(lm_eval_inputs),
    output:
        score="results/scores/lm_eval/{base}/{recipe}/{suite}.json",
        # lm-eval's per-sample log: every document's metric values, target and responses.
        samples="results/scores/lm_eval/{base}/{recipe}/{suite}.samples.jsonl.gz",
    log:
        "logs/lm_eval/{base}/{recipe}/{suite}.log",
    benchmark:
        "benchmarks/lm_eval/{base}/{recipe}/{suite}.tsv"
    group:
        pack_group("lm_eval")
    conda:
        "../envs/evaluate.yaml"
    threads: stage_threads("evaluate")
    resources:
        **stage_routing("evaluate"),
        **pack_resources("lm_eval"),
        gpu=stage_resource("evaluate", "gpus"),
        nodes=stage_nodes("evaluate"),
        mem_mb=stage_resource("evaluate", "mem_mb"),
        runtime=stage_resource("evaluate", "runtime"),
    params:
        code=lm_eval_code,
        suite=lambda wildcards: canonical(config["lm_eval_suites"][wildcards.suite]),
        task_yamls=lambda wildcards: lm_eval_yamls(
            config["lm_eval_suites"][wildcards.suite]["tasks"]
        ),
        sources=lm_eval_sources,
        backend=config["generation"]["backend"],
        precision=lambda wildcards: model_settings(config, wildcards.base, "evaluate")[
            "precision"
        ],
        seed=config["seed"],
        # Answered requests, kept until the score is written: a stopped job resumes.
        cache_root="results/checkpoints/lm_eval/{base}/{recipe}/{suite}",
    script:
        "../scripts/lm_eval.py"
