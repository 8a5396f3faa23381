localrules:
    raw_source,


rule raw_source:
    output:
        directory("resources/raw/{source}"),
    params:
        spec=lambda wildcards: config["sources"][wildcards.source],
    log:
        "logs/raw_source/{source}.log",
    script:
        "../scripts/raw_source.py"


rule tokenizer:
    input:
        tokenizer_inputs,
    output:
        directory("resources/tokenizers/{tokenizer}"),
    params:
        spec=lambda wildcards: config["tokenizers"][wildcards.tokenizer],
        schemas=lambda wildcards: {
            s: config["sources"][s]["schema"]
            for s in config["tokenizers"][wildcards.tokenizer]["corpus"]
        },
    log:
        "logs/tokenizer/{tokenizer}.log",
    script:
        "../scripts/tokenizer.py"


rule base_model:
    input:
        unpack(base_model_inputs),
    output:
        directory("resources/models/{base}"),
    params:
        spec=lambda wildcards: config["base_models"][wildcards.base],
        schemas=lambda wildcards: {s: v["schema"] for s, v in config["sources"].items()},
        seed=config["seed"],
    log:
        "logs/base_model/{base}.log",
    benchmark:
        "benchmarks/base_model/{base}.tsv"
    script:
        "../scripts/base_model.py"
