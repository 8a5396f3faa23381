"""Ruler's dataset builders, registered in :data:`reprolm.data.builder_registry.BUILDERS` by the
study (``Ruler.builders``): the TLG test set, the MLT-binned training set and the multi- and
self-MLT question sets, as the original's data scripts make them."""

from __future__ import annotations

import random

from reprolm.data.builders import BuildContext
from reprolm.length import TargetSet, count_words, reads_length_targets
from reprolm.studies.ruler import SINGLE_TURN_RULES


def single_turn(conversations: list[dict], rule: str = "two_turns") -> list[dict]:
    """OpenHermes records that are one exchange, by ``rule`` (:data:`SINGLE_TURN_RULES`);
    the first turn is the instruction, the second the answer."""
    if rule not in SINGLE_TURN_RULES:
        raise ValueError(f"params.single_turn: unknown rule {rule!r}; known: {sorted(SINGLE_TURN_RULES)}")
    keep = SINGLE_TURN_RULES[rule]
    return [record for record in conversations if keep(record["conversations"])]


def _shuffled_single_turn(ctx: BuildContext, rng: random.Random) -> list[dict]:
    data = single_turn(
        ctx.records(ctx.params.get("conversations_source", "openhermes")), ctx.params.get("single_turn", "two_turns")
    )
    rng.shuffle(data)
    return data


@reads_length_targets()
def build_tlg(ctx: BuildContext) -> dict[str, list[dict]]:
    """The Target Length Generation test set: first ``num`` shuffled single-turn prompts."""
    rng = random.Random(ctx.params["seed"])
    num = ctx.params["num"]
    data = _shuffled_single_turn(ctx, rng)[:num]
    if len(data) < num:
        raise ValueError(f"tlg needs {num} single-turn conversations, the source has {len(data)}")
    # Drawn for all ``num`` rows after the shuffle, as the original does.
    lengths = [rng.choice(ctx.targets.names) for _ in range(num)]
    return {
        "test": [
            {"id": index, "Instruction": record["conversations"][0]["value"], "TargetLength": length}
            for index, (record, length) in enumerate(zip(data, lengths))
        ]
    }


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


@reads_length_targets("bin")
def build_ruler_train(ctx: BuildContext) -> dict[str, list[dict]]:
    """MLT-binned SFT data: OpenHermes (after the TLG rows), then LongForm, then ELI5.

    One random generator runs through the whole build in the original order: the TLG
    shuffle, each bucket's shuffle per source, and the final shuffle.
    """
    targets = ctx.targets
    rng = random.Random(ctx.params["seed"])
    caps = ctx.params["cap_per_mlt"]
    cap = {t.mlt: caps if isinstance(caps, int) else caps[t.name] for t in targets}
    openhermes = _shuffled_single_turn(ctx, rng)[ctx.params["tlg_num"] :]
    sources = [
        _bucket(((r["conversations"][0]["value"], r["conversations"][1]["value"]) for r in openhermes), targets),
    ]
    if "longform" in ctx.sources:
        sources.append(_bucket(((r["input"], r["output"]) for r in ctx.records("longform")), targets))
    if "eli5" in ctx.sources:
        sources.append(
            _bucket(((r["title"], _longest_answer(r["answers"]["text"])) for r in ctx.records("eli5")), targets)
        )
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


@reads_length_targets()
def build_multi_mlt(ctx: BuildContext) -> dict[str, list[dict]]:
    """``num`` shuffled arena questions, each asked at every target length."""
    data = _arena_instructions(ctx)
    random.Random(ctx.params["seed"]).shuffle(data)
    data = data[: ctx.params["num"]]
    return {"test": [{**record, "TargetLength": name} for record in data for name in ctx.targets.names]}


def build_self_mlt(ctx: BuildContext) -> dict[str, list[dict]]:
    """All arena questions with no target: the model picks its own MLT."""
    return {"test": _arena_instructions(ctx)}
