from reprolm.generate.run import generate_promptset
from reprolm.length import configured_targets
from reprolm.provenance import tracked_step
from reprolm.stopping import watch_for_stop

# A stop signal from SLURM saves progress at the next safe point (reprolm.stopping).
watch_for_stop()
with tracked_step(snakemake) as log:
    params = snakemake.params
    # generate_api's models are asked through an endpoint; generate's are run here.
    endpoint = "endpoint" in params.keys()
    rows = generate_promptset(
        model_path=None if endpoint else snakemake.input.model,
        dataset_file=snakemake.input.prompts,
        promptset=params.promptset,
        length_prompt=params.length_prompt,
        targets=configured_targets(params.length_targets),
        backend=None if endpoint else params.backend,
        backend_options=(
            {}
            if endpoint
            else {
                "batch_size": params.batch_size,
                "dtype": params.precision,
                "tensor_parallel_size": max(1, snakemake.resources.gpu),
            }
        ),
        seed=params.seed,
        output=snakemake.output[0],
        shard_size=params.shard_size,
        progress_root=params.progress_root,
        endpoint={"name": snakemake.wildcards.base, **params.endpoint} if endpoint else None,
    )
    log.info("%d samples", rows)
