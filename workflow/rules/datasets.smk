rule dataset:
    input:
        unpack(dataset_inputs),
    output:
        "results/datasets/{dataset}/{split}.parquet",
    log:
        "logs/dataset/{dataset}/{split}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=builder_code,
        builder=lambda wildcards: lookups.canonical(
            config["datasets"][wildcards.dataset]["builder"]
        ),
        options=lambda wildcards: lookups.canonical(
            config["datasets"][wildcards.dataset].get("params", {})
        ),
        schemas=lambda wildcards: lookups.canonical(source_schemas(wildcards.dataset)),
        length_targets=lookups.canonical(config.get("length_targets")),
    script:
        "../scripts/dataset.py"
