"""Benchmarks of the workflow (not timed tests): prints a table, writes bench/last_run.json.

1. the default run from a clean scratch copy: wall time and peak memory (largest process);
2. the no-op rerun right after it;
3. the dry run of config/paper.yaml: time and job count;
4. generation throughput on a tiny finetuned model: batched vs one prompt at a time;
5. one epoch's train-before-test evaluation (valid + test) with the in-memory model passed to
   lm-eval vs saving the epoch's weights and lm-eval loading them, for the tiny model and a
   270M-parameter one;
6. peak memory of an ExPO merge of two 270M-parameter checkpoints, relative to one, and of
   extrapolating one 128k-vocabulary bf16 embedding (blocks of rows vs the whole tensor);
7. one training step's loss and backward at vocabulary 32k, sequence 1024, batch 4 on the
   CPU: GEM (chunked) vs cross-entropy, time and peak memory;
8. FLR scoring on the tiny model: follow-ups packed after the shared prefix's cache vs each
   follow-up alone at batch size 1 (the original code's way), and whether the scores agree.
9. ``reprolm verify`` over the default run's results (every record re-hashed), at 1x and
   over 10 copies of the run (10x the artifacts);
10. a dry run that finds nothing to do at 10x the default grid: every base model named ten
   times, each copy's results copied from the original's and made current, metadata
   included, with ``snakemake --touch --forceall``;
11. a dry run of config/paper.yaml with LM-Harmony's base models named ten times (about
   15,000 jobs to do): the DAG's growth with the grid.

Usage: ``.venv/bin/python bench/run_bench.py [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def run(work: Path, *args: str) -> tuple[float, str]:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_HOME=str(work / "resources" / "hf_home"),
        TOKENIZERS_PARALLELISM="false",
    )
    start = time.perf_counter()
    result = subprocess.run([SNAKEMAKE, "--cores", "2", *args], cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return elapsed, result.stdout + result.stderr


def job_total(output: str) -> int:
    for line in output.splitlines():
        if line.startswith("total"):
            return int(line.split()[1])
    return 0


def generation_throughput(model_dir: Path, prompts: int = 32, max_new_tokens: int = 64) -> dict:
    from reprolm.generate import GenerationRequest, SamplingParams, make_backend

    backend = make_backend("transformers", str(model_dir), batch_size=prompts)
    tok = backend.tokenizer
    texts = [
        tok.apply_chat_template(
            [{"role": "user", "content": f"Describe the old piano number {i}."}],
            tokenize=False,
            add_generation_prompt=True,
        )
        for i in range(prompts)
    ]
    sampling = SamplingParams(max_new_tokens=max_new_tokens)
    backend.generate(GenerationRequest(texts[:2], sampling))  # warm-up
    start = time.perf_counter()
    batched = backend.generate(GenerationRequest(texts, sampling))
    batched_s = time.perf_counter() - start
    start = time.perf_counter()
    single = [backend.generate(GenerationRequest([t], sampling))[0] for t in texts]
    single_s = time.perf_counter() - start
    tokens = sum(len(tok(s[0], add_special_tokens=False).input_ids) for s in batched)
    return {
        "prompts": prompts,
        "max_new_tokens": max_new_tokens,
        "batched_s": batched_s,
        "single_s": single_s,
        "speedup": single_s / batched_s,
        "batched_tokens_per_s": tokens / batched_s,
        "same_text": [s[0] for s in single] == [b[0] for b in batched],
    }


def epoch_evaluation(
    model_dir: Path,
    docs_dir: Path,
    scratch: Path,
    *,
    hidden_size: int | None = None,
    num_layers: int | None = None,
    repeats: int = 3,
) -> dict:
    """One epoch's evaluation (valid + test, 16 arc_easy docs each) of the model in memory,
    as the train-before-test evaluator does it (one lm-eval environment report per job),
    against what evaluating without passing it costs: save the epoch's weights, then let
    lm-eval load them and evaluate afresh. ``hidden_size``/``num_layers`` make a randomly initialised Llama of
    that size with the tiny tokenizer instead of ``model_dir``'s model (load time grows
    with size; scores do not matter here)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from reprolm.models.loading import load_tokenizer
    from reprolm.score.lm_eval_bridge import TaskSpec, environment_report_once, evaluate_tasks

    specs = [TaskSpec("arc_easy", "arc_easy", 0, "acc_norm,none", docs_dir, limit=16)]
    tokenizer = load_tokenizer(str(model_dir))
    if hidden_size:
        config = LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=hidden_size,
            intermediate_size=4 * hidden_size,
            num_hidden_layers=num_layers,
            num_attention_heads=hidden_size // 64,
        )
        model = AutoModelForCausalLM.from_config(config).eval()
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    checkpoint = scratch / "epoch_checkpoint"

    def passed() -> None:
        for _split in ("valid", "test"):
            evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0)

    def saved_and_reloaded() -> None:
        model.save_pretrained(checkpoint)
        tokenizer.save_pretrained(checkpoint)
        for _split in ("valid", "test"):
            evaluate_tasks(str(checkpoint), None, specs, bootstrap_iters=0)

    def timed(evaluate) -> float:
        start = time.perf_counter()
        for _ in range(repeats):
            evaluate()
        return (time.perf_counter() - start) / repeats

    # As in a train-before-test job: the direct evaluation (here the warm-up, which also
    # builds lm-eval's task index) collects lm-eval's environment report; epochs reuse it.
    with environment_report_once():
        evaluate_tasks(model, tokenizer, specs, bootstrap_iters=0)
        passed_s = timed(passed)
    figures = {
        "parameters_m": sum(p.numel() for p in model.parameters()) / 1e6,
        "passed_s": passed_s,
        "reloaded_s": timed(saved_and_reloaded),
    }
    shutil.rmtree(checkpoint, ignore_errors=True)
    return {**figures, "speedup": figures["reloaded_s"] / figures["passed_s"]}


# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forking parent.
MERGE_CHILD = """
import re, sys
from pathlib import Path
from reprolm.merge.extrapolate import extrapolate
extrapolate(sys.argv[1], sys.argv[2], 0.5, sys.argv[3])
print(int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024)
"""


def merge_memory(tokenizer_dir: Path, scratch: Path, hidden_size: int = 1024, num_layers: int = 16) -> dict:
    """Peak memory of an ExPO merge of two random Llama checkpoints of ~270M parameters,
    relative to one checkpoint's size. The merge runs in a fresh process, whose own peak
    resident memory (interpreter and torch included) is what is reported."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from reprolm.models.loading import load_tokenizer

    tokenizer = load_tokenizer(str(tokenizer_dir))
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
    )
    folders = []
    for seed, name in ((1, "sft"), (2, "aligned")):
        torch_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
        model.save_pretrained(scratch / name)
        tokenizer.save_pretrained(scratch / name)
        folders.append(scratch / name)
        del model
    checkpoint_bytes = (scratch / "aligned" / "model.safetensors").stat().st_size
    start = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", MERGE_CHILD, *map(str, folders), str(scratch / "merged")],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    peak = int(child.stdout.strip().splitlines()[-1])
    for folder in (*folders, scratch / "merged"):
        shutil.rmtree(folder)
    return {
        "checkpoint_mb": checkpoint_bytes / 2**20,
        "peak_rss_mb": peak / 2**20,
        "seconds": seconds,
        "peak_over_checkpoint": peak / checkpoint_bytes,
    }


TENSOR_MERGE_CHILD = """
import re, sys
from pathlib import Path
import torch
from safetensors import safe_open
from reprolm.merge.extrapolate import _extrapolated_tensor
way, sft, aligned = sys.argv[1:4]
name = "model.embed_tokens.weight"
baseline = int(re.search(r"VmRSS:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
if way == "blocks":
    merged = _extrapolated_tensor(Path(aligned), Path(sft), name, 0.3, 1 << 24)
else:
    with safe_open(aligned, framework="pt") as a, safe_open(sft, framework="pt") as s:
        value, theta_sft = a.get_tensor(name), s.get_tensor(name).to(torch.float32)
    result = value.to(torch.float32)
    result += 0.3 * (result - theta_sft)
    merged = result.to(value.dtype)
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
print(peak - baseline)
"""


def merge_tensor_memory(scratch: Path, vocab: int = 128256, hidden: int = 4096) -> dict:
    """Memory above the interpreter's for extrapolating one bf16 embedding of a 128k
    vocabulary (Llama-3's): in float32 blocks of rows, as the merge does, vs the whole tensor
    at once in float32, as it did before."""
    import torch
    from safetensors.torch import save_file

    files = {}
    for seed, name in ((1, "sft"), (2, "aligned")):
        generator = torch.Generator().manual_seed(seed)
        tensor = (torch.randn(vocab, hidden, generator=generator) * 0.02).to(torch.bfloat16)
        files[name] = scratch / f"{name}.safetensors"
        save_file({"model.embed_tokens.weight": tensor}, files[name])
        del tensor
    peaks = {}
    for way in ("blocks", "whole"):
        child = subprocess.run(
            [sys.executable, "-c", TENSOR_MERGE_CHILD, way, str(files["sft"]), str(files["aligned"])],
            capture_output=True,
            text=True,
            check=True,
        )
        peaks[way] = int(child.stdout.strip().splitlines()[-1]) / 2**20
    tensor_mb = vocab * hidden * 2 / 2**20
    for path in files.values():
        path.unlink()
    return {"tensor_mb": tensor_mb, "blocks_peak_mb": peaks["blocks"], "whole_peak_mb": peaks["whole"]}


LOSS_CHILD = """
import re, sys, time
from pathlib import Path
import torch
from reprolm.train.losses import gem_loss
kind, vocab, length, batch = sys.argv[1], *map(int, sys.argv[2:5])
generator = torch.Generator().manual_seed(0)
labels = torch.randint(0, vocab, (batch, length), generator=generator)
labels[:, : length // 4] = -100
baseline = int(re.search(r"VmRSS:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
logits = torch.randn(batch, length, vocab, generator=generator).requires_grad_()
start = time.perf_counter()
if kind == "ce":
    loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), labels[:, 1:].reshape(-1),
                                             ignore_index=-100)
else:
    loss = gem_loss(logits, labels, beta=0.7, h=kind)
loss.backward()
seconds = time.perf_counter() - start
peak = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024
print(seconds, peak - baseline)
"""


def loss_step(vocab: int = 32000, length: int = 1024, batch: int = 4) -> dict:
    """Each loss in a fresh process; memory is its peak above the process before the
    logits existed (so the logits, their gradient and the loss's temporaries)."""
    figures = {}
    for kind in ("ce", "linear", "logsigmoid"):
        child = subprocess.run(
            [sys.executable, "-c", LOSS_CHILD, kind, str(vocab), str(length), str(batch)],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds, peak = child.stdout.split()
        figures[kind] = {"seconds": float(seconds), "peak_mb": int(peak) / 2**20}
    for kind in ("linear", "logsigmoid"):
        figures[kind]["time_over_ce"] = figures[kind]["seconds"] / figures["ce"]["seconds"]
        figures[kind]["memory_over_ce"] = figures[kind]["peak_mb"] / figures["ce"]["peak_mb"]
    return figures


def flr_scoring(model_dir: Path, conversations: int = 8, answer_words: int = 200) -> dict:
    """All six categories' 120 follow-ups per conversation, answers of ``answer_words``
    words (UltraFeedback's answers are a few hundred words long)."""
    import random

    from reprolm.data.fixture_world import passage, question
    from reprolm.score.flr import FollowUpScorer, load_followups

    rng = random.Random(0)
    chats = [
        [{"role": "user", "content": question(rng)}, {"role": "assistant", "content": passage(rng, answer_words)}]
        for _ in range(conversations)
    ]
    followups = load_followups(REPO / "config" / "flr_followups.yaml")
    scorer = FollowUpScorer(str(model_dir), followups)
    scorer.score(chats[:1])  # warm-up
    start = time.perf_counter()
    batched = scorer.followup_scores(chats)
    batched_s = time.perf_counter() - start

    start = time.perf_counter()
    single = [
        {
            category: {side: [scorer.score_alone(chat, u) for u in utterances] for side, utterances in sides.items()}
            for category, sides in followups.items()
        }
        for chat in chats
    ]
    single_s = time.perf_counter() - start
    difference = max(
        abs(a - b) for x, y in zip(batched, single) for c in x for side in x[c] for a, b in zip(x[c][side], y[c][side])
    )
    return {
        "conversations": conversations,
        "answer_words": answer_words,
        "followups": conversations * 120,
        "batched_s": batched_s,
        "single_s": single_s,
        "speedup": single_s / batched_s,
        "max_abs_difference": difference,
    }


def verify_time(work: Path, copies: int) -> dict:
    """``reprolm verify`` over ``copies`` copies of the run's results and resources, each
    copy its own workflow folder, checked in one process (its start, about 0.3 s, included)."""
    roots = [work]
    scale = work / "verify_scale"
    for index in range(1, copies):
        root = scale / str(index)
        # The records also name the configuration files the jobs read.
        for folder in ("results", "resources", "config"):
            shutil.copytree(work / folder, root / folder, symlinks=True, ignore=shutil.ignore_patterns("hf_home"))
        roots.append(root)
    code = (
        "import sys; from reprolm.provenance.query import verify; "
        "results = [verify(['results', 'resources'], root=root) for root in sys.argv[1:]]; "
        "print(sum(r.checked for r in results), sum(len(r.findings) for r in results))"
    )
    start = time.perf_counter()
    output = subprocess.run([sys.executable, "-c", code, *map(str, roots)], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(scale, ignore_errors=True)
    records, problems = map(int, output.stdout.split())
    return {"copies": copies, "records": records, "problems": problems, "seconds": elapsed}


COPY_NAME = re.compile(r"_copy\d+")


def scaled_grid_config(work: Path, copies: int) -> list[str]:
    """The config files (the default's, then one over it) naming every base model ``copies`` times (``tiny_llama``,
    ``tiny_llama_copy2``, ...) in every study, so each model-dependent job appears ``copies``
    times; datasets, judges and the report's jobs stay single."""
    config = yaml.safe_load((work / "config/config.yaml").read_text())

    def scaled(bases: list[str]) -> list[str]:
        return bases + [f"{base}_copy{index}" for index in range(2, copies + 1) for base in bases]

    overrides: dict = {
        "base_models": {
            f"{name}_copy{index}": spec
            for name, spec in config["base_models"].items()
            for index in range(2, copies + 1)
        }
    }
    for study in config["studies"]:
        section = config[study]
        overrides[study] = {
            key: ({"bases": scaled(value["bases"])} if isinstance(value, dict) else scaled(value))
            for key, value in section.items()
            if key == "bases" or (isinstance(value, dict) and "bases" in value)
        }
    path = work / "config" / f"grid_{copies}x.yaml"
    path.write_text(yaml.safe_dump(overrides))
    return ["config/config.yaml", path.relative_to(work).as_posix()]


def _copy_artifact(work: Path, path: str) -> None:
    """Copies the original model's artifact behind a copy's path, with its provenance record
    naming the new path (so the start-up check of recorded folders stats its files)."""
    source, target = work / COPY_NAME.sub("", path), work / path
    if source.is_dir():
        shutil.copytree(source, target)
        record = target / "provenance.json"
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        record = target.with_name(target.name + ".provenance.json")
        if (sidecar := source.with_name(source.name + ".provenance.json")).is_file():
            shutil.copy2(sidecar, record)
    if record.is_file():
        record.write_text(record.read_text().replace(f'"{COPY_NAME.sub("", path)}"', f'"{path}"'))


def noop_dry_run_at_scale(work: Path, copies: int) -> dict:
    """A dry run that finds nothing to do over ``copies`` times the default grid, in a copy of
    the finished default run. Each round of dry runs lists the jobs still to do (checkpoints
    reveal later ones); their outputs are copied from the original model's. Then
    ``snakemake --touch --forceall`` dates every output after its inputs and records every
    job's metadata (params, code, inputs), which the dry run reads back as after a real run;
    without ``--forceall`` the copies would count as done with no metadata to read."""
    scaled_work = work.with_name(work.name + f"-grid{copies}x")
    shutil.rmtree(scaled_work, ignore_errors=True)
    shutil.copytree(work, scaled_work, symlinks=True)
    configfiles = scaled_grid_config(scaled_work, copies)
    for _ in range(copies):
        _, planned = run(scaled_work, "-n", "--configfile", *configfiles)
        missing = [
            path
            for line in planned.splitlines()
            if line.startswith("    output: ")
            for path in line.removeprefix("    output: ").split(", ")
            if not (scaled_work / path).exists()
        ]
        if not missing:
            break
        for path in missing:
            _copy_artifact(scaled_work, path)
    run(scaled_work, "--touch", "--forceall", "--configfile", *configfiles)
    seconds, noop = run(scaled_work, "-n", "--configfile", *configfiles)
    _, scaled = run(scaled_work, "-n", "--forceall", "--configfile", *configfiles)
    _, default = run(work, "-n", "--forceall")
    shutil.rmtree(scaled_work)
    return {
        "copies": copies,
        "seconds": seconds,
        "nothing_to_do": "Nothing to be done" in noop,
        "jobs": job_total(scaled),
        "default_jobs": job_total(default),
    }


def paper_harmony_grid(paper_dir: Path, copies: int) -> dict:
    """A dry run (every job still to do) of ``config/paper.yaml`` with LM-Harmony's base
    models named ``copies`` times (each copy a hub model of its own): about 15,000 jobs at
    10x, most of them train-before-test."""
    config = yaml.safe_load((paper_dir / "config/paper.yaml").read_text())
    bases = config["harmony"]["bases"]
    for index in range(2, copies + 1):
        for base in bases:
            config["base_models"][f"{base}_copy{index}"] = config["base_models"][base]
    config["harmony"]["bases"] = bases + [f"{base}_copy{index}" for index in range(2, copies + 1) for base in bases]
    path = paper_dir / "config" / f"paper_harmony_{copies}x.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    seconds, planned = run(paper_dir, "-n", "--configfile", path.relative_to(paper_dir).as_posix())
    return {"copies": copies, "models": len(config["harmony"]["bases"]), "seconds": seconds, "jobs": job_total(planned)}


def torch_seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", type=Path, help="run in this folder and keep it")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="reprolm-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    for name in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / name, work / name, dirs_exist_ok=True)
    figures = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    }
    figures["default_run_s"], _ = run(work)
    figures["default_run_peak_rss_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    figures["noop_rerun_s"], noop = run(work, "-n")
    figures["noop_nothing_to_do"] = "Nothing to be done" in noop
    figures["verify"] = [verify_time(work, copies) for copies in (1, 10)]
    figures["noop_dry_run_10x"] = noop_dry_run_at_scale(work, 10)
    paper_dir = Path(tempfile.mkdtemp(prefix="reprolm-paper-"))
    for name in ("workflow", "config", "profiles"):
        shutil.copytree(REPO / name, paper_dir / name)
    figures["paper_dry_run_s"], paper = run(paper_dir, "-n", "--configfile", "config/paper.yaml")
    figures["paper_dry_run_cached_s"], _ = run(paper_dir, "-n", "--configfile", "config/paper.yaml")
    figures["paper_dry_run_jobs"] = job_total(paper)
    figures["paper_harmony_10x"] = paper_harmony_grid(paper_dir, 10)
    shutil.rmtree(paper_dir)
    figures["generation"] = generation_throughput(work / "results/models/tiny_llama/vanilla")
    tiny, docs = work / "resources/models/tiny_llama", work / "resources/raw/arc_docs"
    figures["epoch_evaluation"] = epoch_evaluation(tiny, docs, work)
    figures["epoch_evaluation_270m"] = epoch_evaluation(tiny, docs, work, hidden_size=1024, num_layers=16)
    figures["merge_memory"] = merge_memory(tiny, work)
    figures["merge_tensor_memory"] = merge_tensor_memory(work)
    figures["loss_step"] = loss_step()
    figures["flr_scoring"] = flr_scoring(work / "results/models/tiny_llama/vanilla")
    figures["flr_scoring_short"] = flr_scoring(work / "results/models/tiny_llama/vanilla", answer_words=40)
    if not args.keep:
        shutil.rmtree(work)
    (REPO / "bench" / "last_run.json").write_text(json.dumps(figures, indent=2) + "\n")
    gen = figures["generation"]
    print(f"machine                     {figures['machine']}")
    print(
        f"default run                 {figures['default_run_s']:.0f} s, peak RSS {figures['default_run_peak_rss_mb']:.0f} MB"
    )
    print(
        f"no-op rerun (dry)           {figures['noop_rerun_s']:.1f} s, nothing to do: {figures['noop_nothing_to_do']}"
    )
    for verified in figures["verify"]:
        print(
            f"reprolm verify, {verified['copies']:>2}x        {verified['seconds']:.1f} s for {verified['records']} records, "
            f"{verified['problems']} problems (target: a few seconds at 1x, linear growth)"
        )
    scaled = figures["noop_dry_run_10x"]
    print(
        f"no-op dry run, 10x grid     {scaled['seconds']:.1f} s for {scaled['jobs']} jobs ({scaled['default_jobs']} at 1x), "
        f"nothing to do: {scaled['nothing_to_do']} (target: a few seconds, linear growth)"
    )
    print(
        f"paper.yaml dry run          {figures['paper_dry_run_s']:.1f} s first (builds the task-split cache), "
        f"{figures['paper_dry_run_cached_s']:.1f} s after, {figures['paper_dry_run_jobs']} jobs (target < 10 s)"
    )
    grid = figures["paper_harmony_10x"]
    print(
        f"paper.yaml, Harmony x10     {grid['seconds']:.1f} s dry run for {grid['jobs']} jobs ({grid['models']} Harmony "
        "models; target <= 20 s)"
    )
    print(
        f"generation, {gen['prompts']} prompts       batched {gen['batched_s']:.2f} s, one at a time "
        f"{gen['single_s']:.2f} s: {gen['speedup']:.1f}x (target >= 5x)"
    )
    merge = figures["merge_memory"]
    print(
        f"ExPO merge, {merge['checkpoint_mb']:.0f} MB checkpoints  peak RSS {merge['peak_rss_mb']:.0f} MB "
        f"= {merge['peak_over_checkpoint']:.2f}x one checkpoint, {merge['seconds']:.1f} s (target <= 1.5x)"
    )
    tensor = figures["merge_tensor_memory"]
    print(
        f"ExPO merge, 128k x 4096 bf16 embedding ({tensor['tensor_mb']:.0f} MB)  peak RSS above the interpreter "
        f"{tensor['blocks_peak_mb']:.0f} MB in blocks, {tensor['whole_peak_mb']:.0f} MB whole-tensor float32"
    )
    losses = figures["loss_step"]
    for kind in ("linear", "logsigmoid"):
        print(
            f"GEM-{kind} loss step (32k x 1024 x 4)  {losses[kind]['seconds']:.2f} s, {losses[kind]['peak_mb']:.0f} MB "
            f"vs CE {losses['ce']['seconds']:.2f} s, {losses['ce']['peak_mb']:.0f} MB: "
            f"{losses[kind]['time_over_ce']:.2f}x time, {losses[kind]['memory_over_ce']:.2f}x memory "
            "(target <= 1.3x, <= 1.5x)"
        )
    for key in ("flr_scoring", "flr_scoring_short"):
        flr = figures[key]
        print(
            f"FLR scoring, {flr['followups']} follow-ups, {flr['answer_words']}-word answers  batched "
            f"{flr['batched_s']:.2f} s, one at a time {flr['single_s']:.2f} s: {flr['speedup']:.1f}x, max "
            f"difference {flr['max_abs_difference']:.1e} (target >= 10x, same scores)"
        )
    for key in ("epoch_evaluation", "epoch_evaluation_270m"):
        epoch = figures[key]
        print(
            f"epoch evaluation, {epoch['parameters_m']:.1f}M  model passed {epoch['passed_s']:.2f} s, saved and "
            f"reloaded {epoch['reloaded_s']:.2f} s: {epoch['speedup']:.1f}x (target >= 3x)"
        )


if __name__ == "__main__":
    main()
