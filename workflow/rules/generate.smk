# Generation is two rules: `generate` for models with weights, submitted like any model job,
# and `generate_api` for models asked through an OpenAI-compatible endpoint
# (`base_models.*.endpoint`), which only send requests: run on the submitting host (compute
# nodes often have no internet), at most `--resources api_requests=N` at once. The base
# wildcard's constraint keeps them disjoint.
localrules:
    generate_api,


for api in (False, True):

    rule:
        name:
            "generate_api" if api else "generate"
        input:
            unpack(generation_inputs),
        output:
            "results/generations/{base}/{recipe}/{promptset}.parquet",
        log:
            "logs/generate/{base}/{recipe}/{promptset}.log",
        benchmark:
            "benchmarks/generate/{base}/{recipe}/{promptset}.tsv"
        wildcard_constraints:
            base=base_names("endpoint") if api else base_names("build", "hub", "path"),
        group:
            pack_group("generate_api" if api else "generate")
        conda:
            "../envs/generate.yaml"
        threads: 1 if api else stage_threads("generate")
        resources:
            **generation_job(api)["resources"],
            **pack_resources("generate_api" if api else "generate"),
        params:
            **generation_job(api)["params"],
            code=generation_code,
            promptset=lambda wildcards: canonical(
                lookups.generation_spec(config, wildcards.promptset)
            ),
            length_prompt=lambda wildcards: canonical(
                lookups.length_prompt(config, wildcards.recipe)
            ),
            length_targets=prompt_targets,
            shard_size=config["generation"]["shard_size"],
            progress_root="results/checkpoints/generate/{base}/{recipe}/{promptset}",
            seed=lambda wildcards: lookups.sampling_seed(config, wildcards.promptset),
        script:
            "../scripts/generate.py"
