"""Generation: the transformers backend on a tiny model and what a prompt set writes. The
contract every backend shares (token ids, stops, sampling, decoding) is in
``test_generation_contract.py``."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reprolm.data import fixture_world
from reprolm.generate import SamplingParams, complete, make_backend, make_request
from reprolm.generate.run import generate_promptset
from reprolm.length import configured_targets
from reprolm.models.loading import load_tokenizer
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    rng = random.Random(0)
    tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 30) for _ in range(100)], 400)
    tokenizer.add_tokens(["[MLT:10]"], special_tokens=True)
    model = build_tiny_model(
        {
            "architecture": "llama",
            "hidden_size": 32,
            "num_layers": 1,
            "num_heads": 2,
            "intermediate_size": 64,
            "max_positions": 256,
        },
        tokenizer,
        seed=0,
    )
    folder = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _prompts(backend, count):
    return [
        backend.tokenizer.apply_chat_template(
            [{"role": "user", "content": f"Describe {i} boats."}], tokenize=False, add_generation_prompt=True
        )
        for i in range(count)
    ]


def test_a_saved_tokenizer_does_not_depend_on_whether_the_hub_was_offline(tiny_model_dir, tmp_path, monkeypatch):
    """Checkpoints must hash the same whether or not a run set HF_HUB_OFFLINE."""
    import huggingface_hub.constants

    saved = []
    for offline in (True, False):
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", offline)
        folder = tmp_path / str(offline)
        load_tokenizer(tiny_model_dir).save_pretrained(folder)
        saved.append(json.loads((folder / "tokenizer_config.json").read_text()))
    assert "local_files_only" not in saved[0] and saved[0] == saved[1]


def test_importing_generation_does_not_import_vllm():
    code = "import sys, reprolm.generate, reprolm.generate.run; print('vllm' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )


def test_batched_greedy_equals_one_at_a_time(tiny_model_dir):
    backend = make_backend("transformers", tiny_model_dir, batch_size=8)
    prompts = _prompts(backend, 6)
    sampling = SamplingParams(max_new_tokens=12)
    batched = complete(backend, make_request(backend.tokenizer, prompts, sampling))
    single = [complete(backend, make_request(backend.tokenizer, [p], sampling))[0] for p in prompts]
    assert batched == single
    assert all(len(samples) == 1 for samples in batched)


def test_sampling_n_and_seed(tiny_model_dir):
    backend = make_backend("transformers", tiny_model_dir, batch_size=4)
    prompts = _prompts(backend, 3)
    sampling = SamplingParams(max_new_tokens=10, temperature=1.0, top_p=0.9, top_k=50, n=4, seed=7)
    first = complete(backend, make_request(backend.tokenizer, prompts, sampling))
    again = complete(backend, make_request(backend.tokenizer, prompts, sampling))
    assert [len(s) for s in first] == [4, 4, 4]
    assert first == again
    reseeded = SamplingParams(**{**sampling.__dict__, "seed": 8})
    other = complete(backend, make_request(backend.tokenizer, prompts, reseeded))
    assert other != first


def test_stop_tokens_and_padding_stay_out_of_the_text(tiny_model_dir):
    backend = make_backend("transformers", tiny_model_dir, batch_size=4)
    # A prompt that ends in the MLT keeps the MLT out of the generated text either way.
    prompts = [p + "[MLT:10]" for p in _prompts(backend, 2)]
    request = make_request(backend.tokenizer, prompts, SamplingParams(max_new_tokens=8), skip_special_tokens=False)
    kept = complete(backend, request)
    assert all("<|eos|>" not in s[0] and "<|pad|>" not in s[0] for s in kept)


def test_a_config_without_length_targets_generates_its_chat_prompt_sets(tiny_model_dir, tmp_path):
    """What generate.py runs for a config with no ``length_targets`` (GEM, Harmony)."""
    rows = [{"id": i, "instruction": f"Write about {i} boats."} for i in range(3)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "prompts.parquet")
    promptset = {"prompt": "chat", "template": "Briefly: {instruction}", "sampling": {"max_new_tokens": 6}}
    written = generate_promptset(
        model_path=tiny_model_dir,
        dataset_file=str(tmp_path / "prompts.parquet"),
        promptset=promptset,
        length_prompt="instruction",
        targets=configured_targets(None),
        backend="transformers",
        backend_options={"batch_size": 2},
        seed=0,
        output=str(tmp_path / "out.parquet"),
    )
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert written == len(out) == 3
    assert [r["id"] for r in out] == [0, 1, 2] and all(r["sample"] == 0 for r in out)
    assert all(f"Briefly: Write about {r['id']} boats." in r["prompt"] for r in out)


def test_a_stopped_generation_resumes_after_its_last_shard_to_the_same_samples(tiny_model_dir, tmp_path, monkeypatch):
    """A stop signal during the second of three shards: that shard finishes, the job stops
    with the first two kept, and the rerun generates only the third; the samples equal, byte
    for byte, both an uninterrupted sharded run and one unsharded run (the shard size is a
    multiple of the batch size, and each shard samples with the seed plus its first row)."""
    import signal

    from reprolm.generate import run as generation
    from reprolm.stopping import JobStopped, stop_request

    rows = [{"id": i, "instruction": f"Write about {i} boats."} for i in range(6)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "prompts.parquet")
    promptset = {"prompt": "chat", "sampling": {"max_new_tokens": 6, "temperature": 1.0, "n": 2}}

    def generate(output: str, shard_size: int, progress_root: str | None = None) -> int:
        # Targets built afresh for every attempt, as in every job process.
        return generate_promptset(
            model_path=tiny_model_dir,
            dataset_file=str(tmp_path / "prompts.parquet"),
            promptset=promptset,
            length_prompt="instruction",
            targets=configured_targets("paper"),
            backend="transformers",
            backend_options={"batch_size": 2},
            seed=3,
            output=str(tmp_path / output),
            shard_size=shard_size,
            progress_root=progress_root,
        )

    generated_shards = []
    real_generate_rows = generation._generate_rows

    def generate_rows(engine, shard_rows, *args):
        generated_shards.append([row["id"] for row in shard_rows])
        if len(generated_shards) == 2:
            stop_request.handle(signal.SIGTERM)
        return real_generate_rows(engine, shard_rows, *args)

    monkeypatch.setattr(generation, "_generate_rows", generate_rows)
    progress = tmp_path / "progress"
    try:
        with pytest.raises(JobStopped, match=r"stopped by SIGTERM after saving its progress \(2 of 3 shards of 2 "):
            generate("stopped.parquet", 2, str(progress))
    finally:
        stop_request.clear()
    assert generated_shards == [[0, 1], [2, 3]]
    assert not (tmp_path / "stopped.parquet").exists()
    assert len(list(progress.glob("*/shard-*.jsonl"))) == 2

    assert generate("stopped.parquet", 2, str(progress)) == 12
    assert generated_shards[2:] == [[4, 5]]
    assert not any(progress.iterdir())
    generate("whole.parquet", 2)
    generate("unsharded.parquet", 512)
    stopped = (tmp_path / "stopped.parquet").read_bytes()
    assert stopped == (tmp_path / "whole.parquet").read_bytes() == (tmp_path / "unsharded.parquet").read_bytes()
    texts = [r["text"] for r in pq.read_table(tmp_path / "stopped.parquet").to_pylist()]
    assert len(set(texts)) > 6, "sampled shards must not repeat each other's draws"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match=r"unknown generation backend 'tgi'; registered: \['transformers', 'vllm'\]"):
        make_backend("tgi", "/x")


def test_a_generation_record_carries_its_length_budget_and_stops(tiny_model_dir, tmp_path, monkeypatch):
    """The generate rule's script under a Snakemake job object as the rule gives it, on a Ruler
    style prompt set (the MLT starts the answer and any MLT ends it): the provenance record
    shows the prompt set's ``max_new_tokens`` (a length budget, not a secret) and the tokens
    that ended the samples."""
    import runpy
    import signal

    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import Snakemake

    from reprolm.provenance import provenance_path
    from reprolm.stopping import STOP_SIGNALS
    from workflow_helpers import REPO

    monkeypatch.chdir(tmp_path)
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")
    rows = [{"id": i, "Instruction": f"Describe {i} boats.", "TargetLength": "10", "Level": 0} for i in range(2)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "tlg.parquet")
    output = "results/generations/tiny/ruler/tlg.parquet"
    params = {
        "backend": "transformers",
        "batch_size": 2,
        "precision": "float32",
        "promptset": {"dataset": "tlg", "prompt": "target_length", "sampling": {"max_new_tokens": 7}, "split": "test"},
        "length_prompt": "mlt",
        "length_targets": [{"name": "10", "level": 0, "pm": [0, 20], "fm": [0, 20], "bin": [5, 15]}],
        "shard_size": 512,
        "progress_root": "results/checkpoints/generate/tiny/ruler/tlg",
        "seed": 0,
    }
    job = Snakemake(
        InputFiles(fromdict={"model": tiny_model_dir, "prompts": str(tmp_path / "tlg.parquet")}),
        OutputFiles([output]),
        Params(fromdict=params),
        Wildcards(fromdict={"base": "tiny", "recipe": "ruler", "promptset": "tlg"}),
        1,
        ResourceList(fromdict={"gpu": 0}),
        Log(["logs/generate/tiny/ruler/tlg.log"]),
        {},
        "generate",
        None,
    )
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        runpy.run_path(str(REPO / "workflow/scripts/generate.py"), init_globals={"snakemake": job})
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)

    assert len(pq.read_table(output)) == 2
    record = json.loads(provenance_path(output).read_text())
    assert record["params"]["promptset"]["sampling"] == {"max_new_tokens": 7}
    assert record["params"]["length_targets"][0]["name"] == "10"
    # EOS, and the MLT the prompt kind stops at; nothing in the record is redacted.
    assert record["generation"] == {"max_new_tokens": 7, "stop": ["<|eos|>", "[MLT:10]"]}
    assert "<redacted>" not in provenance_path(output).read_text()
