from reprolm.io import write_json
from reprolm.provenance import tracked_step
from reprolm.score.suites import run_suite

with tracked_step(snakemake):
    result = run_suite(
        snakemake.input.model,
        snakemake.params.suite,
        snakemake.params.sources,
        task_yamls=snakemake.params.task_yamls,
        backend=snakemake.params.backend,
        precision=snakemake.params.precision,
        seed=snakemake.params.seed,
        tensor_parallel_size=max(1, snakemake.resources.gpu),
        nltk_data=list(snakemake.input.nltk_data),
        samples_output=snakemake.output.samples,
        cache_root=snakemake.params.cache_root,
        tracking=snakemake.config.get("tracking", {}),
        artifact=snakemake.output.score,
    )
    write_json({"metric": "lm_eval", **result}, snakemake.output.score)
