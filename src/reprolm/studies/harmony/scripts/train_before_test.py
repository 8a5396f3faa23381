from reprolm.provenance import tracked_step
from reprolm.score.lm_eval_bridge import TaskSpec
from reprolm.stopping import watch_for_stop
from reprolm.studies.harmony.train_before_test import run_key, train_before_test
from reprolm.train.tracking import report_to, run_name

# A stop signal from SLURM saves progress at the next safe point (reprolm.stopping).
watch_for_stop()
with tracked_step(snakemake) as log:
    task = snakemake.params.task
    spec = TaskSpec(
        name=task["name"],
        task=task["task"],
        num_fewshot=0,
        metric=task["metric"],
        data_dir=snakemake.input.docs[0] if snakemake.input.docs else None,
        gen_kwargs=task.get("gen_kwargs"),
        yaml=snakemake.params.task_yaml,
    )
    result = train_before_test(
        model_path=snakemake.input.model,
        spec=spec,
        recipe=snakemake.params.train,
        seed=snakemake.params.seed,
        output=snakemake.output[0],
        checkpoint_root=snakemake.params.checkpoint_root,
        report_to=report_to(
            snakemake.config.get("tracking", {}),
            run_name(
                snakemake.output[0],
                run_key(snakemake.input.model, spec, snakemake.params.train, snakemake.params.seed),
            ),
        ),
    )
    log.info(
        "direct %.4f, train-before-test %.4f (epoch %d)",
        result["direct_eval"],
        result["train_before_test"],
        result["best_epoch"],
    )
