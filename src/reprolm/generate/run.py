"""The generation stage: a prompt set through a model, to a parquet of samples."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.generate import SamplingParams, make_backend
from reprolm.generate.prompts import MULTI_TURN, build_prompts
from reprolm.generate.request import complete, make_request
from reprolm.io import atomic_path
from reprolm.length import TargetSet

log = logging.getLogger(__name__)
INSTRUCTION_SLOT = "{instruction}"


def generate_promptset(*, model_path: str, dataset_file: str, promptset: dict, length_prompt: str,
                       targets: TargetSet | None, backend: str, backend_options: dict, seed: int,
                       output: str) -> int:
    rows = pq.read_table(dataset_file).to_pylist()
    # Rows the sampling settings cannot place are refused before the model is loaded.
    groups = sampling_groups(rows, promptset, seed, dataset_file)
    engine = make_backend(backend, model_path, **backend_options)
    by_row: list[list[dict]] = [[] for _ in rows]
    for sampling, indices in groups:
        subset = [rows[i] for i in indices]
        if promptset["prompt"] == MULTI_TURN:
            produced = [[record] for record in generate_conversations(engine, subset, sampling, dataset_file)]
        else:
            produced = _generate_single_turn(engine, subset, promptset, length_prompt, targets, sampling)
        for i, records in zip(indices, produced, strict=True):
            by_row[i] = records
    records = [record for row_records in by_row for record in row_records]
    with atomic_path(output) as tmp:
        pq.write_table(pa.Table.from_pylist(records), tmp)
    return len(records)


def sampling_groups(rows: list[dict], promptset: dict, seed: int, source: str) -> list[tuple[SamplingParams, list[int]]]:
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


def _generate_single_turn(engine, rows, promptset, length_prompt, targets, sampling) -> list[list[dict]]:
    """Each row's samples as records, row by row."""
    batch = build_prompts(promptset["prompt"], _templated(rows, promptset.get("template")), engine.tokenizer,
                          length_prompt, targets)
    request = make_request(engine.tokenizer, batch.prompts, sampling, generation_eos=engine.generation_eos,
                           stop_tokens=batch.stop_tokens, skip_special_tokens=batch.skip_special_tokens)
    log.info("generating %s", request.describe())
    samples = complete(engine, request)
    return [
        [{**row, "prompt": prompt, "sample": index, "text": text} for index, text in enumerate(texts)]
        for row, prompt, texts in zip(rows, batch.prompts, samples, strict=True)
    ]


def _templated(rows: list[dict], template: str | None) -> list[dict]:
    """Rows whose ``instruction`` is set into the prompt set's ``template`` at
    ``{instruction}`` (e.g. GSM8K's step-by-step request); the rows themselves are kept."""
    if template is None:
        return rows
    if INSTRUCTION_SLOT not in template:
        raise ValueError(f"prompt template has no {INSTRUCTION_SLOT} slot: {template!r}")
    return [{**row, "instruction": template.replace(INSTRUCTION_SLOT, row["instruction"])} for row in rows]


def generate_conversations(engine, rows: list[dict], sampling: SamplingParams, source: str) -> list[dict]:
    """MT-Bench style: every user turn in ``turns`` is asked after the model's own earlier
    answers. Each record keeps the whole ``conversation``; ``text`` is the last answer."""
    if sampling.n != 1:
        raise ValueError(f"{source}: multi-turn prompts take one sample per prompt (n=1), not n={sampling.n}")
    for row, record in enumerate(rows):
        if not record.get("turns"):
            raise KeyError(f"{source}: row {row}: multi-turn prompts need a non-empty 'turns' list")
    conversations: list[list[dict]] = [[] for _ in rows]
    prompts = [""] * len(rows)
    for turn in range(max(len(record["turns"]) for record in rows)):
        asking = [i for i, record in enumerate(rows) if turn < len(record["turns"])]
        for i in asking:
            conversations[i].append({"role": "user", "content": rows[i]["turns"][turn]})
            prompts[i] = engine.tokenizer.apply_chat_template(conversations[i], tokenize=False,
                                                              add_generation_prompt=True)
        request = make_request(engine.tokenizer, [prompts[i] for i in asking], sampling,
                               generation_eos=engine.generation_eos)
        log.info("turn %d: generating %s", turn + 1, request.describe())
        for i, texts in zip(asking, complete(engine, request), strict=True):
            conversations[i].append({"role": "assistant", "content": texts[0]})
    return [
        {**record, "prompt": prompt, "sample": 0, "text": conversation[-1]["content"], "conversation": conversation}
        for record, prompt, conversation in zip(rows, prompts, conversations, strict=True)
    ]
