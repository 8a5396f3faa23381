rule finetune:
    input:
        base=finetune_start,
        train=recipe_train_file,
        deepspeed=deepspeed_config,
    output:
        directory("results/models/{base}/{recipe}"),
    log:
        "logs/finetune/{base}/{recipe}.log",
    benchmark:
        "benchmarks/finetune/{base}/{recipe}.tsv"
    # "{recipe}+expo{alpha}" folders are the extrapolate rule's.
    wildcard_constraints:
        recipe=r"[A-Za-z0-9_.-]+",
    conda:
        "../envs/train.yaml"
    threads: stage_threads("finetune")
    resources:
        **stage_routing("finetune"),
        gpu=stage_resource("finetune", "gpus"),
        nodes=stage_nodes("finetune"),
        mem_mb=stage_resource("finetune", "mem_mb"),
        runtime=stage_resource("finetune", "runtime"),
        slurm_extra=stage_stop_signal("finetune"),
    params:
        code=library_code("finetune.py"),
        recipe=lambda wildcards: canonical(
            lookups.finetune_spec(config, wildcards.recipe)
        ),
        add_tokens=lambda wildcards: canonical(
            lookups.finetune_tokens(config, wildcards.recipe)
        ),
        chat_template=lambda wildcards: lookups.finetune_chat_template(
            config, wildcards.recipe
        ),
        launcher=lambda wildcards: model_settings(config, wildcards.base, "finetune")[
            "launcher"
        ],
        precision=lambda wildcards: model_settings(config, wildcards.base, "finetune")[
            "precision"
        ],
        checkpoint_root="results/checkpoints/{base}/{recipe}",
        seed=lambda wildcards: lookups.recipe_seed(config, wildcards.recipe),
    script:
        "../scripts/finetune.py"
