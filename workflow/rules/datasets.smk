rule dataset:
    input:
        unpack(dataset_inputs),
    output:
        "results/datasets/{dataset}/{split}.parquet",
    log:
        "logs/dataset/{dataset}/{split}.log",
    conda:
        "../envs/core.yaml"
    resources:
        mem_mb=dataset_resource("mem_mb"),
        runtime=dataset_resource("runtime"),
    params:
        code=builder_code,
        builder=lambda wildcards: canonical(
            config["datasets"][wildcards.dataset]["builder"]
        ),
        options=lambda wildcards: canonical(
            config["datasets"][wildcards.dataset].get("params", {})
        ),
        schemas=lambda wildcards: canonical(source_schemas(wildcards.dataset)),
        length_targets=builder_targets,
    script:
        "../scripts/dataset.py"
