from reprolm.provenance import tracked_step
from reprolm.stopping import watch_for_stop
from reprolm.train.finetune import FinetuneSpec
from reprolm.train.launch import launch
from reprolm.train.tracking import report_to, run_name

# A stop signal from SLURM saves progress at the next safe point (reprolm.stopping).
watch_for_stop()
with tracked_step(snakemake) as log:
    spec = FinetuneSpec(
        base_model=snakemake.input.base,
        output_dir=snakemake.output[0],
        checkpoint_root=snakemake.params.checkpoint_root,
        train_file=snakemake.input.train,
        recipe=dict(snakemake.params.recipe),
        seed=snakemake.params.seed,
        add_tokens=list(snakemake.params.add_tokens),
        chat_template=snakemake.params.chat_template,
        deepspeed=snakemake.input.deepspeed[0] if snakemake.input.deepspeed else None,
        precision=snakemake.params.precision,
    )
    spec.report_to = report_to(snakemake.config.get("tracking", {}), run_name(spec.output_dir, spec.key()))
    launch(spec, snakemake.params.launcher, max(1, snakemake.resources.gpu), log_path=snakemake.log[0])
