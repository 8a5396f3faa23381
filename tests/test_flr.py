"""FLR: the follow-up data as published, the paper's and the original code's scores against
straightforward one-at-a-time computations, the reward's arithmetic, the fine-tuned
variant's format, reward-model benchmarks, and online preference pairs."""

from __future__ import annotations

import json
import math
import random
import re
import signal
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml
from scipy import stats

from finetune_helpers import tiny_finetune_inputs
from reprolm.config import overlays
from reprolm.data.builders import BUILDERS, BuildContext
from reprolm.data.fixture_world import passage, question
from reprolm.registry import UnknownName
from reprolm.rehearse import sizes
from reprolm.rehearse.sizes import StreamedJob, stand_in_judge, streamed_memory
from reprolm.score import flr
from reprolm.score.flr import FEEDBACK_OPENING, SCORINGS, FollowUpScorer, load_followups
from reprolm.score.reward_benchmarks import correlations, rating_agreement
from reprolm.stopping import JobStopped, stop_request
from reprolm.studies.base import STUDIES
from reprolm.studies.flr import ranking
from reprolm.studies.flr.ranking import RankingProgress, load_elo, model_ranking, read_rows
from workflow_helpers import REPO

FOLLOWUPS = REPO / "config" / "flr_followups.yaml"
CONVERSATIONS = [
    [
        {"role": "user", "content": "Describe the blue door."},
        {"role": "assistant", "content": "The miller repairs the blue door before the rain."},
    ],
    [
        {"role": "user", "content": "Why does the farmer sell the old piano?"},
        {"role": "assistant", "content": "piano the sells farmer old the because."},
        {"role": "user", "content": "Say it again."},
        {"role": "assistant", "content": "The farmer sells the old piano for a friend."},
    ],
]


def test_followups_are_the_original_lists_with_their_quirks():
    followups = load_followups(FOLLOWUPS)
    assert list(followups) == [
        "understanding",
        "relevance",
        "correctness",
        "engagingness",
        "informativeness",
        "following",
    ]
    assert all(len(sides["positive"]) == len(sides["negative"]) == 10 for sides in followups.values())
    assert followups["understanding"]["positive"][0] == "You\u2019re very clear and easy to understand."
    # Repeated entries are kept: they weigh twice in the mean, as in the original.
    assert followups["understanding"]["positive"].count("That makes perfect sense!") == 2
    assert followups["correctness"]["positive"].count("You gave me the correct details.") == 2
    assert (
        followups["informativeness"]["negative"].count("This doesn't give me the information I was looking for.") == 2
    )


def test_unknown_category_names_the_file_and_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="flr_followups.yaml: no follow-up category 'helpfulness'; known: "):
        load_followups(FOLLOWUPS, ["helpfulness"])
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump({"categories": {"relevance": {"positive": ["Good."], "negative": []}}}))
    with pytest.raises(ValueError, match="broken.yaml: categories.relevance.negative: expected a non-empty list"):
        load_followups(broken)


@pytest.fixture(scope="module")
def scoring_lm(tmp_path_factory):
    root = tmp_path_factory.mktemp("flr")
    tiny_finetune_inputs(root)
    return str(root / "base")


@pytest.mark.slow
def test_batched_scores_equal_scoring_each_follow_up_alone(scoring_lm):
    followups = load_followups(FOLLOWUPS, ["relevance", "correctness"])
    batched = FollowUpScorer(scoring_lm, followups, batch_size=7)  # chunks that do not divide 20
    # The baseline itself: the mean log-probability of the follow-up's tokens after the chat.
    target = batched.tokenizer("You got it right.", add_special_tokens=False).input_ids
    prefix = batched.tokenizer.apply_chat_template(
        CONVERSATIONS[0] + [{"role": "user", "content": "\0"}], tokenize=False
    ).split("\0")[0]
    ids = batched.tokenizer(prefix, add_special_tokens=False).input_ids
    with torch.no_grad():
        logprobs = batched.model(torch.tensor([ids + target])).logits[0].log_softmax(-1)
    by_hand = sum(logprobs[len(ids) - 1 + k, t].item() for k, t in enumerate(target)) / len(target)
    assert batched.score_alone(CONVERSATIONS[0], "You got it right.") == pytest.approx(by_hand, abs=1e-5)
    scores = batched.followup_scores(CONVERSATIONS)
    for conversation, by_category in zip(CONVERSATIONS, scores):
        for category, sides in followups.items():
            for side, utterances in sides.items():
                alone = [batched.score_alone(conversation, u) for u in utterances]
                assert by_category[category][side] == pytest.approx(alone, abs=1e-5)
    rewards = batched.category_rewards(CONVERSATIONS)
    for by_category, reward in zip(scores, rewards):
        for category, sides in by_category.items():
            assert reward[category] == pytest.approx(sum(sides["positive"]) / 10 - sum(sides["negative"]) / 10)
    assert batched.score(CONVERSATIONS) == pytest.approx([sum(r.values()) / 2 for r in rewards])


def test_an_flr_judges_compat_is_a_registered_scoring():
    judges = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]["judges"]
    flr = next(b for b in judges["additionalProperties"]["oneOf"] if b["properties"]["kind"] == {"const": "flr"})
    assert flr["properties"]["compat"]["enum"] == SCORINGS.names()
    # Refused before the model is loaded.
    with pytest.raises(UnknownName, match="^FLR compat: unknown FLR scoring 'raw'"):
        FollowUpScorer("no/such/model", {}, compat="raw")


def test_original_compat_reads_raw_logits_at_one_position(scoring_lm):
    followups = load_followups(FOLLOWUPS, ["following"])
    scorer = FollowUpScorer(scoring_lm, followups, compat="original", batch_size=8)
    scores = scorer.followup_scores(CONVERSATIONS[:1])[0]["following"]
    for utterance, value in zip(followups["following"]["positive"], scores["positive"]):
        ids = scorer.tokenizer.apply_chat_template(
            CONVERSATIONS[0] + [{"role": "user", "content": utterance}], tokenize=True, return_dict=True
        )["input_ids"]
        target = scorer.tokenizer(utterance).input_ids
        with torch.no_grad():
            logits = scorer.model(torch.tensor([ids])).logits[0]
        assert value == pytest.approx(logits[len(ids) - len(target), target].mean().item(), abs=1e-5)
        assert value > 0 or value < 0  # raw logits, not log-probabilities (which are all negative)


def test_streamed_original_scores_equal_each_whole_sequence_alone(scoring_lm, monkeypatch):
    followups = load_followups(FOLLOWUPS, ["relevance", "following"])
    # Batches of a few prefixes and windows of a few conversations, neither dividing the rest.
    monkeypatch.setattr(flr, "ORIGINAL_WINDOW_BATCHES", 1)
    scorer = FollowUpScorer(scoring_lm, followups, compat="original", batch_tokens=90)
    conversations = CONVERSATIONS + [
        [{"role": "user", "content": "Who repairs the door?"}, {"role": "assistant", "content": "The miller."}]
    ]
    heads = []
    hook = scorer.model.get_output_embeddings().register_forward_hook(lambda _m, _a, out: heads.append(out.shape))
    streamed = scorer.followup_scores(conversations)
    hook.remove()
    # Several batches, the output head at one position per row of each.
    assert len(heads) > 3 and all(shape[1] == 1 for shape in heads)
    for conversation, by_category in zip(conversations, streamed, strict=True):
        for category, sides in followups.items():
            for side, utterances in sides.items():
                for utterance, value in zip(utterances, by_category[category][side], strict=True):
                    ids = scorer.tokenizer.apply_chat_template(
                        conversation + [{"role": "user", "content": utterance}], tokenize=True, return_dict=True
                    )["input_ids"]
                    target = scorer.tokenizer(utterance).input_ids
                    with torch.no_grad():
                        logits = scorer.model(torch.tensor([ids])).logits[0]
                    assert value == pytest.approx(logits[len(ids) - len(target), target].mean().item(), abs=1e-5)


class StoppedAfterFirstChunk:
    """A judge that records the conversations it is given and is asked to stop (SIGTERM, as
    SLURM sends it) after its first chunk."""

    def __init__(self, judge):
        self.judge, self.chunks = judge, []

    def score(self, conversations):
        self.chunks.append(len(conversations))
        if len(self.chunks) == 1:
            stop_request.handle(signal.SIGTERM)
        return self.judge.score(conversations)


def test_a_stopped_ranking_resumes_where_it_stopped(scoring_lm, tmp_path, monkeypatch):
    monkeypatch.setattr(ranking, "CHUNK_ROWS", 2)
    scorer = FollowUpScorer(scoring_lm, load_followups(FOLLOWUPS, ["relevance"]), compat="original")
    rows = [
        {"id": k, "model": model, "conversation": CONVERSATIONS[k % 2][: 2 + 2 * (k % 3 == 0)]}
        for k, model in enumerate("aabbccd")
    ]
    pq.write_table(pa.Table.from_pylist([{**row, "extra": "unread"} for row in rows]), tmp_path / "rows.parquet")
    elo = {"a": 1200.0, "b": 1100.0, "c": 1000.0}
    uninterrupted = model_ranking(scorer, read_rows(tmp_path / "rows.parquet"), elo)
    judge = StoppedAfterFirstChunk(scorer)
    progress = RankingProgress(tmp_path / "ranking.json", key="inputs-1")
    try:
        with pytest.raises(JobStopped, match=r"stopped by SIGTERM after saving its progress \(2 answers scored\)"):
            model_ranking(judge, read_rows(tmp_path / "rows.parquet"), elo, progress)
    finally:
        stop_request.clear()
    saved = json.loads((tmp_path / ".ranking.json.progress").read_text())
    assert (saved["key"], saved["ids"]) == ("inputs-1", [0, 1])
    resumed = model_ranking(judge, read_rows(tmp_path / "rows.parquet"), elo, progress)
    # The first chunk once, then the three left: what an uninterrupted run returns, exactly.
    assert judge.chunks == [2, 2, 2, 1]
    assert resumed == uninterrupted
    # Saved under another key (changed inputs, settings or batching): every row again.
    model_ranking(judge, read_rows(tmp_path / "rows.parquet"), elo, RankingProgress(tmp_path / "ranking.json", "b"))
    assert judge.chunks == [2, 2, 2, 1, 2, 2, 2, 1]
    pq.write_table(pa.Table.from_pylist([{"id": 1, "conversation": CONVERSATIONS[0]}]), tmp_path / "bad.parquet")
    with pytest.raises(KeyError, match=r"bad.parquet: the model ranking needs the fields \['model'\]"):
        next(read_rows(tmp_path / "bad.parquet"))


def test_the_ranking_script_writes_the_ranking_and_leaves_no_progress(scoring_lm, tmp_path, monkeypatch):
    """The model_ranking rule's script under a Snakemake job object as the rule gives it."""
    import runpy

    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import Snakemake

    from reprolm.stopping import STOP_SIGNALS

    monkeypatch.chdir(tmp_path)
    rows = [{"id": k, "model": "abcd"[k % 4], "conversation": CONVERSATIONS[k % 2]} for k in range(8)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    (tmp_path / "elo.yaml").write_text("elo: {a: 1200, b: 1100, c: 1000}\n")
    judge = {"kind": "flr", "model": "tiny/base", "followups": str(FOLLOWUPS), "compat": "original"}
    judge["categories"] = ["relevance"]
    output = "results/scores/model_ranking/flr_original/wildbench/test.json"
    job = Snakemake(
        InputFiles(
            fromdict={
                "judge_model": scoring_lm,
                "followups": str(FOLLOWUPS),
                "rows": str(tmp_path / "rows.parquet"),
                "elo": str(tmp_path / "elo.yaml"),
            }
        ),
        OutputFiles([output]),
        Params(fromdict={"judge": judge, "metric": "model_ranking", "seed": 0}),
        Wildcards(fromdict={"judge": "flr_original", "dataset": "wildbench", "split": "test"}),
        1,
        ResourceList(fromdict={"gpu": 0}),
        Log(["logs/model_ranking/flr_original/wildbench/test.log"]),
        {},
        "model_ranking",
        None,
    )
    handlers = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    try:
        runpy.run_path(str(REPO / "src/reprolm/studies/flr/scripts/model_ranking.py"), init_globals={"snakemake": job})
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    written = json.loads(Path(output).read_text())
    scorer = FollowUpScorer(scoring_lm, load_followups(FOLLOWUPS, ["relevance"]), compat="original")
    assert written["scores"] == scorer.score([row["conversation"] for row in rows])
    assert (written["ids"], written["models"], written["judge"]) == (list(range(8)), 3, "flr_original")
    assert not list(Path(output).parent.glob(".*progress"))


@pytest.mark.slow
def test_the_original_rankings_memory_is_modelled_from_its_stream(tmp_path, monkeypatch):
    params = SimpleNamespace(judge={"kind": "flr", "compat": "original", "categories": ["relevance"]})
    inputs = SimpleNamespace(followups="config/flr_followups.yaml")
    config = overlays.load(REPO / "config" / "config.yaml", REPO)
    wildcards = {"judge": "flr_original", "dataset": "wildbench", "split": "test"}
    streamed = STUDIES["flr"].streamed_job(config, "model_ranking", wildcards, params, inputs, REPO)
    assert (streamed["dataset"], streamed["units_per_row"], streamed["unit"]) == ("wildbench/test", 20, "pairs")
    assert (streamed["base"], streamed["stage"], streamed["run"]) == (
        "tiny_llama",
        "evaluate",
        "reprolm.studies.flr.ranking:rank_answers",
    )
    paper = SimpleNamespace(judge={"kind": "flr", "compat": "paper"})
    assert STUDIES["flr"].streamed_job(config, "model_ranking", wildcards, paper, inputs, REPO) is None
    # Measured as the rehearsal does, at two small counts of pairs, against a request it is over.
    monkeypatch.setattr(sizes, "STREAMED_UNITS", (60, 120))
    # Grouped by model, as the built WildBench is: evenly spaced rows cover every model.
    rows = [{"id": k, "model": "abc"[k // 10], "conversation": CONVERSATIONS[k % 2]} for k in range(30)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    job = StreamedJob(
        "flr_original/wildbench/test",
        "model_ranking",
        streamed["dataset"],
        streamed["run"],
        streamed["options"],
        streamed["units_per_row"],
        streamed["unit"],
        mem_mb=100,
        runtime_min=60,
        change="base_models.tiny_llama.resources.evaluate.mem_mb",
    )
    measured = sizes.measure_streamed(job, tmp_path / "rows.parquet", tmp_path / "scratch")
    assert measured.rows == {"rows": 30, "pairs": 600} and measured.memory_only
    assert re.search(r"at 60 and 120 pairs \(\d+ and \d+ MB, [\d.]+ KiB per pair\)$", measured.where)
    assert measured.flags == [f"peak memory {measured.peak_mb:.0f} MB is over 80% of mem_mb 100"]
    # Its wall time is a GPU's: not a figure for reprolm plan.
    assert json.loads(sizes.save([measured], tmp_path).read_text()) == {}


@pytest.mark.slow
def test_original_ranking_memory_is_flat_in_the_number_of_pairs(tmp_path, monkeypatch):
    """Peak RSS of the ranking job's code at 200 and 2,000 answer x follow-up pairs of
    ~900-token conversations: the original's bookkeeping held every pair's token ids (39.4
    KiB a pair at 1,000 tokens, measured), the stream a few batches' worth: its growth is
    asserted under a third of that."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # one thread: no per-thread allocator arenas in the figure
    rng = random.Random(0)
    conversations = [
        [{"role": "user", "content": question(rng)}, {"role": "assistant", "content": passage(rng, 700)}]
        for _ in range(10)
    ]
    # 100 answers of 10 conversations: the 10 the smaller run takes are those the larger repeats.
    rows = [{"id": k, "model": f"m{k // 10 % 5}", "conversation": conversations[k // 10]} for k in range(100)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "rows.parquet")
    options = {"followups": str(FOLLOWUPS), "categories": ["relevance"], "compat": "original", "format": "chat"}
    job = StreamedJob(
        "flr_original/wildbench/test",
        "model_ranking",
        "wildbench/test",
        "reprolm.studies.flr.ranking:rank_answers",
        {**options, "batch_tokens": 4096},
        20,
        "pairs",
        64000,
        480,
        "",
    )
    memory = streamed_memory(job, tmp_path / "rows.parquet", (200, 2000), tmp_path, stand_in_judge(tmp_path / "judge"))
    assert memory.units == (200, 2000)
    assert memory.kib_per_unit < 12, memory
    assert memory.at(3_686_400) < memory.peak_mb[1] + 30_000


def test_feedback_format_swaps_roles_after_the_request(scoring_lm):
    scorer = FollowUpScorer(scoring_lm, load_followups(FOLLOWUPS, ["following"]), format="feedback")
    messages = scorer._messages(CONVERSATIONS[0], "You got it right.")
    assert messages == [
        {"role": "user", "content": FEEDBACK_OPENING},
        {"role": "assistant", "content": "Describe the blue door."},
        {"role": "user", "content": "The miller repairs the blue door before the rain."},
        {"role": "assistant", "content": "You got it right."},
    ]
    alone = scorer.score_alone(CONVERSATIONS[0], "You got it right.")
    assert scorer._paper_scores(
        CONVERSATIONS[0], [scorer.tokenizer("You got it right.", add_special_tokens=False).input_ids]
    )[0] == pytest.approx(alone, abs=1e-5)


def test_long_conversations_lose_their_beginning_not_the_follow_up(scoring_lm):
    followups = load_followups(FOLLOWUPS, ["following"])
    scorer = FollowUpScorer(scoring_lm, followups, max_length=64)
    long = [{"role": "user", "content": "Describe the blue door. " * 20}, CONVERSATIONS[0][1]]
    assert all(math.isfinite(s) for s in scorer.score([long]))
    longest = max(
        len(scorer.tokenizer(u, add_special_tokens=False).input_ids)
        for sides in followups.values()
        for u in sides["positive"] + sides["negative"]
    )
    with pytest.raises(ValueError, match=f"the longest follow-up has {longest} tokens"):
        FollowUpScorer(scoring_lm, followups, max_length=longest).score([long])


def test_correlations_and_model_ranking(scoring_lm, tmp_path):
    assert correlations([1, 2, 3, 4], [10, 20, 30, 45])["spearman"] == pytest.approx(1.0)
    assert correlations([1, 2, 3, 4], [4, 3, 2, 1])["kendall"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="at least 3 items"):
        correlations([1, 2], [1, 2])
    scorer = FollowUpScorer(scoring_lm, load_followups(FOLLOWUPS, ["relevance"]))
    rows = [
        {"id": 10 + k, "model": model, "conversation": conversation}
        for k, (model, conversation) in enumerate(
            [
                ("a", CONVERSATIONS[0]),
                ("a", CONVERSATIONS[1]),
                ("b", CONVERSATIONS[1]),
                ("c", CONVERSATIONS[0]),
                ("unrated", CONVERSATIONS[0]),
            ]
        )
    ]
    scores = scorer.score([r["conversation"] for r in rows])
    elo = {"a": 1200.0, "b": 1100.0, "c": 1000.0}
    ranking = model_ranking(scorer, rows, elo)
    assert ranking["mean_score"]["a"] == pytest.approx((scores[0] + scores[1]) / 2)
    assert ranking["unrated_models"] == ["unrated"] and ranking["models"] == 3
    expected = stats.kendalltau([ranking["mean_score"][m] for m in "abc"], [1200, 1100, 1000]).statistic
    assert ranking["kendall"] == pytest.approx(expected)
    # Per answer, what the table's intervals of the means resample.
    assert (ranking["ids"], ranking["answer_models"]) == ([10, 11, 12, 13, 14], ["a", "a", "b", "c", "unrated"])
    assert ranking["scores"] == pytest.approx(scores)
    rated = rating_agreement(
        scorer, [{"id": r["id"], "conversation": r["conversation"], "score": float(k)} for k, r in enumerate(rows)]
    )
    assert rated["pearson"] == pytest.approx(stats.pearsonr(scores, range(5)).statistic)
    assert (rated["ids"], rated["ratings"]) == ([10, 11, 12, 13, 14], [0.0, 1.0, 2.0, 3.0, 4.0])
    (tmp_path / "elo.yaml").write_text("elo: {a: 1.0, b: x}\n")
    with pytest.raises(ValueError, match="elo.yaml: expected 'elo' mapping"):
        load_elo(tmp_path / "elo.yaml")
    assert len(load_elo(REPO / "config" / "lmsys_elo.yaml")) == 30


def _online_inputs(tmp_path, rows, grades, ids=None):
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "samples.parquet")
    (tmp_path / "grades.json").write_text(json.dumps({"grades": grades, "ids": ids or [r["id"] for r in rows]}))
    return {"generations": tmp_path / "samples.parquet", "grades": tmp_path / "grades.json"}


def test_online_pairs_are_best_against_worst_of_each_prompts_samples(tmp_path):
    rows = [
        {"id": i, "instruction": f"q{i}", "text": t}
        for i, t in [(0, "a"), (0, "b"), (0, "c"), (1, "d"), (1, "e"), (2, "f"), (2, "g")]
    ]
    grades = [[0.5], [2.0], [-1.0], [1.0], [1.0], [0.2], [0.25]]
    sources = _online_inputs(tmp_path, rows, grades)
    build = BUILDERS["online_preferences"]
    pairs = build(BuildContext(sources, {}, {}))["train"]
    # Prompt 1's samples tie: no pair.
    assert [(p["prompt"][0]["content"], p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs] == [
        ("q0", "b", "c"),
        ("q2", "g", "f"),
    ]
    rest = build(BuildContext(sources, {}, {"pairing": "best_vs_rest", "min_margin": 0.1}))["train"]
    assert [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in rest] == [("b", "a"), ("b", "c")]
    with pytest.raises(ValueError, match="grades are not of the samples"):
        build(BuildContext(_online_inputs(tmp_path, rows, grades, ids=[9] * 7), {}, {}))
    with pytest.raises(ValueError, match="pairing 'random'"):
        build(BuildContext(sources, {}, {"pairing": "random"}))


def test_flr_rating_files_become_rated_conversations(tmp_path):
    from reprolm.data.schemas import DataError
    from reprolm.data.sources import write_source
    from reprolm.data.upstream import validate_records

    write_source({"schema": "rated_utterances", "fixture": {"n": 6, "seed": 1}}, tmp_path / "raw")
    rows = BUILDERS["rated_responses"](BuildContext({"flask": tmp_path / "raw"}, {"flask": "rated_utterances"}, {}))
    raw = pq.read_table(tmp_path / "raw" / "train.parquet").to_pylist()
    for row, record in zip(rows["test"], raw):
        assert [t["role"] for t in row["conversation"]] == ["user", "assistant"]
        assert [t["content"] for t in row["conversation"]] == list(record["conversation"])
        assert row["score"] == record["score"]
    with pytest.raises(DataError, match="row 0: field 'conversation': expected user and assistant utterances"):
        validate_records([{"conversation": ["only a question"], "score": 3}], "rated_utterances", "flask.json")


def test_misspelt_score_field_names_the_parameter_and_the_fields(tmp_path):
    from reprolm.data.sources import write_source

    write_source({"schema": "helpsteer", "fixture": {"n": 3, "seed": 1}}, tmp_path / "raw")
    context = BuildContext({"helpsteer": tmp_path / "raw"}, {"helpsteer": "helpsteer"}, {"score_field": "helpful"})
    with pytest.raises(
        ValueError,
        match="rated_responses, source 'helpsteer': params.score_field 'helpful' is not a field of the source; fields: ",
    ):
        BUILDERS["rated_responses"](context)
    rows = BUILDERS["rated_responses"](BuildContext({"h": tmp_path / "raw"}, {"h": "helpsteer"}, {}))["test"]
    raw = pq.read_table(tmp_path / "raw" / "train.parquet").to_pylist()
    assert [row["score"] for row in rows] == [float(r["helpfulness"]) for r in raw]
