from reprolm.lock import lm_eval_revisions, locked_hub, locked_revision, locked_source
from reprolm.models.local import adapter_base, adapter_hashes, local_checkpoint_hash


# Downloads run on the submitting host: compute nodes often have no internet access.
localrules:
    raw_source,
    released_file,
    download_base_model,
    local_base_model,
    lm_eval_task_data,
    nltk_data,
    download_hub_model,


rule raw_source:
    input:
        raw_source_files,
    output:
        directory("resources/raw/{source}"),
    log:
        "logs/raw_source/{source}.log",
    conda:
        "../envs/core.yaml"
    params:
        code=raw_source_code,
        spec=lambda wildcards: canonical(
            locked_source(config["sources"][wildcards.source], LOCK)
        ),
    script:
        "../scripts/raw_source.py"


# A benchmark's released files (FLR's FLASK reviews and MT-Bench grades) from their public
# URLs, checked against their published checksums; a file already at its path (copied by hand
# where the submitting host has no internet) is used as it is.
rule released_file:
    output:
        "{released}",
    log:
        "logs/released_file/{released}.log",
    wildcard_constraints:
        released=released_file_paths(),
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("released_file.py"),
        key=lambda wildcards: RELEASED_FILES[wildcards.released].key,
        url=lambda wildcards: RELEASED_FILES[wildcards.released].url,
        checksum=lambda wildcards: released_checksum(
            LOCK,
            RELEASED_FILES[wildcards.released].url,
            RELEASED_FILES[wildcards.released].checksum,
        ),
    script:
        "../scripts/released_file.py"


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
        code=tokenizer_code,
        spec=lambda wildcards: canonical(config["tokenizers"][wildcards.tokenizer]),
        schemas=tokenizer_schemas,
    script:
        "../scripts/tokenizer.py"


# Built tiny models (compute: pretraining) and hub checkpoints (network) share one output
# pattern; each base name is claimed by exactly one rule through its config section.
rule build_base_model:
    input:
        unpack(build_base_model_inputs),
    output:
        directory("resources/models/{base}"),
    log:
        "logs/build_base_model/{base}.log",
    benchmark:
        "benchmarks/build_base_model/{base}.tsv"
    wildcard_constraints:
        base=base_names("build"),
    conda:
        "../envs/train.yaml"
    threads: stage_threads("finetune")
    params:
        code=base_model_code,
        build=lambda wildcards: canonical(
            config["base_models"][wildcards.base]["build"]
        ),
        schemas=base_model_schemas,
        seed=config["seed"],
    script:
        "../scripts/build_base_model.py"


rule download_base_model:
    output:
        directory("resources/models/{base}"),
    log:
        "logs/download_base_model/{base}.log",
    wildcard_constraints:
        base=base_names("hub"),
    conda:
        "../envs/train.yaml"
    params:
        code=library_code("download_base_model.py"),
        hub=lambda wildcards: canonical(
            locked_hub(config["base_models"][wildcards.base]["hub"], LOCK, "model")
        ),
    script:
        "../scripts/download_base_model.py"


# A researcher's own checkpoint folder, linked in. Its content hash is a param: new content
# under the folder's name reruns this and what was made from it; a touched file does not.
rule local_base_model:
    output:
        directory("resources/models/{base}"),
    log:
        "logs/local_base_model/{base}.log",
    wildcard_constraints:
        base=local_base_names(adapters=False),
    conda:
        "../envs/core.yaml"
    params:
        code=library_code("local_base_model.py"),
        path=lambda wildcards: config["base_models"][wildcards.base]["path"],
        content=lambda wildcards: local_checkpoint_hash(
            config["base_models"][wildcards.base]["path"],
            paths.base_model_dir(wildcards.base),
        ),
    script:
        "../scripts/local_base_model.py"


# A researcher's LoRA adapter, merged into its base (a configured base model, an input here,
# or a checkpoint folder hashed as a param): a plain checkpoint that every stage loads. The
# adapter's hash is a param, so new adapter weights rerun this and what was made from it.
rule adapter_base_model:
    input:
        unpack(adapter_base_model_inputs),
    output:
        directory("resources/models/{base}"),
    log:
        "logs/adapter_base_model/{base}.log",
    benchmark:
        "benchmarks/adapter_base_model/{base}.tsv"
    wildcard_constraints:
        base=local_base_names(adapters=True),
    conda:
        "../envs/train.yaml"
    resources:
        **stage_routing("extrapolate"),
        mem_mb=stage_resource("extrapolate", "mem_mb"),
        runtime=stage_resource("extrapolate", "runtime"),
    params:
        code=library_code("adapter_base_model.py"),
        path=lambda wildcards: config["base_models"][wildcards.base]["path"],
        base_folder=lambda wildcards: adapter_base(
            config["base_models"], wildcards.base
        ).folder,
        content=lambda wildcards: adapter_hashes(config["base_models"], wildcards.base),
    script:
        "../scripts/adapter_base_model.py"


# What cluster jobs would otherwise fetch on their nodes: an lm-eval task's hub datasets
# (into the datasets cache; jobs read it with the hubs offline), NLTK data, sentence encoders.
rule lm_eval_task_data:
    output:
        directory("resources/lm_eval_data/{task}"),
    log:
        "logs/lm_eval_task_data/{task}.log",
    conda:
        "../envs/evaluate.yaml"
    params:
        code=library_code("lm_eval_task_data.py"),
        revisions=lambda wildcards: lm_eval_revisions(LOCK, wildcards.task),
    script:
        "../scripts/lm_eval_task_data.py"


rule nltk_data:
    output:
        directory("resources/nltk_data/{package}"),
    log:
        "logs/nltk_data/{package}.log",
    conda:
        "../envs/evaluate.yaml"
    params:
        code=library_code("nltk_data.py"),
        locked=lambda wildcards: LOCK.get(f"nltk {wildcards.package}", {}).get("sha256"),
    script:
        "../scripts/nltk_data.py"


rule download_hub_model:
    output:
        directory("resources/hub_models/{repo}"),
    log:
        "logs/download_hub_model/{repo}.log",
    conda:
        "../envs/evaluate.yaml"
    params:
        code=library_code("download_hub_model.py"),
        repo=lambda wildcards: lookups.hub_model_repo(
            config, f"resources/hub_models/{wildcards.repo}"
        ),
        revision=lambda wildcards: locked_revision(
            LOCK,
            "model",
            lookups.hub_model_repo(config, f"resources/hub_models/{wildcards.repo}"),
        ),
    script:
        "../scripts/download_hub_model.py"
