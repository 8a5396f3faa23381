rule generate:
    input:
        model=model_dir,
        prompts=promptset_file,
    output:
        "results/generations/{base}/{recipe}/{promptset}.parquet",
    log:
        "logs/generate/{base}/{recipe}/{promptset}.log",
    benchmark:
        "benchmarks/generate/{base}/{recipe}/{promptset}.tsv"
    conda:
        "../envs/generate.yaml"
    threads: stage_threads("generate")
    resources:
        **stage_routing("generate"),
        gpu=stage_resource("generate", "gpus"),
        nodes=stage_nodes("generate"),
        mem_mb=stage_resource("generate", "mem_mb"),
        runtime=stage_resource("generate", "runtime"),
        slurm_extra=stage_stop_signal("generate"),
    params:
        code=library_code("generate.py"),
        promptset=lambda wildcards: canonical(
            lookups.promptset_spec(config, wildcards.promptset)
        ),
        length_prompt=lambda wildcards: canonical(
            lookups.length_prompt(config, wildcards.recipe)
        ),
        length_targets=canonical(config.get("length_targets")),
        backend=config["generation"]["backend"],
        batch_size=config["generation"]["batch_size"],
        shard_size=config["generation"]["shard_size"],
        progress_root="results/checkpoints/generate/{base}/{recipe}/{promptset}",
        precision=lambda wildcards: model_settings(config, wildcards.base, "generate")[
            "precision"
        ],
        seed=lambda wildcards: lookups.sampling_seed(config, wildcards.promptset),
    script:
        "../scripts/generate.py"
