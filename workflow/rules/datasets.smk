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
        builder=lambda wildcards: config["datasets"][wildcards.dataset]["builder"],
        options=lambda wildcards: config["datasets"][wildcards.dataset].get(
            "params", {}
        ),
        schemas=lambda wildcards: source_schemas(wildcards.dataset),
        length_targets=config["length_targets"],
    script:
        "../scripts/dataset.py"
