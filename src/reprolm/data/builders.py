"""Study dataset builders: raw sources in upstream schemas -> ``{split}.parquet`` tables.

A builder is registered by name and called with the raw source folders it was configured
with, its params, and the shared build context (length targets). It returns the records of
every split it makes; the workflow writes the split a rule asks for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.data.builder_registry import BUILDERS
from reprolm.data.sources import read_all_splits, read_source, source_splits
from reprolm.data.upstream import UPSTREAM_SCHEMAS, UpstreamSchema, history
from reprolm.io import atomic_path
from reprolm.length import TargetSet


@dataclass(frozen=True)
class BuildContext:
    sources: Mapping[str, Path]  # source name -> raw folder
    schemas: Mapping[str, str]  # source name -> schema
    params: Mapping
    targets: TargetSet | None = None  # None: the config has no length_targets

    def records(self, source: str, split: str | None = None) -> list[dict]:
        """One split's records, or (``split=None``) every split's in the source's order."""
        try:
            folder = self.sources[source]
        except KeyError:
            raise KeyError(f"builder needs source {source!r}; configured: {sorted(self.sources)}") from None
        if split is None:
            return read_all_splits(folder, self.schemas[source])
        return read_source(folder, self.schemas[source], split)


def _schema(ctx: BuildContext, source: str) -> UpstreamSchema:
    return UPSTREAM_SCHEMAS.get(ctx.schemas[source], f"sources.{source}.schema")


def build_split(name: str, ctx: BuildContext, split: str, output: str | Path) -> int:
    splits = BUILDERS.get(name)(ctx)
    if split not in splits:
        raise ValueError(f"builder {name!r} makes splits {sorted(splits)}, not {split!r}")
    rows = splits[split]
    if not rows:
        raise ValueError(f"builder {name!r} made no rows for split {split!r}")
    with atomic_path(output) as tmp:
        pq.write_table(pa.Table.from_pylist(rows), tmp)
    return len(rows)


def build_preference_pairs(ctx: BuildContext) -> dict[str, list[dict]]:
    """Preference pairs in TRL's conversational form from an UltraFeedback-binarized or a
    TRL-preference source: ``prompt`` (the turns before the answer), ``chosen`` and
    ``rejected`` (the answers). ``splits`` maps our split names to the source's (default:
    UltraFeedback's ``{train: train_prefs, test: test_prefs}``, other sources' own splits);
    ``num`` caps each split."""
    if len(ctx.sources) != 1:
        raise ValueError(f"preference_pairs builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    schema = _schema(ctx, source)
    pair = schema.adapter("preference_pair", "preference_pairs")
    own = {"train": "train_prefs", "test": "test_prefs"} if schema.upstream_splits else None
    splits = ctx.params.get("splits") or own or {split: split for split in source_splits(ctx.sources[source])}
    return {
        split: [pair(record) for record in ctx.records(source, upstream)[: ctx.params.get("num")]]
        for split, upstream in splits.items()
    }


def build_instructions(ctx: BuildContext) -> dict[str, list[dict]]:
    """Prompts for open-ended generation (win rates, single-answer grading, alpha search)
    from one source's ``split`` (default: all its splits), the first ``num`` of them, as split ``test``."""
    if len(ctx.sources) != 1:
        raise ValueError(f"instructions builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    records = ctx.records(source, ctx.params.get("split"))
    instruction = _schema(ctx, source).adapter("instruction", "the instructions builder")
    rows = [instruction(record) for record in records[: ctx.params.get("num")]]
    return {"test": [{"id": index, **row} for index, row in enumerate(rows)]}


def build_rated_responses(ctx: BuildContext) -> dict[str, list[dict]]:
    """Responses with a ground-truth rating, as ``conversation`` and ``score``: HelpSteer
    (``score_field``, default helpfulness), Feedback-Bench (``orig_score``) or FLR's own
    rating files (``rated_utterances``: FLASK, MT-Bench single score); split ``test``."""
    if len(ctx.sources) != 1:
        raise ValueError(f"rated_responses builds from exactly one source; configured: {sorted(ctx.sources)}")
    (source,) = ctx.sources
    rated_response = _schema(ctx, source).adapter("rated_response", "rated_responses")
    records = ctx.records(source, ctx.params.get("split"))[: ctx.params.get("num")]
    try:
        rows = [rated_response(record, ctx.params) for record in records]
    except ValueError as error:
        raise ValueError(f"rated_responses, source {source!r}: {error}") from None
    return {"test": [{"id": index, **row} for index, row in enumerate(rows)]}


def build_model_outputs(ctx: BuildContext) -> dict[str, list[dict]]:
    """Many models' answers to the same sessions (WildBench v2 outputs, one source per model
    or several models in one), as ``model`` and ``conversation``; split ``test``."""
    records = [record for source in ctx.sources for record in ctx.records(source, ctx.params.get("split"))]
    return {
        "test": [
            {
                "id": index,
                "session_id": r["session_id"],
                "model": r["generator"],
                "conversation": history(list(r["chat_history"]), r["output"][0]),
            }
            for index, r in enumerate(records)
        ]
    }


PAIRINGS = ("best_worst", "best_vs_rest")


def build_online_preferences(ctx: BuildContext) -> dict[str, list[dict]]:
    """Preference pairs from a policy's own samples, graded by a judge (FLR's online loop).

    Per prompt, ``pairing: best_worst`` (default) pairs the best-graded sample (chosen) with
    the worst (rejected); ``best_vs_rest`` pairs the best with every other sample. A pair
    whose grades differ by less than ``min_margin`` (default: any difference) is skipped.
    Reads ``generations`` (the samples) and ``grades`` (the judge's grades, row by row).
    """
    import json

    pairing = ctx.params.get("pairing", "best_worst")
    if pairing not in PAIRINGS:
        raise ValueError(f"online_preferences: pairing {pairing!r}; choose from {PAIRINGS}")
    margin = ctx.params.get("min_margin", 0.0)
    rows = pq.read_table(ctx.sources["generations"]).to_pylist()
    graded = json.loads(Path(ctx.sources["grades"]).read_text())
    if graded["ids"] != [row["id"] for row in rows]:
        raise ValueError(f"{ctx.sources['grades']}: grades are not of the samples in {ctx.sources['generations']}")
    samples: dict = {}
    for row, grades in zip(rows, graded["grades"], strict=True):
        samples.setdefault(row["id"], (row["instruction"], []))[1].append((sum(grades) / len(grades), row["text"]))
    pairs = []
    for instruction, scored in samples.values():
        ranked = sorted(scored, key=lambda item: item[0], reverse=True)
        best, others = ranked[0], (ranked[-1:] if pairing == "best_worst" else ranked[1:])
        for other in others:
            if best[0] - other[0] > margin and best[1] != other[1]:
                pairs.append(
                    {
                        "prompt": [{"role": "user", "content": instruction}],
                        "chosen": [{"role": "assistant", "content": best[1]}],
                        "rejected": [{"role": "assistant", "content": other[1]}],
                        "score_chosen": best[0],
                        "score_rejected": other[0],
                    }
                )
    if not pairs:
        raise ValueError(f"online_preferences: no prompt in {ctx.sources['generations']} has samples graded apart")
    return {"train": pairs}


def build_chat_sft(ctx: BuildContext) -> dict[str, list[dict]]:
    """Chats for SFT (``messages``) from UltraFeedback-binarized sources (``splits`` maps our
    split names to theirs, default ``{train: train_sft, test: test_sft}``), NuminaMath-CoT
    sources (train / test) and GSM8K-schema sources (train / test), whose worked solutions
    become answers ending "The answer is: N" (calculator annotations dropped) to questions
    set into ``question_template`` at ``{instruction}``; ``num`` caps each source's split."""
    splits = ctx.params.get("splits", {"train": "train_sft", "test": "test_sft"})
    template = ctx.params.get("question_template", "{instruction}")
    built: dict[str, list[dict]] = {split: [] for split in splits}
    for source in ctx.sources:
        schema = _schema(ctx, source)
        sft_chat = schema.adapter("sft_chat", f"chat_sft (source {source!r})")
        for split, upstream in splits.items():
            records = ctx.records(source, upstream if schema.upstream_splits else split)[: ctx.params.get("num")]
            built[split] += [{"messages": sft_chat(record, template)} for record in records]
    return {split: [{"id": index, **row} for index, row in enumerate(rows)] for split, rows in built.items()}
