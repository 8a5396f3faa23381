localrules:
    raw_source,


rule raw_source:
    output:
        directory("resources/raw/{source}"),
    log:
        "logs/raw_source/{source}.log",
    conda:
        "../envs/core.yaml"
    params:
        spec=lambda wildcards: lookups.canonical(config["sources"][wildcards.source]),
    script:
        "../scripts/raw_source.py"


rule tokenizer:
    input:
        tokenizer_inputs,
    output:
        directory("resources/tokenizers/{tokenizer}"),
    log:
        "logs/tokenizer/{tokenizer}.log",
    conda:
        "../envs/core.yaml"
    params:
        spec=lambda wildcards: lookups.canonical(
            config["tokenizers"][wildcards.tokenizer]
        ),
        schemas=tokenizer_schemas,
    script:
        "../scripts/tokenizer.py"


rule base_model:
    input:
        unpack(base_model_inputs),
    output:
        directory("resources/models/{base}"),
    log:
        "logs/base_model/{base}.log",
    benchmark:
        "benchmarks/base_model/{base}.tsv"
    conda:
        "../envs/train.yaml"
    threads: stage_threads("finetune")
    params:
        spec=lambda wildcards: lookups.canonical(config["base_models"][wildcards.base]),
        schemas=base_model_schemas,
        seed=config["seed"],
    script:
        "../scripts/base_model.py"
