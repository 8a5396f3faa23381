"""GEM's evaluation scores on hand-checked examples: diversity (and where the original
code's quirks change it), GSM8K answers, majority voting and pass@k, best-of-n; and GEM's
data: SFT chats and prompts from GSM8K problems."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from sacrebleu.metrics import BLEU

from reprolm.config import overlays
from reprolm.score.diversity import distinct_n, embedding_diversity, offline_encoder, self_bleu_diversity
from reprolm.score.metrics import compute
from reprolm.score.sampling import (
    best_and_mean_of_n,
    extract_answer,
    majority_and_pass_at_k,
    samples_by_prompt,
)

SAMPLES = ["the cat sat", "the cat ran", "a dog ran"]


@pytest.fixture
def punkt_parameters(tmp_path, monkeypatch):
    """NLTK's sentence splitter with untrained English parameters (the trained ones are a
    download this machine cannot make). The texts below hold no abbreviations, where the two
    split alike; ``word_tokenize`` itself is NLTK's."""
    import nltk

    english = tmp_path / "tokenizers" / "punkt_tab" / "english"
    english.mkdir(parents=True)
    for name in ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab"):
        (english / name).write_text("")
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path), *nltk.data.path])
    # NLTK keeps a loaded sentence splitter per language; load from here, forget it after.
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    yield
    nltk.tokenize._get_punkt_tokenizer.cache_clear()


def test_distinct_n_by_hand():
    # unigrams: the, cat, sat, the, cat, ran, a, dog, ran -> 6 unique of 9
    assert distinct_n(SAMPLES, 1) == pytest.approx(100 * 6 / 9)
    # bigrams: (the cat) x2, (cat sat), (cat ran), (a dog), (dog ran) -> 5 of 6
    assert distinct_n(SAMPLES, 2) == pytest.approx(100 * 5 / 6)
    assert distinct_n(SAMPLES, 3) == pytest.approx(100.0)


def test_original_distinct_n_counts_nltk_word_tokens(punkt_parameters):
    samples = ["The cat sat. The cat ran!", "Don't run, cat."]
    # Paper, whitespace words: The cat sat. The cat ran! / Don't run, cat. -> 7 unique of 9.
    assert distinct_n(samples, 1) == pytest.approx(100 * 7 / 9)
    # Original, NLTK tokens: The cat sat . The cat ran ! / Do n't run , cat .
    # -> The cat sat . ran ! Do n't run , : 10 unique of 14.
    assert distinct_n(samples, 1, compat="original") == pytest.approx(100 * 10 / 14)


def test_original_distinct_n_names_the_missing_nltk_data(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    with pytest.raises(LookupError, match="needs NLTK's 'punkt_tab' data where the job runs"):
        distinct_n(SAMPLES, 1, compat="original")


def test_self_bleu_uses_every_other_sample_unless_original():
    bleu = BLEU(effective_order=True)
    paper = 100 - sum(bleu.sentence_score(s, [o for o in SAMPLES if o != s]).score for s in SAMPLES) / 3
    assert self_bleu_diversity(SAMPLES) == pytest.approx(paper)
    # By hand: the original compares each sample with the first other one only. Samples 0 and
    # 2 are equal, 1 shares no word: original BLEUs 0 (0 v 1), 0 (1 v 0), 100 (2 v 0) ->
    # diversity 100 - 100/3; paper BLEUs 100 (0 v {1, 2}), 0, 100 -> 100 - 200/3.
    texts = ["a b c d e", "v w x y z", "a b c d e"]
    assert self_bleu_diversity(texts, compat="original") == pytest.approx(100 - 100 / 3)
    assert self_bleu_diversity(texts) == pytest.approx(100 - 200 / 3)
    # corpus_bleu has no effective order: without a matching 4-gram a text's BLEU is 0.
    assert self_bleu_diversity(["the cat sat", "the cat ran"], compat="original") == 100.0
    assert self_bleu_diversity(["the cat sat", "the cat ran"]) < 50
    with pytest.raises(ValueError, match="at least two samples"):
        self_bleu_diversity(SAMPLES[:1])


# Meta-Llama-3-8B-Instruct's chat template (its tokenizer_config.json), the original's.
LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)
LLAMA3_SPECIAL = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
POEM = "Write a poem about the sea , please ."
ANSWERS = ["The grey sea folds.<|eot_id|>", "  Waves hum at night. ", "The grey sea folds."]


def rendered(answer: str) -> str:
    """By hand: the original's text for POEM and an answer. The prompt comes back from the
    generation's rendering decoded without special tokens and cleaned up as Llama-3's
    tokenizer did (" ," -> ",", " ." -> "."); the template trims both turns."""
    return (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWrite a poem about the sea, please."
        "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        f"{answer.replace('<|eot_id|>', '').strip()}<|eot_id|>"
    )


@pytest.fixture(scope="module")
def llama3_style_tokenizer(tmp_path_factory):
    """A small byte-level BPE tokenizer with Llama-3's special tokens, BOS, chat template and
    clean-up flag, saved as a model folder's tokenizer."""
    from reprolm.models.tokenizer import train_bpe_tokenizer

    tokenizer = train_bpe_tokenizer([POEM, *ANSWERS], vocab_size=300)
    tokenizer.add_tokens(LLAMA3_SPECIAL, special_tokens=True)
    tokenizer.bos_token = "<|begin_of_text|>"
    tokenizer.chat_template = LLAMA3_TEMPLATE
    folder = tmp_path_factory.mktemp("llama3_style")
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": True}))
    return folder


def _generation_rows(folder) -> list[dict]:
    from reprolm.models.loading import load_tokenizer

    tokenizer = load_tokenizer(str(folder))
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": POEM}], tokenize=False, add_generation_prompt=True
    )
    return [
        {"id": 0, "sample": i, "instruction": POEM, "prompt": prompt, "text": text} for i, text in enumerate(ANSWERS)
    ]


def test_original_text_is_the_chat_template_over_the_decoded_prompt_and_the_answer(llama3_style_tokenizer):
    from reprolm.models.loading import load_tokenizer
    from reprolm.score.diversity import original_texts

    rows = _generation_rows(llama3_style_tokenizer)
    assert rows[0]["prompt"] == (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n" + POEM + "<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    texts = original_texts(ANSWERS, rows[0]["prompt"], load_tokenizer(str(llama3_style_tokenizer)))
    assert texts == [rendered(answer) for answer in ANSWERS]


def test_diversity_metric_scores_the_original_text_with_the_paper_variant_beside(
    llama3_style_tokenizer, punkt_parameters
):
    from collections import Counter

    from nltk.tokenize import word_tokenize
    from sacrebleu import corpus_bleu

    rows = _generation_rows(llama3_style_tokenizer)
    context = {"compat": "original", "variants": ["paper"], "tokenizer_dir": str(llama3_style_tokenizer)}
    result = compute("diversity", rows, context)
    assert result["compat"] == "original" and list(result["variants"]) == ["paper"]
    texts = [rendered(answer) for answer in ANSWERS]
    # Independently of the scorer: NLTK's tokens and sacrebleu's corpus_bleu as the original
    # calls them, on the hand-rendered texts.
    for n in (1, 2, 3):
        grams = Counter(g for t in texts for words in [word_tokenize(t)] for g in zip(*(words[i:] for i in range(n))))
        assert result["per_prompt"][f"distinct_{n}"] == [pytest.approx(100 * len(grams) / sum(grams.values()))]
    bleus = [corpus_bleu([t], [texts[:i] + texts[i + 1 :]]).score for i, t in enumerate(texts)]
    assert result["self_bleu"] == pytest.approx(100 - sum(bleus) / 3)
    assert result["embedding"] == pytest.approx(embedding_diversity(texts, offline_encoder()), abs=1e-6)
    # Beside it, the paper's: the answers alone, as generated.
    paper = result["variants"]["paper"]
    assert paper["distinct_1"] == pytest.approx(distinct_n(ANSWERS, 1))
    assert paper["self_bleu"] == pytest.approx(self_bleu_diversity(ANSWERS))
    # The shared template and prompt make the original's text far less diverse.
    assert result["distinct"] < paper["distinct"] and result["embedding"] < paper["embedding"]
    with pytest.raises(ValueError, match="needs the model's folder"):
        compute("diversity", rows, {"compat": "original"})
    with pytest.raises(KeyError, match="row 0 .* has no rendered 'prompt'"):
        compute("diversity", [{**r, "prompt": None} for r in rows], context)


def test_embedding_diversity_with_the_packaged_encoder():
    encoder = offline_encoder()
    same = embedding_diversity(["A cat sat on the mat."] * 3, encoder)
    varied = embedding_diversity(
        ["A cat sat on the mat.", "Stock prices fell sharply.", "Bake the bread for an hour."], encoder
    )
    assert same == pytest.approx(0.0, abs=1e-3) and varied > 50


def test_gsm8k_answers_follow_the_last_the_answer_is():
    assert extract_answer("First 3 + 4 = 7. The answer is: 7") == "7"
    assert extract_answer("The answer is 5. Wait, no. The answer is $1,250.00.") == "1250"
    assert extract_answer("The answer is -2.5") == "-2.5"
    assert extract_answer("no final answer here") is None
    # The first number after the marker, wherever it is; fractions are evaluated.
    assert extract_answer("So the answer is that Ann has 12 keys, not 13.") == "12"
    assert extract_answer("THE ANSWER IS 3/4") == "0.75"
    assert extract_answer("The answer is: 6/3.") == "2"
    assert extract_answer("The answer is 5/0") is None


def test_original_answer_reading_follows_the_original_codes_rules():
    """evaluation/utils/gsm8k.py: only "The answer is"/"the answer is" count; its number
    pattern takes at most one of ".,/" ; the value is rounded half to even."""
    assert extract_answer("The answer is 3.5", compat="original") == "4"
    assert extract_answer("The answer is 2.5", compat="original") == "2"
    assert extract_answer("The answer is: $1,250,000.", compat="original") == "1250"
    assert extract_answer("The answer is 1,250", compat="original") == "1250"
    assert extract_answer("the answer is 3/4", compat="original") == "1"
    assert extract_answer("The answer is 7/0", compat="original") == "7"
    assert extract_answer("The answer is -12 apples", compat="original") == "-12"
    assert extract_answer("THE ANSWER IS 3", compat="original") is None
    assert extract_answer("The Answer Is 3", compat="original") is None
    assert extract_answer("The answer is 5. Or the answer is 6.", compat="original") == "6"
    assert extract_answer("The answer is unknown", compat="original") is None
    # Where the original's reading raises, its callers (evaluation_gsm8k.py and
    # evaluation_gsm8k_voting.py) catch the error and record the answer as None.
    assert extract_answer("The answer is 7/00", compat="original") is None
    assert extract_answer("The answer is " + "9" * 400, compat="original") is None
    assert extract_answer("The answer is " + "9" * 400 + "/3", compat="original") is None
    assert extract_answer("The answer is 0/0", compat="original") == "0"
    # The paper's reading of the same texts, for contrast.
    assert extract_answer("The answer is 3.5") == "3.5" and extract_answer("The answer is: $1,250,000.") == "1250000"
    with pytest.raises(ValueError, match="^answer compat: unknown answer reading 'strict'"):
        extract_answer("The answer is 1", compat="strict")


def test_original_majority_vote_counts_unparsed_answers():
    answers = [[None, None, "7", None, "5"]]
    assert majority_and_pass_at_k(answers, ["7"], [5])[5] == {"maj": 100.0, "pass": 100.0}
    assert majority_and_pass_at_k(answers, ["7"], [5], compat="original")[5] == {"maj": 0.0, "pass": 100.0}
    # Ties go to the earliest answer in both (Counter.most_common keeps first-seen order).
    assert majority_and_pass_at_k([["3", None, "4", None]], ["4"], [4], compat="original")[4]["maj"] == 0.0


def test_majority_and_pass_at_k_by_hand():
    answers = [["3", "4", "4", "5"], ["1", None, "2", "2"]]
    references = ["4", "1"]
    scores = majority_and_pass_at_k(answers, references, [1, 2, 4])
    assert scores[1] == {"maj": 50.0, "pass": 50.0}  # only the second prompt's first is right
    # @2: votes 3/4 (tie, earliest wins: 3) and 1 (None ignored) -> maj 50; pass: both found
    assert scores[2] == {"maj": 50.0, "pass": 100.0}
    # @4: votes 4 (two of four) and 2 (two of three) -> maj 50
    assert scores[4] == {"maj": 50.0, "pass": 100.0}
    with pytest.raises(ValueError, match="@8 needs 8 samples"):
        majority_and_pass_at_k(answers, references, [8])


def test_best_and_mean_of_n_and_grouping_by_prompt():
    rows = [
        {"id": 1, "sample": 1, "r": 0.0},
        {"id": 0, "sample": 0, "r": 1.0},
        {"id": 1, "sample": 0, "r": 3.0},
        {"id": 0, "sample": 1, "r": 2.0},
    ]
    rewards = list(samples_by_prompt(rows, lambda row: row["r"]).values())
    assert rewards == [[1.0, 2.0], [3.0, 0.0]]
    scores = best_and_mean_of_n(rewards, [1, 2])
    assert scores[1] == {"best": 2.0, "mean": 2.0}
    assert scores[2] == {"best": 2.5, "mean": 1.5}


def _generations(answers: dict[int, list[str]], reference: dict[int, str]) -> list[dict]:
    return [
        {
            "id": prompt,
            "sample": index,
            "instruction": f"question {prompt}",
            "answer": reference[prompt],
            "text": f"Some working. The answer is: {answer}",
        }
        for prompt, texts in answers.items()
        for index, answer in enumerate(texts)
    ]


def test_answer_metrics_score_generation_rows_against_their_gsm8k_answer():
    rows = _generations({0: ["4", "3", "3", "3"], 1: ["7", "7", "1,000", "7"]}, {0: "3", 1: "1000"})
    greedy = compute("answer_accuracy", rows, {})
    assert greedy["accuracy"] == 0.0 and greedy["correct"] == [False, False]
    voting = compute("answer_voting", rows, {})
    # default k: powers of two up to the 4 samples
    assert voting["ks"] == [1, 2, 4] and voting["samples_per_prompt"] == 4
    # @2: prompt 0 votes 4/3 tie -> 4 (earliest), prompt 1 -> 7; pass@2: prompt 0 has 3
    assert voting["maj"] == [0.0, 0.0, 50.0] and voting["pass"] == [0.0, 50.0, 100.0]
    assert compute("answer_voting", rows, {"ks": [4]})["maj"] == [50.0]
    # Per k, per prompt: the outcomes the percentages are the means of.
    assert voting["ids"] == [0, 1]
    assert voting["maj_correct"] == [[False, False], [False, False], [True, False]]
    assert voting["pass_correct"] == [[False, False], [True, False], [True, True]]
    with pytest.raises(KeyError, match="row 0 .*no reference 'answer'"):
        compute("answer_accuracy", [{**rows[0], "answer": None}], {})


def test_answer_metrics_with_compat_original():
    rows = _generations({0: ["2.5", "x", "y", "2"], 1: ["3.5", "4", "z", "w"]}, {0: "2", 1: "4"})
    for row in rows:
        if row["text"].endswith(("x", "y", "z", "w")):
            row["text"] = "I could not finish."
    paper = compute("answer_voting", rows, {"ks": [4]})
    original = compute("answer_voting", rows, {"ks": [4], "compat": "original"})
    # Paper: prompt 0 votes 2.5/2 (tie, 2.5 first: wrong), prompt 1 votes 3.5/4 (3.5: wrong).
    assert paper["maj"] == [0.0] and paper["compat"] == "paper"
    # Original: 2.5 rounds to 2 (two votes against two Nones, 2 first: right); prompt 1:
    # 3.5 rounds to 4, two votes for 4 against two Nones, 4 first: right.
    assert original["maj"] == [100.0] and original["unparsed"] == 4
    greedy = compute("answer_accuracy", rows, {"compat": "original"})
    assert greedy["correct"] == [True, True] and greedy["compat"] == "original"
    assert compute("answer_accuracy", rows, {})["correct"] == [False, False]
    # Both readings in one score: the original's headline, the paper's beside it.
    both = compute("answer_voting", rows, {"ks": [4], "compat": "original", "variants": ["paper", "original"]})
    assert both["maj"] == [100.0] and list(both["variants"]) == ["paper"]
    assert both["variants"]["paper"]["maj"] == [0.0] and both["variants"]["paper"]["compat"] == "paper"
    greedy = compute("answer_accuracy", rows, {"compat": "original", "variants": ["paper"]})
    assert greedy["variants"]["paper"]["correct"] == [False, False]


def test_diversity_metric_averages_each_prompts_scores():
    rows = [{"id": 0, "sample": i, "instruction": "write a poem", "text": text} for i, text in enumerate(SAMPLES)]
    rows += [
        {"id": 1, "sample": i, "instruction": "write a story", "text": text}
        for i, text in enumerate(["one two three", "one two three"])
    ]
    paper = compute("diversity", rows, {})
    assert paper["prompts"] == 2 and paper["samples_per_prompt"] == 2
    assert paper["compat"] == "paper" and paper["variants"] == {}
    assert paper["distinct_1"] == pytest.approx((100 * 6 / 9 + 100 * 3 / 6) / 2)
    assert paper["distinct"] == pytest.approx((paper["distinct_1"] + paper["distinct_2"] + paper["distinct_3"]) / 3)
    assert paper["self_bleu"] == pytest.approx((self_bleu_diversity(SAMPLES) + 0.0) / 2)
    # Each prompt's scores are kept, in prompt order, for the tables' bootstrap.
    assert paper["ids"] == [0, 1]
    assert paper["per_prompt"]["distinct_1"] == pytest.approx([100 * 6 / 9, 100 * 3 / 6])
    assert sum(paper["per_prompt"]["embedding"]) / 2 == pytest.approx(paper["embedding"])
    with pytest.raises(ValueError, match=r"^metrics\.diversity\.compat: unknown diversity definition 'answers'"):
        compute("diversity", rows, {"compat": "answers"})


# ---- GEM's data: SFT chats, GSM8K prompts, writing prompts ----


def test_gsm8k_problems_become_sft_chats_and_prompts_with_their_final_answer(tmp_path):
    from reprolm.data.builders import BUILDERS, BuildContext
    from reprolm.data.sources import write_source

    write_source({"schema": "gsm8k", "fixture": {"n": 4, "seed": 1}}, tmp_path / "gsm8k")
    write_source(
        {"schema": "ultrafeedback_binarized", "fixture": {"n": 3, "seed": 2, "splits": ["train_sft", "test_sft"]}},
        tmp_path / "uf",
    )
    raw = pq.read_table(tmp_path / "gsm8k" / "train.parquet").to_pylist()
    sources, schemas = {"uf": tmp_path / "uf", "g": tmp_path / "gsm8k"}, {"uf": "ultrafeedback_binarized", "g": "gsm8k"}
    chats = BUILDERS["chat_sft"](BuildContext(sources, schemas, {"question_template": "Q: {instruction}\n"}))
    assert [len(chats[split]) for split in ("train", "test")] == [3 + 4, 3 + 4]
    assert [row["id"] for row in chats["train"]] == list(range(7))
    for chat, record in zip(chats["train"][3:], raw, strict=True):
        user, answer = chat["messages"]
        assert user == {"role": "user", "content": f"Q: {record['question']}\n"}
        working, final = record["answer"].split("\n#### ")
        assert answer["content"].endswith(f"\nThe answer is: {final}") and "<<" not in answer["content"]
        assert extract_answer(answer["content"]) == final
    prompts = BUILDERS["instructions"](BuildContext({"g": tmp_path / "gsm8k"}, {"g": "gsm8k"}, {"split": "test"}))
    test_raw = pq.read_table(tmp_path / "gsm8k" / "test.parquet").to_pylist()
    assert [(p["instruction"], p["answer"]) for p in prompts["test"]] == [
        (r["question"], r["answer"].rsplit("#### ", 1)[1]) for r in test_raw
    ]
    with pytest.raises(
        ValueError,
        match="chat_sft \\(source 'uf'\\) cannot read schema 'alpaca_eval' "
        ".*it reads ultrafeedback_binarized, numina_cot, .*gsm8k",
    ):
        BUILDERS["chat_sft"](BuildContext({"uf": tmp_path / "uf"}, {"uf": "alpaca_eval"}, {}))


def test_prompt_template_wraps_the_instruction_and_needs_its_slot():
    from reprolm.generate.run import _templated

    rows = [{"id": 0, "instruction": "What is 2 + 2?"}]
    assert _templated(rows, "Question: {instruction}\nThink.") == [
        {"id": 0, "instruction": "Question: What is 2 + 2?\nThink."}
    ]
    assert _templated(rows, None) is rows
    with pytest.raises(ValueError, match="no {instruction} slot"):
        _templated(rows, "Question: {question}")


# ---- the study's configuration ----


def test_gem_config_gives_each_base_its_recipes_and_refuses_impossible_settings():
    from pathlib import Path

    import yaml

    from reprolm.checks import check_config
    from reprolm.errors import ConfigError
    from reprolm.studies import STUDIES

    repo = Path(__file__).resolve().parents[1]
    schema_file = repo / "workflow/schemas/config.schema.yaml"
    paper = yaml.safe_load((repo / "config/paper.yaml").read_text())
    check_config(paper, schema_file)
    models = STUDIES["gem"].models(paper)
    assert models == [("llama3_8b_gem", r) for r in ("ce", "gem_linear", "gem_logsigmoid")] + [
        ("qwen25_math_7b", r) for r in ("ce_numina", "gem_linear_numina", "gem_logsigmoid_numina")
    ]
    scores = STUDIES["gem"].score_paths(paper)
    # The math models get GSM8K greedy (and IFEval); sampling, diversity and best-of-n are the chat models'.
    assert "results/scores/answer_accuracy/qwen25_math_7b/ce_numina/gsm8k_greedy.json" in scores
    assert not [
        s for s in scores if "qwen25_math_7b" in s and ("answer_voting" in s or "grade_" in s or "diversity" in s)
    ]
    assert sum("grade_fsfairx_rm/llama3_8b_gem/" in s for s in scores) == 3
    default = overlays.load(repo / "config/config.yaml", repo)
    default["gem"]["best_of_n"]["ns"] = [1, 16]
    with pytest.raises(ConfigError, match="best-of-16, but promptset 'gem_chat' samples n=8"):
        check_config(default, schema_file)
    default["gem"]["best_of_n"]["ns"] = [1, 8]
    default["gem"]["labels"]["sft"] = "SFT"
    with pytest.raises(ConfigError, match="gem.labels: 'sft' is not declared"):
        check_config(default, schema_file)
    del default["gem"]["labels"]["sft"]
    default["metrics"]["answer_voting"]["ks"] = [1, 16]
    with pytest.raises(
        ConfigError,
        match=r"gem.evaluations\[1\]: metrics.answer_voting.ks asks for @16, "
        "but promptset 'gsm8k_samples' samples n=8",
    ):
        check_config(default, schema_file)
    default["metrics"]["answer_voting"]["ks"] = [1, 8]
    default["promptsets"]["poems"]["sampling"]["n"] = 1
    with pytest.raises(
        ConfigError,
        match=r"gem.evaluations\[2\]: diversity compares a prompt's samples, "
        "but promptset 'poems' samples n=1",
    ):
        check_config(default, schema_file)


# ---- GEM's tables: every figure with its bootstrap over prompts ----

GEM_STUDY = {
    "labels": {"ce": "CE", "gem": "GEM"},
    "lm_eval_suite": "ifeval",
    "evaluations": [
        {"promptset": "greedy", "metric": "answer_accuracy"},
        {"promptset": "samples", "metric": "answer_voting"},
        {"promptset": "poems", "metric": "diversity"},
    ],
    "best_of_n": {"promptset": "chat", "judge": "rm", "ns": [1, 2]},
}
GEM_MODELS = [("tiny", "ce"), ("tiny", "gem")]


def _gem_scores():
    from reprolm.aggregate.tables import Score

    answers = {
        "ce": {0: ["3", "3", "4", "4"], 1: ["7", "1", "7", "7"], 2: ["5", "6", "2", "2"], 3: ["9", "9", "9", "9"]},
        "gem": {0: ["4", "3", "3", "3"], 1: ["1", "7", "1", "1"], 2: ["6", "6", "2", "2"], 3: ["8", "9", "9", "9"]},
    }
    references = {0: "3", 1: "7", 2: "2", 3: "9"}
    scores = []
    for recipe, by_prompt in answers.items():
        rows = _generations(by_prompt, references)
        scores.append(Score("answer_accuracy", "tiny", recipe, "greedy", compute("answer_accuracy", rows, {})))
        scores.append(Score("answer_voting", "tiny", recipe, "samples", compute("answer_voting", rows, {})))
    rewards = {
        "ce": {0: [1.0, 3.0], 1: [2.0, 0.5], 2: [-1.0, 0.0]},
        "gem": {0: [2.0, 2.5], 1: [0.0, 4.0], 2: [1.0, 1.5]},
    }
    for recipe, by_prompt in rewards.items():
        ids = [p for p, grades in by_prompt.items() for _ in grades]
        scores.append(
            Score(
                "grade_rm",
                "tiny",
                recipe,
                "chat",
                {
                    "ids": ids,
                    "samples": [i for grades in by_prompt.values() for i in range(len(grades))],
                    "grades": [[grade] for grades in by_prompt.values() for grade in grades],
                },
            )
        )
    diversity = {
        "ce": {
            "distinct_1": [50.0, 70.0, 60.0],
            "distinct_2": [80.0, 90.0, 70.0],
            "distinct_3": [90.0, 95.0, 85.0],
            "self_bleu": [40.0, 60.0, 50.0],
            "embedding": [20.0, 30.0, 10.0],
        },
        "gem": {
            "distinct_1": [60.0, 80.0, 65.0],
            "distinct_2": [85.0, 95.0, 75.0],
            "distinct_3": [92.0, 97.0, 90.0],
            "self_bleu": [45.0, 65.0, 55.0],
            "embedding": [25.0, 35.0, 15.0],
        },
    }
    for recipe, per_prompt in diversity.items():
        means = {name: sum(values) / 3 for name, values in per_prompt.items()}
        scores.append(
            Score(
                "diversity",
                "tiny",
                recipe,
                "poems",
                {
                    **means,
                    "distinct": (means["distinct_1"] + means["distinct_2"] + means["distinct_3"]) / 3,
                    "ids": [10, 11, 12],
                    "per_prompt": per_prompt,
                    "encoder": "packaged",
                    "compat": "paper",
                },
            )
        )
    return scores


def test_gsm8k_figures_are_the_scores_with_a_paired_bootstrap_over_prompts():
    import numpy as np

    from reprolm.aggregate import uncertainty as u
    from reprolm.studies.gem.tables import gsm8k_tables

    scores = _gem_scores()
    headline, by_k = gsm8k_tables(scores, GEM_STUDY, GEM_MODELS)
    ce, gem = headline.iloc[0], headline.iloc[1]
    greedy = {s.recipe: s.data for s in scores if s.metric == "answer_accuracy"}
    voting = {s.recipe: s.data for s in scores if s.metric == "answer_voting"}
    assert ce["Greedy Decoding"].value == greedy["ce"]["accuracy"] == 75.0
    assert gem["Greedy Decoding"].value == greedy["gem"]["accuracy"] == 0.0
    assert ce["Majority Voting (@4)"].value == voting["ce"]["maj"][-1]
    assert gem["Best-of-N (@4)"].value == voting["gem"]["pass"][-1] == 100.0
    # Prompts 0-3, CE right on 0, 1 and 3 greedily: each replicate is the share right among
    # the drawn prompts.
    draws = u.unit_draws([0, 1, 2, 3])
    assert np.allclose(ce["Greedy Decoding"].replicates, [100 * np.mean([p != 2 for p in d]) for d in draws])
    # Both models are drawn on the same prompts: the difference is paired, and CE's greedy
    # lead of 75 points is significant even over four prompts.
    lead = u.difference(ce["Greedy Decoding"], gem["Greedy Decoding"])
    assert lead.paired and lead.value == 75.0 and lead.low > 0
    assert list(by_k["k"]) == [1, 2, 4, 1, 2, 4]
    for (_, row), maj, passed in zip(
        by_k.iterrows(),
        voting["ce"]["maj"] + voting["gem"]["maj"],
        voting["ce"]["pass"] + voting["gem"]["pass"],
        strict=True,
    ):
        assert row["maj@k"].value == maj and row["pass@k"].value == passed
        assert row["maj@k"].low <= maj <= row["maj@k"].high


def test_chat_best_and_mean_of_n_by_prompt():
    import numpy as np

    from reprolm.aggregate import uncertainty as u
    from reprolm.studies.gem.tables import chat_tables

    best, by_n = chat_tables(_gem_scores(), GEM_STUDY, GEM_MODELS)
    old = best_and_mean_of_n([[1.0, 3.0], [2.0, 0.5], [-1.0, 0.0]], [1, 2])
    ce = by_n[by_n["model"] == "CE"].set_index("n")
    assert ce.loc[2, "best-of-n"].value == old[2]["best"] == (3.0 + 2.0 + 0.0) / 3
    assert ce.loc[2, "mean-of-n"].value == old[2]["mean"] and ce.loc[1, "best-of-n"].value == old[1]["best"]
    assert best.iloc[0]["Reward (Best-of-N @2)"].value == old[2]["best"]
    draws = u.unit_draws([0, 1, 2])
    per_prompt = np.array([3.0, 2.0, 0.0])
    assert np.allclose(ce.loc[2, "best-of-n"].replicates, per_prompt[draws].mean(axis=1))


def test_a_judge_graded_beside_adds_marked_chat_columns_and_its_own_rows():
    import pandas as pd

    from reprolm.aggregate.tables import Score
    from reprolm.studies.gem.tables import chat_tables

    study = {**GEM_STUDY, "best_of_n": {**GEM_STUDY["best_of_n"], "beside": ["rm_end"]}}
    # The same samples graded by a second judge (e.g. the reward model read at the answer's
    # end where the headline one reads after an extra assistant header): CE only.
    beside = {0: [0.5, -1.0], 1: [4.0, 1.0], 2: [2.0, 2.0]}
    graded = {
        "ids": [p for p, grades in beside.items() for _ in grades],
        "samples": [i for grades in beside.values() for i in range(len(grades))],
        "grades": [[grade] for grades in beside.values() for grade in grades],
    }
    scores = _gem_scores() + [Score("grade_rm_end", "tiny", "ce", "chat", graded)]
    best, by_n = chat_tables(scores, study, GEM_MODELS)
    ce, gem = best.iloc[0], best.iloc[1]
    assert ce["Reward (Best-of-N @2)"].value == (3.0 + 2.0 + 0.0) / 3
    assert ce["Reward (Best-of-N @2) [rm_end]"].value == (0.5 + 4.0 + 2.0) / 3
    assert pd.isna(gem["Reward (Best-of-N @2) [rm_end]"])  # not graded by it: empty
    rows = by_n.set_index(["model", "judge", "n"])
    assert rows.loc[("CE", "rm_end", 1), "mean-of-n"].value == (0.5 + 4.0 + 2.0) / 3
    assert rows.loc[("CE", "rm_end", 2), "mean-of-n"].value == (-0.25 + 2.5 + 2.0) / 3
    assert sorted(set(by_n["judge"])) == ["rm", "rm_end"] and len(by_n) == 3 * 2


def test_diversity_table_means_over_prompts_and_the_distinct_ratio_averages_distinct_1_to_3(tmp_path):
    import numpy as np
    import pandas as pd

    from reprolm.io import write_table
    from reprolm.studies.gem.tables import diversity_table

    scores = _gem_scores()
    frame = diversity_table(scores, GEM_STUDY, GEM_MODELS, "poems")
    ce = frame.iloc[0]
    data = next(s.data for s in scores if s.metric == "diversity" and s.recipe == "ce")
    assert ce["Self-BLEU Diversity Score"].value == data["self_bleu"] == 50.0
    assert ce["N-gram Distinct Ratio"].value == pytest.approx(data["distinct"])
    assert np.allclose(
        ce["N-gram Distinct Ratio"].replicates, np.mean([ce[f"distinct-{n}"].replicates for n in (1, 2, 3)], axis=0)
    )
    write_table(frame, tmp_path, "diversity_poems")
    written = pd.read_csv(tmp_path / "diversity_poems.csv")
    for column in (
        "N-gram Distinct Ratio",
        "Self-BLEU Diversity Score",
        "Sentence-Embedding Diversity Score",
        "distinct-1",
    ):
        assert (written[f"{column} lo"] <= written[column]).all() and (written[column] <= written[f"{column} hi"]).all()
    assert list(written.columns[:5]) == [
        "base",
        "model",
        "N-gram Distinct Ratio",
        "N-gram Distinct Ratio lo",
        "N-gram Distinct Ratio hi",
    ]


def test_tables_fill_the_seeds_columns_by_compat_with_each_variant_beside():
    from reprolm.aggregate.tables import Score
    from reprolm.studies.gem.tables import chat_tables, diversity_table, gsm8k_tables

    rows = _generations({0: ["2.5", "x", "y", "2"], 1: ["3.5", "4", "z", "w"]}, {0: "2", 1: "4"})
    context = {"ks": [4], "compat": "original", "variants": ["paper"]}
    scores = [
        Score("answer_voting", "tiny", "ce", "samples", compute("answer_voting", rows, context)),
        Score("answer_accuracy", "tiny", "ce", "greedy", compute("answer_accuracy", rows, context)),
    ]
    # The hand-checked readings above: original maj@4 100, paper 0; greedy 2.5 is 2 (right)
    # and 3.5 is 4 (right) originally, both wrong as written.
    (row,) = gsm8k_tables(scores, GEM_STUDY, [("tiny", "ce")])[0].to_dict("records")
    assert row["definition"] == "original"
    assert row["Majority Voting (@4)"].value == 100.0 and row["Majority Voting (@4) [paper]"].value == 0.0
    assert row["Greedy Decoding"].value == 100.0 and row["Greedy Decoding [paper]"].value == 0.0
    per_prompt = {"distinct_1": [30.0, 50.0], "distinct_2": [60.0, 80.0], "distinct_3": [90.0, 100.0]}
    original = {**per_prompt, "self_bleu": [20.0, 40.0], "embedding": [10.0, 12.0]}
    paper = {name: [v + 10 for v in values] for name, values in original.items()}
    data = {"ids": [0, 1], "per_prompt": original, "compat": "original", "encoder": "packaged"}
    data["variants"] = {"paper": {"per_prompt": paper, "compat": "paper"}}
    frame = diversity_table([Score("diversity", "tiny", "ce", "poems", data)], GEM_STUDY, [("tiny", "ce")], "poems")
    row = frame.iloc[0]
    # Distinct ratio: the mean of distinct-1..3 over the two prompts: (40 + 70 + 95) / 3.
    assert row["definition"] == "original"
    assert row["N-gram Distinct Ratio"].value == pytest.approx(205 / 3)
    assert row["N-gram Distinct Ratio [paper]"].value == pytest.approx(205 / 3 + 10)
    assert row["Self-BLEU Diversity Score"].value == 30.0 and row["Self-BLEU Diversity Score [paper]"].value == 40.0
    assert row["Sentence-Embedding Diversity Score [paper]"].value == 21.0
    # The chat table at the seed's n (and another beside it): best of the first n samples.
    study = {**GEM_STUDY, "best_of_n": {**GEM_STUDY["best_of_n"], "headline": [1, 2]}}
    best, _ = chat_tables(_gem_scores(), study, GEM_MODELS)
    old = best_and_mean_of_n([[1.0, 3.0], [2.0, 0.5], [-1.0, 0.0]], [1, 2])
    assert list(best.columns) == ["base", "model", "Reward (Best-of-N @1)", "Reward (Best-of-N @2)"]
    assert best.iloc[0]["Reward (Best-of-N @1)"].value == old[1]["best"]
    assert best.iloc[0]["Reward (Best-of-N @2)"].value == old[2]["best"]


def test_gem_tables_from_scores_and_lm_eval_log_carry_intervals_and_plot_them(tmp_path):
    import gzip
    import json

    import pandas as pd

    from reprolm.aggregate.tables import load_scores
    from reprolm.io import write_json
    from reprolm.paths import score_path
    from reprolm.studies.gem.tables import write_gem_tables

    # IFEval over three prompts, as lm-eval reports it and logs it, by two protocols: the
    # original's sampling (the suite's first task, the unmarked columns) and greedy beside it.
    protocols = {
        "ifeval_sampled": (
            {"strict": [True, False, True], "loose": [True, True, True]},
            {"strict": [[True, True], [False], [True, False]], "loose": [[True, True], [True], [True, False]]},
            {"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 50, "max_gen_toks": 1024, "until": []},
        ),
        "ifeval_greedy": (
            {"strict": [False, False, True], "loose": [True, False, True]},
            {"strict": [[False, True], [False], [True, True]], "loose": [[True, True], [False], [True, True]]},
            {"do_sample": False, "temperature": 0.0, "max_gen_toks": 1280, "until": []},
        ),
    }
    tasks, records = {}, []
    for spec, (prompt, instructions, generation) in protocols.items():
        metrics = {f"prompt_level_{kind}_acc,none": sum(values) / 3 for kind, values in prompt.items()}
        metrics.update(
            {f"inst_level_{kind}_acc,none": sum(map(sum, checks)) / 5 for kind, checks in instructions.items()}
        )
        tasks[spec] = {
            "task": "ifeval",
            "metric": "prompt_level_strict_acc,none",
            "value": metrics["prompt_level_strict_acc,none"],
            "metrics": metrics,
            "n_docs": 3,
            "generation_kwargs": generation,
            "unscored": None,
        }
        for doc in range(3):
            values = {f"prompt_level_{kind}_acc": prompt[kind][doc] for kind in prompt}
            values.update({f"inst_level_{kind}_acc": instructions[kind][doc] for kind in instructions})
            records.append({"spec": spec, "task": "ifeval", "doc_id": doc, "filter": "none", "values": values})
    path = tmp_path / score_path("lm_eval", "tiny", "ce", "ifeval")
    write_json({"metric": "lm_eval", "task_order": list(tasks), "tasks": tasks}, path)
    with gzip.open(path.with_name("ifeval.samples.jsonl.gz"), "wt") as stream:
        stream.writelines(json.dumps(record) + "\n" for record in records)
    scores = _gem_scores() + load_scores([path])
    write_gem_tables(scores, GEM_STUDY, {"models": GEM_MODELS}, tmp_path / "tables", tmp_path / "plots")
    ifeval = pd.read_csv(tmp_path / "tables" / "ifeval.csv")
    columns = ["Prompt-Strict", "Instruction-Strict", "Prompt-Level", "Instruction-Level", "Avg"]
    assert list(ifeval.columns) == [
        "base",
        "model",
        *[
            name
            for mark in ("", " [ifeval_greedy]")
            for name in [
                *[f"{c}{mark}{suffix}" for c in columns for suffix in ("", " lo", " hi")],
                f"protocol{mark}",
                f"prompts scored{mark}",
                f"not scored{mark}",
            ]
        ],
    ]
    row = ifeval.iloc[0]
    assert row["Prompt-Strict"] == round(100 * 2 / 3, 2) and row["Instruction-Strict"] == 60.0
    assert row["Avg"] == round((100 * 2 / 3 + 60 + 100 + 80) / 4, 2)
    assert row["protocol"] == "sampled (T 0.6, top-p 0.9, top-k 50), one sample, 1024 tokens"
    assert (
        row["Prompt-Strict [ifeval_greedy]"] == round(100 / 3, 2) and row["Instruction-Strict [ifeval_greedy]"] == 60.0
    )
    assert row["Avg [ifeval_greedy]"] == round((100 / 3 + 60 + 100 * 2 / 3 + 80) / 4, 2)
    assert row["protocol [ifeval_greedy]"] == "greedy, 1280 tokens"
    for column in columns:
        for mark in ("", " [ifeval_greedy]"):
            assert row[f"{column}{mark} lo"] <= row[f"{column}{mark}"] <= row[f"{column}{mark} hi"]
    gsm8k = pd.read_csv(tmp_path / "tables" / "gsm8k.csv")
    assert list(gsm8k.columns) == [
        "base",
        "model",
        *[
            f"{c}{suffix}"
            for c in ("Greedy Decoding", "Majority Voting (@4)", "Best-of-N (@4)")
            for suffix in ("", " lo", " hi")
        ],
        "definition",
    ]
    assert {"best-of-n lo", "mean-of-n hi"} <= set(pd.read_csv(tmp_path / "tables" / "chat_best_of_n.csv").columns)
    for plot in ("gsm8k_scaling.png", "diversity.png"):
        assert (tmp_path / "plots" / plot).stat().st_size > 0
