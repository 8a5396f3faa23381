rule finetune:
    input:
        base=lambda wildcards: lookups.base_model_dir(wildcards.base),
        train=recipe_train_file,
        deepspeed=deepspeed_config,
    output:
        directory("results/models/{base}/{recipe}"),
    log:
        "logs/finetune/{base}/{recipe}.log",
    benchmark:
        "benchmarks/finetune/{base}/{recipe}.tsv"
    conda:
        "../envs/train.yaml"
    threads: 2
    resources:
        gpu=stage_resource("finetune", "gpus"),
        mem_mb=stage_resource("finetune", "mem_mb"),
        runtime=stage_resource("finetune", "runtime"),
    params:
        recipe=lambda wildcards: lookups.canonical(config["recipes"][wildcards.recipe]),
        add_tokens=lambda wildcards: lookups.canonical(
            lookups.finetune_tokens(config, wildcards.recipe)
        ),
        launcher=lambda wildcards: lookups.model_settings(
            config, wildcards.base, "finetune"
        )["launcher"],
        precision=lambda wildcards: lookups.model_settings(
            config, wildcards.base, "finetune"
        )["precision"],
        checkpoint_root="results/checkpoints/{base}/{recipe}",
        seed=config["seed"],
    script:
        "../scripts/finetune.py"
