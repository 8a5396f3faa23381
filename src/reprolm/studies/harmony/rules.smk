# LM-Harmony's own step: a model fine-tuned on one task's training split and evaluated
# before training and after every epoch (harmony.tasks, harmony.train). Included by the
# Snakefile with every registered study's rules.
from reprolm.studies.harmony import task_inputs, task_spec


rule train_before_test:
    input:
        unpack(lambda wildcards: task_inputs(config, wildcards.task)),
        model=model_dir,
    output:
        "results/scores/train_before_test/{base}/{recipe}/{task}.json",
    log:
        "logs/train_before_test/{base}/{recipe}/{task}.log",
    benchmark:
        "benchmarks/train_before_test/{base}/{recipe}/{task}.tsv"
    conda:
        os.path.join(ENVS, "train.yaml")
    threads: stage_threads("train_before_test")
    resources:
        **stage_routing("train_before_test"),
        gpu=stage_resource("train_before_test", "gpus"),
        nodes=stage_nodes("train_before_test"),
        mem_mb=stage_resource("train_before_test", "mem_mb"),
        runtime=stage_resource("train_before_test", "runtime"),
        slurm_extra=stage_stop_signal("train_before_test"),
    params:
        code=lambda wildcards: task_reading_code(
            study(config, "harmony").script("train_before_test.py"),
            [task_spec(config, wildcards.task)["task"]],
        ),
        task=lambda wildcards: canonical(task_spec(config, wildcards.task)),
        task_yaml=lambda wildcards: lm_eval_yamls([task_spec(config, wildcards.task)])[
            task_spec(config, wildcards.task)["task"]
        ],
        train=canonical(config.get("harmony", {}).get("train", {})),
        checkpoint_root="results/checkpoints/train_before_test/{base}/{recipe}/{task}",
        seed=config["seed"],
    script:
        "scripts/train_before_test.py"
