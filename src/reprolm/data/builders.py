"""Study dataset builders: raw sources in upstream schemas -> ``{split}.parquet`` tables.

A builder is registered by name and called with the raw source folders it was configured
with, its params, and the shared build context (length targets). It returns the records of
every split it makes; the workflow writes the split a rule asks for.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.data.sources import read_all_splits, read_source
from reprolm.provenance import atomic_path
from reprolm.score.length import TargetSet, count_words


@dataclass(frozen=True)
class BuildContext:
    sources: Mapping[str, Path]  # source name -> raw folder
    schemas: Mapping[str, str]  # source name -> schema
    params: Mapping
    targets: TargetSet | None = None

    def records(self, source: str, split: str | None = None) -> list[dict]:
        """One split's records, or (``split=None``) every split's in the source's order."""
        try:
            folder = self.sources[source]
        except KeyError:
            raise KeyError(f"builder needs source {source!r}; configured: {sorted(self.sources)}") from None
        if split is None:
            return read_all_splits(folder, self.schemas[source])
        return read_source(folder, self.schemas[source], split)


Builder = Callable[[BuildContext], dict[str, list[dict]]]
BUILDERS: dict[str, Builder] = {}


def builder(name: str):
    def register(function: Builder) -> Builder:
        BUILDERS[name] = function
        return function

    return register


def single_turn(conversations: list[dict]) -> list[dict]:
    """OpenHermes records with exactly two turns, human then gpt."""
    return [
        record for record in conversations
        if len(record["conversations"]) == 2
        and record["conversations"][0]["from"] == "human"
        and record["conversations"][1]["from"] == "gpt"
    ]


def _shuffled_single_turn(ctx: BuildContext, rng: random.Random) -> list[dict]:
    data = single_turn(ctx.records(ctx.params.get("conversations_source", "openhermes")))
    rng.shuffle(data)
    return data


@builder("ruler_tlg")
def build_tlg(ctx: BuildContext) -> dict[str, list[dict]]:
    """The Target Length Generation test set: first ``num`` shuffled single-turn prompts."""
    rng = random.Random(ctx.params["seed"])
    num = ctx.params["num"]
    data = _shuffled_single_turn(ctx, rng)[:num]
    if len(data) < num:
        raise ValueError(f"tlg needs {num} single-turn conversations, the source has {len(data)}")
    # Drawn for all ``num`` rows after the shuffle, as the original does.
    lengths = [rng.choice(ctx.targets.names) for _ in range(num)]
    return {"test": [
        {"id": index, "Instruction": record["conversations"][0]["value"], "TargetLength": length}
        for index, (record, length) in enumerate(zip(data, lengths))
    ]}


def _bucket(pairs, targets: TargetSet) -> dict[str, list[dict]]:
    buckets = {t.mlt: [] for t in targets}
    for instruction, output in pairs:
        words = count_words(output)
        target = targets.bin_for(words)
        if target is not None:
            buckets[target.mlt].append(
                {"Instruction": instruction, "output": output, "word_count": words, "mlt": target.mlt}
            )
    return buckets


def _longest_answer(answers: list[str]) -> str:
    longest = ""
    for answer in answers:
        if len(answer.split()) > len(longest.split()):
            longest = answer
    return longest


@builder("ruler_train")
def build_ruler_train(ctx: BuildContext) -> dict[str, list[dict]]:
    """MLT-binned SFT data: OpenHermes (after the TLG rows), then LongForm, then ELI5.

    One random generator runs through the whole build in the original order: the TLG
    shuffle, each bucket's shuffle per source, and the final shuffle.
    """
    targets = ctx.targets
    rng = random.Random(ctx.params["seed"])
    caps = ctx.params["cap_per_mlt"]
    cap = {t.mlt: caps if isinstance(caps, int) else caps[t.name] for t in targets}
    openhermes = _shuffled_single_turn(ctx, rng)[ctx.params["tlg_num"]:]
    sources = [
        _bucket(((r["conversations"][0]["value"], r["conversations"][1]["value"]) for r in openhermes), targets),
    ]
    if "longform" in ctx.sources:
        sources.append(_bucket(((r["input"], r["output"]) for r in ctx.records("longform")), targets))
    if "eli5" in ctx.sources:
        sources.append(_bucket(
            ((r["title"], _longest_answer(r["answers"]["text"])) for r in ctx.records("eli5")), targets
        ))
    sampled = {t.mlt: [] for t in targets}
    for buckets in sources:
        for mlt, bucket in buckets.items():
            rng.shuffle(bucket)
            sampled[mlt] += bucket[: max(0, cap[mlt] - len(sampled[mlt]))]
    data = [record for mlt in sampled for record in sampled[mlt]]
    rng.shuffle(data)
    return {"train": [{"id": index, **record} for index, record in enumerate(data)]}


def _arena_instructions(ctx: BuildContext) -> list[dict]:
    questions = ctx.records(ctx.params.get("questions_source", "arena_hard"))
    return [{"id": index, "Instruction": q["turns"][0]["content"]} for index, q in enumerate(questions)]


@builder("ruler_multi_mlt")
def build_multi_mlt(ctx: BuildContext) -> dict[str, list[dict]]:
    """``num`` shuffled arena questions, each asked at every target length."""
    data = _arena_instructions(ctx)
    random.Random(ctx.params["seed"]).shuffle(data)
    data = data[: ctx.params["num"]]
    return {"test": [{**record, "TargetLength": name} for record in data for name in ctx.targets.names]}


@builder("ruler_self_mlt")
def build_self_mlt(ctx: BuildContext) -> dict[str, list[dict]]:
    """All arena questions with no target: the model picks its own MLT."""
    return {"test": _arena_instructions(ctx)}


def build_split(name: str, ctx: BuildContext, split: str, output: str | Path) -> int:
    try:
        make = BUILDERS[name]
    except KeyError:
        raise ValueError(f"unknown dataset builder {name!r}; known: {sorted(BUILDERS)}") from None
    splits = make(ctx)
    if split not in splits:
        raise ValueError(f"builder {name!r} makes splits {sorted(splits)}, not {split!r}")
    rows = splits[split]
    if not rows:
        raise ValueError(f"builder {name!r} made no rows for split {split!r}")
    with atomic_path(output) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


@builder("preference_pairs")
def build_preference_pairs(ctx: BuildContext) -> dict[str, list[dict]]:
    """Preference pairs in TRL's conversational form from an UltraFeedback-binarized
    source: ``prompt`` (the turns before the answer), ``chosen`` and ``rejected`` (the final
    assistant turn of each). ``splits`` maps our split names to the source's
    (default ``{train: train_prefs, test: test_prefs}``); ``num`` caps each split."""
    if len(ctx.sources) != 1:
        raise ValueError(f"preference_pairs builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    splits = ctx.params.get("splits", {"train": "train_prefs", "test": "test_prefs"})
    built = {}
    for split, upstream in splits.items():
        records = ctx.records(source, upstream)[: ctx.params.get("num")]
        built[split] = [
            {"prompt": record["chosen"][:-1], "chosen": record["chosen"][-1:], "rejected": record["rejected"][-1:]}
            for record in records
        ]
    return built


def _instruction_row(record: dict, schema: str) -> dict:
    """One instruction in the shared form: ``instruction`` (the first user turn), ``turns``
    (every user turn) and, where the source has one, the reference model's ``reference``."""
    if schema == "mt_bench_prompts":
        return {"instruction": record["prompt"][0], "turns": list(record["prompt"]),
                "category": record.get("category", "")}
    if schema == "alpaca_eval":
        return {"instruction": record["instruction"], "turns": [record["instruction"]],
                "reference": record["output"]}
    if schema == "ultrafeedback_binarized":
        return {"instruction": record["prompt"], "turns": [record["prompt"]]}
    if schema == "arena_question":
        turns = [turn["content"] for turn in record["turns"]]
        return {"instruction": turns[0], "turns": turns}
    raise ValueError(f"the instructions builder cannot read schema {schema!r}; it reads "
                     "mt_bench_prompts, alpaca_eval, ultrafeedback_binarized and arena_question")


@builder("instructions")
def build_instructions(ctx: BuildContext) -> dict[str, list[dict]]:
    """Prompts for open-ended generation (win rates, single-answer grading, alpha search)
    from one source's ``split`` (default: all its splits), the first ``num`` of them, as split ``test``."""
    if len(ctx.sources) != 1:
        raise ValueError(f"instructions builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    records = ctx.records(source, ctx.params.get("split"))
    rows = [_instruction_row(record, ctx.schemas[source]) for record in records[: ctx.params.get("num")]]
    return {"test": [{"id": index, **row} for index, row in enumerate(rows)]}
