"""Ruler datasets, training examples and prompt formats."""

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from reprolm.data import fixture_world
from reprolm.data.builders import BuildContext, build_split
from reprolm.data.schemas import DataError
from reprolm.data.sources import SPLIT_ORDER, read_all_splits, write_source
from reprolm.data.upstream import load_records
from reprolm.generate.prompts import build_prompts, word_count_instruction
from reprolm.length import PAPER_TARGETS, TargetSet, configured_targets
from reprolm.models.tokenizer import train_bpe_tokenizer
from reprolm.studies.ruler.builders import single_turn
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


def _turns(*pairs):
    return {"conversations": [{"from": who, "value": text} for who, text in pairs]}


# OpenHermes-2.5-shaped rows: what the original's raw_openhermes_process.py keeps (exactly two
# turns, whoever speaks) against the stricter human-then-gpt rule.
OPENHERMES_ROWS = [
    (_turns(("human", "Name a colour."), ("gpt", "Blue.")), True, True),
    (_turns(("system", "Be terse."), ("human", "Name a colour."), ("gpt", "Blue.")), False, False),
    (_turns(("human", "Hi."), ("gpt", "Hello."), ("human", "Name a colour."), ("gpt", "Blue.")), False, False),
    (_turns(("system", "Be terse."), ("human", "Name a colour.")), True, False),
    (_turns(("gpt", "Blue."), ("human", "Thanks.")), True, False),
    (_turns(("human", "Name a colour.")), False, False),
]


def test_single_turn_keeps_two_turn_dialogues_as_the_original_does():
    records = [row for row, _, _ in OPENHERMES_ROWS]
    assert single_turn(records) == [row for row, original, _ in OPENHERMES_ROWS if original]
    assert single_turn(records, "two_turns") == single_turn(records)
    assert single_turn(records, "human_then_gpt") == [row for row, _, strict in OPENHERMES_ROWS if strict]
    with pytest.raises(
        ValueError, match=r"params.single_turn: unknown rule 'human'; known: \['human_then_gpt', 'two_turns'\]"
    ):
        single_turn(records, "human")


@pytest.mark.parametrize(
    "rule, expected", [("two_turns", ["Name a colour.", "Be terse.", "Blue."]), ("human_then_gpt", ["Name a colour."])]
)
def test_tlg_prompts_are_each_kept_dialogues_first_turn(tmp_path, rule, expected):
    """The TLG instruction is the first turn, whoever speaks it (the original's
    ``conversations[0]["value"]``)."""
    folder = _source(tmp_path, "openhermes", "openhermes_conversations", [row for row, _, _ in OPENHERMES_ROWS])
    params = {"num": len(expected), "seed": 10, "single_turn": rule}
    ctx = BuildContext({"openhermes": folder}, {"openhermes": "openhermes_conversations"}, params, TARGETS)
    build_split("ruler_tlg", ctx, "test", tmp_path / "tlg.parquet")
    assert sorted(r["Instruction"] for r in pq.read_table(tmp_path / "tlg.parquet").to_pylist()) == sorted(expected)


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
    ruler = build_prompts("target_length", rows, "mlt", TARGETS)
    assert ruler.texts(tokenizer)[0].endswith("<|assistant|>\n[MLT:>800]")
    assert set(ruler.stop_tokens) == set(TARGETS.mlt_tokens)
    baseline = build_prompts("target_length", rows, "instruction", TARGETS).texts(tokenizer)[0]
    assert "Describe the old piano.\nThe response should have a word count of more than 800 words." in baseline
    assert baseline.endswith("<|assistant|>\n")
    assert build_prompts("target_length", rows, "instruction", TARGETS).stop_tokens == []
    own = build_prompts("self_length", rows, "mlt", TARGETS)
    assert own.texts(tokenizer)[0].endswith("<|assistant|>\n") and own.skip_special_tokens is False


PAPER = yaml.safe_load((Path(__file__).parents[1] / "config" / "paper.yaml").read_text())
HEADER_TOKENS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def _original_custom(instruction: str, answer: str | None = None) -> str:
    """The original's custom_Template (src/utils/templates.py): apply_template with
    ``answer`` = mlt + output, else the prompt up to the answer."""
    prompt = (
        f"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{instruction}<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    return prompt if answer is None else f"{prompt}{answer}<|eot_id|>"


@pytest.fixture
def custom_tokenizer(tmp_path):
    """The tiny default's kind of tokenizer as the paper config's Ruler finetune leaves it:
    loaded with the recipe's template, its tokens added, saved with the model and loaded
    again by generation."""
    from reprolm.config.lookups import finetune_chat_template, finetune_tokens
    from reprolm.models.loading import load_tokenizer

    rng = random.Random(0)
    texts = [fixture_world.passage(rng, 40) for _ in range(200)] + [fixture_world.question(rng) for _ in range(200)]
    train_bpe_tokenizer(texts, 600).save_pretrained(tmp_path / "base")
    tokenizer = load_tokenizer(str(tmp_path / "base"), finetune_chat_template(PAPER, "ruler"))
    tokenizer.add_tokens(finetune_tokens(PAPER, "ruler"), special_tokens=True)
    tokenizer.save_pretrained(tmp_path / "ruler")
    return load_tokenizer(str(tmp_path / "ruler"))


def test_the_paper_config_trains_every_ruler_recipe_with_the_custom_template():
    from reprolm.config.lookups import chat_template_name, finetune_chat_template, finetune_tokens
    from reprolm.models.templates import named_template

    targets = TargetSet.from_config(PAPER["length_targets"])
    # The original's finetune.py: custom's SPECIAL_TOKENS, and for Ruler the MLTs after them.
    assert finetune_tokens(PAPER, "ruler") == HEADER_TOKENS + targets.mlt_tokens
    assert finetune_tokens(PAPER, "vanilla") == HEADER_TOKENS
    assert (
        finetune_chat_template(PAPER, "ruler")
        == finetune_chat_template(PAPER, "vanilla")
        == named_template("ruler_custom").jinja
    )
    assert [chat_template_name(PAPER, r) for r in ("ruler", "vanilla", "ruler+expo0.3", "pretrained")] == [
        "ruler_custom",
        "ruler_custom",
        "ruler_custom",
        "own",
    ]
    own = {**PAPER, "recipes": {**PAPER["recipes"], "ruler": {**PAPER["recipes"]["ruler"], "chat_template": "own"}}}
    assert finetune_tokens(own, "ruler") == targets.mlt_tokens and finetune_chat_template(own, "ruler") is None


def test_ruler_custom_template_tokens_and_rendering_on_the_tiny_tokenizer(custom_tokenizer):
    from reprolm.models.chat import chat_prompt, stop_token_ids

    tokenizer = custom_tokenizer
    special = {index for index, token in tokenizer.added_tokens_decoder.items() if token.special}
    for token in HEADER_TOKENS + TARGETS.mlt_tokens:
        index = tokenizer.convert_tokens_to_ids(token)
        assert index in special and tokenizer(token, add_special_tokens=False).input_ids == [index]
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    record = {"Instruction": "Describe the old piano.", "output": "The miller opens the blue door.", "mlt": "[MLT:30]"}
    recipe = {key: PAPER["recipes"]["ruler"][key] for key in ("format", "completion_prefix", "max_length")}
    ruler = build_examples(tokenizer, [record], recipe, "mem")[0]
    vanilla = build_examples(tokenizer, [record], {**recipe, "completion_prefix": "none"}, "mem")[0]
    # Token for token the original's training text (this tokenizer adds no BOS of its own,
    # so its tokenizer.encode would add none either).
    assert (
        ruler["input_ids"]
        == tokenizer(_original_custom(record["Instruction"], "[MLT:30]" + record["output"])).input_ids
    )
    assert vanilla["input_ids"] == tokenizer(_original_custom(record["Instruction"], record["output"])).input_ids
    assert tokenizer.decode(ruler["input_ids"]) == _original_custom(
        record["Instruction"], "[MLT:30]" + record["output"]
    )
    # Labels: Ruler's from the MLT, vanilla's after the instruction prompt, both through <|eot_id|>.
    prompt = tokenizer(_original_custom(record["Instruction"])).input_ids
    assert ruler["labels"] == [IGNORE_INDEX] * len(prompt) + ruler["input_ids"][len(prompt) :]
    assert ruler["input_ids"][len(prompt)] == tokenizer.convert_tokens_to_ids("[MLT:30]")
    assert vanilla["labels"] == [IGNORE_INDEX] * len(prompt) + vanilla["input_ids"][len(prompt) :]
    assert ruler["labels"][-1] == vanilla["labels"][-1] == eot
    # Generation: the original's apply_template_for_generation(_vanilla) texts, stopping at
    # <|eot_id|> and every MLT.
    assert (
        chat_prompt(tokenizer, [{"role": "user", "content": "Hi."}])[1] == tokenizer(_original_custom("Hi.")).input_ids
    )
    rows = [{"Instruction": "Describe the old piano.", "TargetLength": ">800"}]
    user = [{"role": "user", "content": rows[0]["Instruction"]}]
    assert (
        chat_prompt(tokenizer, user)[0] + TARGETS[">800"].mlt == _original_custom(rows[0]["Instruction"]) + "[MLT:>800]"
    )
    asked = [{"role": "user", "content": word_count_instruction(rows[0]["Instruction"], ">800", TARGETS)}]
    assert chat_prompt(tokenizer, asked)[0] == _original_custom(
        "Describe the old piano.\nThe response should have a word count of more than 800 words."
    )
    stops = stop_token_ids(tokenizer, [], TARGETS.mlt_tokens)
    assert eot in stops and set(tokenizer.convert_tokens_to_ids(TARGETS.mlt_tokens)) <= set(stops)


def test_the_custom_templates_bos_is_the_originals_but_never_doubled(custom_tokenizer):
    """A base that prepends its own BOS (Mistral, Gemma, DeepSeek) gets it before
    <|begin_of_text|>, as the original's tokenizer.encode gives it; on Llama-3, whose BOS
    <|begin_of_text|> is, the original's encode doubles it and the project keeps one."""
    from tokenizers import processors

    from reprolm.models.chat import prompt_token_ids

    tokenizer = custom_tokenizer
    text = _original_custom("Hi.")
    bos = tokenizer.bos_token_id
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", bos)]
    )
    assert prompt_token_ids(tokenizer, text) == tokenizer(text).input_ids
    assert prompt_token_ids(tokenizer, text)[:2] == [bos, tokenizer.convert_tokens_to_ids("<|begin_of_text|>")]
    begin = tokenizer.convert_tokens_to_ids("<|begin_of_text|>")
    tokenizer.bos_token = "<|begin_of_text|>"
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", begin)]
    )
    assert tokenizer(text).input_ids[:2] == [begin, begin]
    assert prompt_token_ids(tokenizer, text) == tokenizer(text).input_ids[1:]


def test_recipe_templates_and_single_turn_rules_are_checked_before_any_job():
    import copy

    from default_config import DEFAULT
    from reprolm.checks import check_config
    from reprolm.errors import ConfigError
    from workflow_helpers import REPO

    schema = REPO / "workflow/schemas/config.schema.yaml"
    config = copy.deepcopy(DEFAULT)
    config["recipes"]["ruler"]["chat_template"] = "ruler_costum"
    with pytest.raises(
        ConfigError,
        match=r"recipes.ruler.chat_template: 'ruler_costum' is not declared; allowed: \['own', 'ruler_custom'\]; did you mean 'ruler_custom'\?",
    ):
        check_config(config, schema)
    config = copy.deepcopy(DEFAULT)
    config["datasets"]["tlg"]["params"]["single_turn"] = "human_then_gpt"
    with pytest.raises(
        ConfigError, match=r"the datasets built from 'openhermes' pick its single-turn dialogues differently"
    ):
        check_config(config, schema)
    config["datasets"]["ruler_train"]["params"]["single_turn"] = "human_then_gpt"
    check_config(config, schema)
    config["ruler"]["lm_eval_metrics"]["arc_easy"] = "acc,none"
    with pytest.raises(ConfigError, match=r"ruler.lm_eval_metrics: 'arc_easy' is not declared"):
        check_config(config, schema)


def test_a_study_template_without_its_jinja_is_named_by_file_and_name(tmp_path, monkeypatch):
    from reprolm.models import templates

    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / templates.TEMPLATE_FILE).write_text("toy_chat: {special_tokens: ['<s>']}\n")
    monkeypatch.setattr(templates, "STUDY_TEMPLATE_FILES", tmp_path)
    monkeypatch.setattr(templates, "CHAT_TEMPLATES", templates.Registry("chat template"))
    templates._register_study_templates.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"toy/chat_templates\.yaml: template 'toy_chat' needs a 'jinja' text"):
            templates.template_names()
    finally:
        templates._register_study_templates.cache_clear()


def test_an_entry_given_only_the_length_target_fields_it_declares_makes_the_same(tmp_path):
    """A job's params hold only the fields of the length targets its builder, prompt kind or
    metric declares (reprolm.length.targets_read): each makes with them what it makes with
    every field, and a field read but not declared would be None and fail here."""
    from default_config import DEFAULT
    from reprolm.data.builders import BUILDERS
    from reprolm.generate.prompts import PROMPT_BUILDERS
    from reprolm.length import targets_read
    from reprolm.score.metrics import METRICS

    spec = DEFAULT["length_targets"]
    full = TargetSet.from_config(spec)

    def declared(entry):
        return TargetSet.from_config(targets_read(entry, spec))

    rng = random.Random(5)
    records = [
        _conversation(f"q{i}", fixture_world.passage(rng, rng.choice([10, 30, 52, 80, 150, 230]))) for i in range(120)
    ]
    sources = {
        "openhermes": _source(tmp_path, "openhermes", "openhermes_conversations", records),
        "arena_hard": _source(
            tmp_path,
            "arena_hard",
            "arena_question",
            [{"question_id": str(i), "turns": [{"content": f"question {i}"}]} for i in range(12)],
        ),
    }
    schemas = {"openhermes": "openhermes_conversations", "arena_hard": "arena_question"}
    builds = {
        "ruler_tlg": {"num": 20, "seed": 10},
        "ruler_train": {"tlg_num": 20, "seed": 10, "cap_per_mlt": 7},
        "ruler_multi_mlt": {"num": 4, "seed": 10},
    }
    made = {}
    for name, params in builds.items():
        entry = BUILDERS[name]
        assert entry(BuildContext(sources, schemas, params, declared(entry))) == entry(
            BuildContext(sources, schemas, params, full)
        ), name
        made[name] = entry(BuildContext(sources, schemas, params, full))
    rows = made["ruler_multi_mlt"]["test"]
    prompts = PROMPT_BUILDERS["target_length"]
    for length_prompt in ("mlt", "instruction"):
        assert prompts(rows, length_prompt, declared(prompts)) == prompts(rows, length_prompt, full)
    outputs = [
        {**row, "text": fixture_world.passage(rng, rng.choice([5, 25, 45, 80, 150, 260])), "sample": 0} for row in rows
    ]
    outputs += [
        {"id": 99, "TargetLength": "80", "text": f"{mlt}{fixture_world.passage(rng, 85)}", "sample": 0}
        for mlt in full.mlt_tokens
    ]
    for name in ("length_levels", "length_multi_mlt", "length_self_mlt"):
        metric = METRICS[name]
        context = {"length_targets": targets_read(metric, spec)}
        assert metric(outputs, context) == metric(outputs, {"length_targets": spec}), name
