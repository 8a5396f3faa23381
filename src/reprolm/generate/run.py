"""The generation stage: a prompt set through a model, to a parquet of samples."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.generate import SamplingParams, make_backend
from reprolm.generate.endpoint_backend import ChatEndpointBackend
from reprolm.generate.prompts import MULTI_TURN, PromptBatch, build_prompts
from reprolm.generate.request import complete_with_limits, make_request
from reprolm.io import atomic_path
from reprolm.length import TargetSet
from reprolm.models.chat import stop_token_ids
from reprolm.progress import Interval, ProgressCounter
from reprolm.provenance.hashing import content_hash, recorded_hash
from reprolm.provenance.records import note
from reprolm.stopping import JobStopped, stop_request

log = logging.getLogger(__name__)
INSTRUCTION_SLOT = "{instruction}"
DEFAULT_SHARD_SIZE = 512


def generate_promptset(
    *,
    model_path: str | None,
    dataset_file: str,
    promptset: dict,
    length_prompt: str,
    targets: TargetSet | None,
    backend: str,
    backend_options: dict,
    seed: int,
    output: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
    progress_root: str | None = None,
    endpoint: Mapping | None = None,
) -> int:
    """Generate the prompt set's samples, ``shard_size`` rows at a time. A model with
    weights at ``model_path`` is run by the ``backend`` named; a model behind an
    ``endpoint`` (the settings of :class:`ChatEndpointBackend`, its ``name`` included; no
    ``model_path``) is sent the prompts' messages. With
    ``progress_root`` each finished shard is kept there until the output is written, and a
    stop signal (reprolm.stopping) ends the job after the shard it is in: a rerun starts
    with the first unfinished shard. A shard samples with ``seed`` plus its first row's
    index, which with transformers and a shard size that is a multiple of the batch size is
    what one unsharded run draws."""
    rows = pq.read_table(dataset_file).to_pylist()
    # Rows the sampling settings cannot place are refused before the model is loaded.
    sampling_groups(rows, promptset, seed, dataset_file)
    starts = range(0, len(rows), shard_size)
    progress = None
    if progress_root is not None:
        key = progress_key(
            model_path,
            dataset_file,
            promptset,
            length_prompt,
            [repr(target) for target in targets.targets] if targets else None,
            backend,
            backend_options,
            seed,
            shard_size,
            endpoint,
        )
        progress = ShardProgress(Path(progress_root) / key)
    engine = None
    records: list[dict] = []
    # The whole job's progress, a line per shard (each request logs its batches).
    shards = ProgressCounter(f"{len(rows)} rows of {dataset_file}", len(starts), unit="shards", every=Interval(steps=1))
    for index, start in enumerate(starts):
        shard = progress.load(index) if progress else None
        if shard is None:
            if stop_request.requested:
                raise JobStopped(
                    stop_request.signal_name, f"{index} of {len(starts)} shards of {shard_size} prompts saved"
                )
            engine = engine or _engine(backend, model_path, backend_options, endpoint)
            shard = _generate_rows(
                engine,
                rows[start : start + shard_size],
                promptset,
                length_prompt,
                targets,
                seed + start,
                dataset_file,
                start,
            )
            if progress:
                shard = progress.save(index, shard)
        elif engine is None:
            log.info("shard %d of %d: kept from an earlier attempt", index + 1, len(starts))
        records.extend(shard)
        shards.advance()
    # Every shard kept from an earlier attempt: the model is loaded only to name its stops.
    engine = engine or _engine(backend, model_path, backend_options, endpoint)
    note(
        "generation",
        {
            "max_new_tokens": promptset["sampling"]["max_new_tokens"],
            "stop": generation_stops(engine, rows, promptset, length_prompt, targets),
        },
    )
    if isinstance(engine, ChatEndpointBackend):
        # What the API says it served: the model and system fingerprint of this attempt's
        # replies (shards kept from an earlier attempt are not counted again).
        note("endpoint", engine.served())
    with atomic_path(output) as tmp:
        pq.write_table(pa.Table.from_pylist(records), tmp)
    if progress:
        progress.remove()
    return len(records)


def _engine(backend: str, model_path: str | None, backend_options: dict, endpoint: Mapping | None):
    if endpoint is not None:
        return ChatEndpointBackend(**endpoint)
    return make_backend(backend, model_path, **backend_options)


def generation_stops(engine, rows: list[dict], promptset: dict, length_prompt: str, targets) -> list[str]:
    """What ends the prompt set's samples, as tokens: for a model with weights every stop id
    its requests carry (EOS, the generation config's EOS ids, the template's end of turn, the
    prompt kind's own such as MLTs); for an endpoint the prompt kind's own, which it is sent
    besides its model's end of turn."""
    extra = (
        []
        if promptset["prompt"] == MULTI_TURN
        else build_prompts(promptset["prompt"], rows[:1], length_prompt, targets).stop_tokens
    )
    if engine.tokenizer is None:
        return list(extra)
    ids = stop_token_ids(engine.tokenizer, engine.generation_eos, extra)
    return engine.tokenizer.convert_ids_to_tokens(ids)


def _generate_rows(
    engine,
    rows: list[dict],
    promptset: dict,
    length_prompt: str,
    targets,
    seed: int,
    source: str,
    first_row: int = 0,
) -> list[dict]:
    by_row: list[list[dict]] = [[] for _ in rows]
    for sampling, indices in sampling_groups(rows, promptset, seed, source):
        subset = [rows[i] for i in indices]
        labels = [f"{source} row {first_row + i}" for i in indices]
        if promptset["prompt"] == MULTI_TURN:
            produced = [[record] for record in generate_conversations(engine, subset, sampling, source, labels)]
        else:
            produced = _generate_single_turn(engine, subset, promptset, length_prompt, targets, sampling, labels)
        for i, records in zip(indices, produced, strict=True):
            by_row[i] = records
    return [record for row_records in by_row for record in row_records]


def progress_key(model_path: str | None, dataset_file: str, *settings) -> str:
    """What determines a generation's samples; names its folder of finished shards, so a
    changed model, prompt set or setting never reuses shards of another. A model behind an
    endpoint (no ``model_path``) is named by its endpoint settings among ``settings``."""
    model = None
    if model_path is not None:
        model = recorded_hash(model_path) or json.dumps(
            sorted((str(p.relative_to(model_path)), p.stat().st_mtime_ns) for p in Path(model_path).rglob("*"))
        )
    material = json.dumps([model, content_hash(dataset_file), *settings], sort_keys=True)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class ShardProgress:
    """Finished shards of one generation, as JSON lines (a shard read back is exactly the
    records a run that was never stopped gets: both go through the same round trip)."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _path(self, index: int) -> Path:
        return self.folder / f"shard-{index:05d}.jsonl"

    def load(self, index: int) -> list[dict] | None:
        path = self._path(index)
        if not path.exists():
            return None
        return [json.loads(line) for line in path.read_text().splitlines()]

    def save(self, index: int, records: list[dict]) -> list[dict]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(self._path(index)) as tmp:
            # In the records' own field order: the output's columns are a never-stopped run's.
            tmp.write_text("".join(json.dumps(record) + "\n" for record in records))
        return self.load(index)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def sampling_groups(
    rows: list[dict], promptset: dict, seed: int, source: str
) -> list[tuple[SamplingParams, list[int]]]:
    """The prompt set's sampling, and the rows it applies to. ``category_sampling`` sets
    other values for the rows of some categories (MT-Bench's temperature per category, as
    FastChat's reference answers were made); each distinct setting is one request."""
    overrides = promptset.get("category_sampling") or {}
    groups: dict[tuple, list[int]] = {}
    for index, row in enumerate(rows):
        settings = dict(promptset["sampling"])
        if overrides:
            if "category" not in row:
                raise KeyError(f"{source}: row {index}: the prompt set's category_sampling needs a 'category' field")
            settings.update(overrides.get(row["category"], {}))
        groups.setdefault(tuple(sorted(settings.items())), []).append(index)
    unused = sorted(set(overrides) - {row.get("category") for row in rows})
    if unused:
        log.warning("%s: no row has the category_sampling categories %s (spelled as in the data?)", source, unused)
    return [(SamplingParams(**{"seed": seed, **dict(settings)}), indices) for settings, indices in groups.items()]


def _generate_single_turn(engine, rows, promptset, length_prompt, targets, sampling, labels) -> list[list[dict]]:
    """Each row's samples as records, row by row."""
    batch = build_prompts(promptset["prompt"], _templated(rows, promptset.get("template")), length_prompt, targets)
    prompts, samples, limits = _answers(engine, batch, sampling, labels, promptset.get("prompt_bos", "one"))
    return [
        [
            {**row, "prompt": prompt, "sample": index, "text": text, "hit_max_new_tokens": ran_on}
            for index, (text, ran_on) in enumerate(zip(texts, ran_ons, strict=True))
        ]
        for row, prompt, texts, ran_ons in zip(rows, prompts, samples, limits, strict=True)
    ]


def _answers(engine, batch: PromptBatch, sampling: SamplingParams, labels: list[str], prompt_bos: str = "one"):
    """Each prompt as its records show it, its ``n`` texts and whether each ran to
    ``max_new_tokens``. A model with weights gets the prompts through its chat template,
    tokenised once (``make_request``, BOS by ``prompt_bos``); an endpoint gets their
    messages (the records show them as JSON) and renders its own template."""
    if engine.tokenizer is None:
        if any(batch.assistant_prefixes):
            raise ValueError(
                f"{labels[0]}: the prompt starts the assistant's turn (an MLT), which a chat endpoint "
                "cannot be sent; such prompts need a model with weights"
            )
        log.info("generating %d prompts at %s, sampling %s", len(batch.conversations), engine.describe(), sampling)
        texts, limits = engine.chat_with_limits(batch.conversations, sampling, stop=batch.stop_tokens, labels=labels)
        return [json.dumps(messages, ensure_ascii=False) for messages in batch.conversations], texts, limits
    prompts = batch.texts(engine.tokenizer)
    request = make_request(
        engine.tokenizer,
        prompts,
        sampling,
        generation_eos=engine.generation_eos,
        stop_tokens=batch.stop_tokens,
        skip_special_tokens=batch.skip_special_tokens,
        prompt_bos=prompt_bos,
    )
    log.info("generating %s", request.describe())
    return prompts, *complete_with_limits(engine, request)


def _templated(rows: list[dict], template: str | None) -> list[dict]:
    """Rows whose ``instruction`` is set into the prompt set's ``template`` at
    ``{instruction}`` (e.g. GSM8K's step-by-step request); the rows themselves are kept."""
    if template is None:
        return rows
    if INSTRUCTION_SLOT not in template:
        raise ValueError(f"prompt template has no {INSTRUCTION_SLOT} slot: {template!r}")
    return [{**row, "instruction": template.replace(INSTRUCTION_SLOT, row["instruction"])} for row in rows]


def generate_conversations(
    engine, rows: list[dict], sampling: SamplingParams, source: str, labels: list[str] | None = None
) -> list[dict]:
    """MT-Bench style: every user turn in ``turns`` is asked after the model's own earlier
    answers. Each record keeps the whole ``conversation``; ``text`` is the last answer and
    ``hit_max_new_tokens`` whether it ran to the limit. ``labels`` name the rows in an
    endpoint's errors."""
    if sampling.n != 1:
        raise ValueError(f"{source}: multi-turn prompts take one sample per prompt (n=1), not n={sampling.n}")
    for row, record in enumerate(rows):
        if not record.get("turns"):
            raise KeyError(f"{source}: row {row}: multi-turn prompts need a non-empty 'turns' list")
    labels = labels or [f"{source} row {i}" for i in range(len(rows))]
    conversations: list[list[dict]] = [[] for _ in rows]
    prompts = [""] * len(rows)
    last_ran_on = [False] * len(rows)
    for turn in range(max(len(record["turns"]) for record in rows)):
        asking = [i for i, record in enumerate(rows) if turn < len(record["turns"])]
        for i in asking:
            conversations[i].append({"role": "user", "content": rows[i]["turns"][turn]})
        log.info("turn %d", turn + 1)
        batch = PromptBatch([list(conversations[i]) for i in asking])
        asked, answers, limits = _answers(engine, batch, sampling, [f"{labels[i]}, turn {turn + 1}" for i in asking])
        for i, prompt, texts, ran_on in zip(asking, asked, answers, limits, strict=True):
            prompts[i] = prompt
            last_ran_on[i] = ran_on[0]
            conversations[i].append({"role": "assistant", "content": texts[0]})
    return [
        {
            **record,
            "prompt": prompt,
            "sample": 0,
            "text": conversation[-1]["content"],
            "conversation": conversation,
            "hit_max_new_tokens": ran_on,
        }
        for record, prompt, conversation, ran_on in zip(rows, prompts, conversations, last_ran_on, strict=True)
    ]
