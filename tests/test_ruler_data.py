"""Ruler datasets, training examples and prompt formats."""

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from reprolm.data import fixture_world
from reprolm.data.builders import BuildContext, build_split, single_turn
from reprolm.data.schemas import DataError
from reprolm.data.sources import SPLIT_ORDER, read_all_splits, write_source
from reprolm.data.upstream import load_records
from reprolm.generate.prompts import build_prompts
from reprolm.length import PAPER_TARGETS, TargetSet, configured_targets
from reprolm.models.tokenizer import train_bpe_tokenizer
from reprolm.train.examples import IGNORE_INDEX, build_examples

TARGETS = TargetSet(PAPER_TARGETS)


@pytest.fixture(scope="module")
def tokenizer():
    rng = random.Random(0)
    texts = [fixture_world.passage(rng, 40) for _ in range(200)] + [fixture_world.question(rng) for _ in range(200)]
    tok = train_bpe_tokenizer(texts, 600)
    tok.add_tokens(TARGETS.mlt_tokens, special_tokens=True)
    return tok


def _source(tmp_path, name, schema, records):
    folder = tmp_path / name
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(records), folder / "train.parquet")
    (folder / SPLIT_ORDER).write_text('["train"]')
    return folder


def _conversation(question, answer, extra=()):
    turns = [{"from": "human", "value": question}, {"from": "gpt", "value": answer}, *extra]
    return {"conversations": turns}


def test_single_turn_selection():
    records = [
        _conversation("q1", "a1"),
        _conversation("q2", "a2", [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]),
        {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q"}]},
        {"conversations": [{"from": "gpt", "value": "a"}, {"from": "human", "value": "q"}]},
    ]
    assert single_turn(records) == [records[0]]


def test_tlg_follows_original_rng_order(tmp_path):
    records = [_conversation(f"question {i}", f"answer {i}") for i in range(50)]
    folder = _source(tmp_path, "openhermes", "openhermes_conversations", records)
    ctx = BuildContext(
        {"openhermes": folder}, {"openhermes": "openhermes_conversations"}, {"num": 10, "seed": 10}, TARGETS
    )
    out = tmp_path / "tlg.parquet"
    assert build_split("ruler_tlg", ctx, "test", out) == 10
    rows = pq.read_table(out).to_pylist()
    # The original: random.seed(10); shuffle; take num; then draw num target lengths.
    rng = random.Random(10)
    expected = list(records)
    rng.shuffle(expected)
    lengths = [rng.choice(TARGETS.names) for _ in range(10)]
    assert [r["Instruction"] for r in rows] == [e["conversations"][0]["value"] for e in expected[:10]]
    assert [r["TargetLength"] for r in rows] == lengths
    assert [r["id"] for r in rows] == list(range(10))


def test_ruler_train_buckets_caps_and_excludes_tlg_rows(tmp_path):
    rng = random.Random(3)
    records = [
        _conversation(f"q{i}", fixture_world.passage(rng, rng.choice([10, 30, 52, 80, 100]))) for i in range(120)
    ]
    folder = _source(tmp_path, "openhermes", "openhermes_conversations", records)
    params = {"tlg_num": 20, "seed": 10, "cap_per_mlt": 7}
    ctx = BuildContext({"openhermes": folder}, {"openhermes": "openhermes_conversations"}, params, TARGETS)
    out = tmp_path / "train.parquet"
    build_split("ruler_train", ctx, "train", out)
    rows = pq.read_table(out).to_pylist()
    tlg_ctx = BuildContext(
        {"openhermes": folder}, {"openhermes": "openhermes_conversations"}, {"num": 20, "seed": 10}, TARGETS
    )
    build_split("ruler_tlg", tlg_ctx, "test", tmp_path / "tlg.parquet")
    tlg_questions = {r["Instruction"] for r in pq.read_table(tmp_path / "tlg.parquet").to_pylist()}
    assert not tlg_questions & {r["Instruction"] for r in rows}
    per_mlt = {}
    for r in rows:
        per_mlt[r["mlt"]] = per_mlt.get(r["mlt"], 0) + 1
        assert TARGETS.bin_for(r["word_count"]).mlt == r["mlt"]
    assert set(per_mlt) == {"[MLT:10]", "[MLT:30]", "[MLT:50]", "[MLT:80]"}  # 100 words: no bin
    assert max(per_mlt.values()) <= 7
    assert [r["id"] for r in rows] == list(range(len(rows)))


def test_multi_mlt_crosses_questions_with_every_target(tmp_path):
    questions = [{"question_id": str(i), "turns": [{"content": f"question {i}"}]} for i in range(30)]
    folder = _source(tmp_path, "arena_hard", "arena_question", questions)
    ctx = BuildContext({"arena_hard": folder}, {"arena_hard": "arena_question"}, {"num": 4, "seed": 10}, TARGETS)
    build_split("ruler_multi_mlt", ctx, "test", tmp_path / "m.parquet")
    rows = pq.read_table(tmp_path / "m.parquet").to_pylist()
    assert len(rows) == 4 * 9
    assert [r["TargetLength"] for r in rows[:9]] == TARGETS.names
    assert len({r["id"] for r in rows}) == 4


def test_a_builder_that_reads_no_targets_builds_without_them(tmp_path):
    """What dataset.py runs for a config with no ``length_targets``."""
    questions = [{"question_id": str(i), "turns": [{"content": f"question {i}"}]} for i in range(3)]
    folder = _source(tmp_path, "arena_hard", "arena_question", questions)
    ctx = BuildContext({"arena_hard": folder}, {"arena_hard": "arena_question"}, {}, configured_targets(None))
    assert build_split("ruler_self_mlt", ctx, "test", tmp_path / "self.parquet") == 3
    assert pq.read_table(tmp_path / "self.parquet").to_pylist() == [
        {"id": i, "Instruction": f"question {i}"} for i in range(3)
    ]


def test_malformed_row_names_file_row_and_field(tmp_path):
    records = [_conversation("q", "a"), {"conversations": []}]
    folder = _source(tmp_path, "openhermes", "openhermes_conversations", records)
    with pytest.raises(DataError, match=r"train.parquet: row 1: field 'conversations': empty conversation"):
        load_records(folder / "train.parquet", "openhermes_conversations")
    bad_type = [{"conversations": [{"from": "human", "value": 3}]}]
    folder2 = _source(tmp_path, "bad", "openhermes_conversations", bad_type)
    with pytest.raises(DataError, match=r"row 0: field 'conversations\[0\].value'"):
        load_records(folder2 / "train.parquet", "openhermes_conversations")


def test_failed_build_leaves_no_partial_output(tmp_path):
    folder = _source(tmp_path, "openhermes", "openhermes_conversations", [{"conversations": []}])
    ctx = BuildContext(
        {"openhermes": folder}, {"openhermes": "openhermes_conversations"}, {"num": 1, "seed": 10}, TARGETS
    )
    out = tmp_path / "out" / "test.parquet"
    with pytest.raises(DataError):
        build_split("ruler_tlg", ctx, "test", out)
    assert not out.exists()
    # Nothing under the output's folder either: no temporary file left behind.
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_fixture_source_is_written_in_upstream_schema(tmp_path):
    spec = {"schema": "longform", "fixture": {"n": 3, "seed": 0, "bin_centres": [10], "max_words": 20}}
    counts = write_source(spec, tmp_path / "ok")
    assert counts == {"train": 3}
    assert load_records(tmp_path / "ok" / "train.parquet", "longform")[0].keys() >= {"input", "output"}


def test_multi_split_source_is_read_in_listed_order(tmp_path):
    spec = {"schema": "arc", "fixture": {"n": 3, "seed": 0}}
    counts = write_source(spec, tmp_path / "arc")
    assert all(n == 3 for n in counts.values()) and len(counts) >= 2
    records = read_all_splits(tmp_path / "arc", "arc")
    assert len(records) == 3 * len(counts)
    first_split = next(iter(counts))
    assert records[:3] == load_records(tmp_path / "arc" / f"{first_split}.parquet", "arc")


def test_labels_start_exactly_at_the_mlt(tokenizer):
    record = {"Instruction": "Describe the old piano.", "output": "The miller opens the blue door.", "mlt": "[MLT:10]"}
    ruler = build_examples(
        tokenizer, [record], {"format": "instruction_response", "completion_prefix": "mlt", "max_length": 256}, "mem"
    )[0]
    vanilla = build_examples(tokenizer, [record], {"format": "instruction_response", "max_length": 256}, "mem")[0]
    mlt_id = tokenizer.convert_tokens_to_ids("[MLT:10]")
    first = next(i for i, label in enumerate(ruler["labels"]) if label != IGNORE_INDEX)
    assert ruler["input_ids"][first] == mlt_id
    assert ruler["labels"][first:] == ruler["input_ids"][first:]
    assert ruler["labels"][-1] == tokenizer.eos_token_id
    # Vanilla: same prompt, loss from the first response token, no MLT anywhere.
    first_vanilla = next(i for i, label in enumerate(vanilla["labels"]) if label != IGNORE_INDEX)
    assert first_vanilla == first
    assert mlt_id not in vanilla["input_ids"]
    assert tokenizer.decode(vanilla["input_ids"][first_vanilla:], skip_special_tokens=True) == record["output"]


def test_truncation_that_removes_the_mlt_masks_everything(tokenizer):
    record = {
        "Instruction": "Describe the old piano near the market, please. " * 5,
        "output": "Short answer.",
        "mlt": "[MLT:10]",
    }
    recipe = {"format": "instruction_response", "completion_prefix": "mlt"}
    full = build_examples(tokenizer, [record], {**recipe, "max_length": 4096}, "mem")[0]
    mlt_position = next(i for i, label in enumerate(full["labels"]) if label != IGNORE_INDEX)
    cut = build_examples(tokenizer, [record], {**recipe, "max_length": mlt_position}, "mem")[0]
    assert len(cut["input_ids"]) == mlt_position
    assert all(label == IGNORE_INDEX for label in cut["labels"])
    kept = build_examples(tokenizer, [record], {**recipe, "max_length": mlt_position + 1}, "mem")[0]
    assert kept["labels"][-1] == tokenizer.convert_tokens_to_ids("[MLT:10]")
    assert sum(label != IGNORE_INDEX for label in kept["labels"]) == 1


def test_missing_training_field_names_row(tokenizer):
    with pytest.raises(KeyError, match="mem: row 1: missing field 'output'"):
        build_examples(
            tokenizer,
            [{"Instruction": "a", "output": "b", "mlt": "[MLT:10]"}, {"Instruction": "a"}],
            {"format": "instruction_response", "max_length": 64},
            "mem",
        )


def test_prompt_formats(tokenizer):
    rows = [{"Instruction": "Describe the old piano.", "TargetLength": ">800"}]
    ruler = build_prompts("target_length", rows, tokenizer, "mlt", TARGETS)
    assert ruler.prompts[0].endswith("<|assistant|>\n[MLT:>800]")
    assert set(ruler.stop_tokens) == set(TARGETS.mlt_tokens)
    baseline = build_prompts("target_length", rows, tokenizer, "instruction", TARGETS)
    assert (
        "Describe the old piano.\nThe response should have a word count of more than 800 words." in baseline.prompts[0]
    )
    assert baseline.prompts[0].endswith("<|assistant|>\n") and baseline.stop_tokens == []
    own = build_prompts("self_length", rows, tokenizer, "mlt", TARGETS)
    assert own.prompts[0].endswith("<|assistant|>\n") and own.skip_special_tokens is False
