rule extrapolate:
    input:
        sft=expo_reference_dir,
        aligned=model_dir,
    output:
        directory("results/models/{base}/{recipe}+expo{alpha}"),
    log:
        "logs/extrapolate/{base}/{recipe}+expo{alpha}.log",
    benchmark:
        "benchmarks/extrapolate/{base}/{recipe}+expo{alpha}.tsv"
    wildcard_constraints:
        recipe=r"[A-Za-z0-9_.-]+",
        alpha=r"[0-9]+(\.[0-9]+)?",
    group:
        pack_group("extrapolate")
    conda:
        "../envs/train.yaml"
    resources:
        **stage_routing("extrapolate"),
        **pack_resources("extrapolate"),
        mem_mb=stage_resource("extrapolate", "mem_mb"),
        runtime=stage_resource("extrapolate", "runtime"),
    params:
        code=library_code("extrapolate.py"),
        alpha=lambda wildcards: float(wildcards.alpha),
    script:
        "../scripts/extrapolate.py"
