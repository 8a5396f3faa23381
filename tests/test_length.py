"""Length-control constants, windows, bins and pooled scores (Ruler, docs/studies/ruler.md)."""

import dataclasses
import math

import pytest
import yaml

from reprolm.length import PAPER_TARGETS, TargetSet, Window, configured_targets, count_words
from reprolm.score import length
from workflow_helpers import REPO

PAPER = TargetSet(PAPER_TARGETS)


def test_word_count_is_regex_word_tokens():
    assert count_words("Hello, world!") == 2
    assert count_words("don't stop") == 3  # \w+ splits at the apostrophe
    assert count_words("snake_case x2 3.14") == 4
    assert count_words("  \n\t ") == 0
    assert count_words("— ... !!!") == 0


def test_paper_levels_and_windows():
    assert [t.name for t in PAPER] == ["10", "30", "50", "80", "150", "300", "500", "700", ">800"]
    assert [t.level for t in PAPER] == [0, 0, 0, 0, 1, 1, 1, 2, 2]
    pm = {t.name: (t.pm.lo, t.pm.hi) for t in PAPER}
    fm = {t.name: (t.fm.lo, t.fm.hi) for t in PAPER}
    assert pm == {
        "10": (0, 20),
        "30": (20, 40),
        "50": (40, 60),
        "80": (70, 90),
        "150": (130, 170),
        "300": (280, 320),
        "500": (450, 550),
        "700": (630, 770),
        ">800": (800, math.inf),
    }
    assert fm == {
        "10": (0, 20),
        "30": (20, 40),
        "50": (40, 60),
        "80": (60, 100),
        "150": (100, 200),
        "300": (200, 400),
        "500": (400, 600),
        "700": (600, 800),
        ">800": (800, math.inf),
    }


@pytest.mark.parametrize(
    ("window", "count", "inside"),
    [
        ((0, 20), 0, False),
        ((0, 20), 1, True),
        ((0, 20), 20, True),
        ((0, 20), 21, False),
        ((70, 90), 70, False),
        ((70, 90), 71, True),
        ((70, 90), 90, True),
        ((800, None), 800, False),
        ((800, None), 801, True),
        ((800, None), 10**6, True),
    ],
)
def test_windows_are_half_open(window, count, inside):
    assert Window.parse(window).contains(count) is inside


@pytest.mark.parametrize(
    ("words", "mlt"),
    [
        (5, None),
        (6, "[MLT:10]"),
        (15, "[MLT:10]"),
        (16, None),
        (25, None),
        (26, "[MLT:30]"),
        (35, "[MLT:30]"),
        (75, None),
        (80, "[MLT:80]"),
        (135, None),
        (136, "[MLT:150]"),
        (155, "[MLT:150]"),
        (156, None),
        (295, None),
        (305, "[MLT:300]"),
        (505, "[MLT:500]"),
        (700, "[MLT:700]"),
        (705, "[MLT:700]"),
        (800, None),
        (801, "[MLT:>800]"),
    ],
)
def test_training_bins(words, mlt):
    target = PAPER.bin_for(words)
    assert (target.mlt if target else None) == mlt


def test_mlt_strings_and_baseline_phrase():
    assert PAPER.mlt_tokens[0] == "[MLT:10]" and PAPER.mlt_tokens[-1] == "[MLT:>800]"
    assert PAPER[">800"].instruction() == "more than 800"
    assert PAPER["300"].instruction() == "300"
    assert PAPER[">800"].value is None and PAPER["700"].value == 700


def test_level_scores_pool_counts_not_percentages():
    # target 10: 3 of 4 inside; target 30: 0 of 1 inside. Pooled: 3/5 = 60%, mean would be 37.5%.
    words = [5, 10, 19, 25, 50]
    names = ["10", "10", "10", "10", "30"]
    counts = length.in_out_counts(words, names, PAPER)
    assert counts["10"] == {"PM_in": 3, "PM_out": 1, "FM_in": 3, "FM_out": 1}
    assert counts["30"] == {"PM_in": 0, "PM_out": 1, "FM_in": 0, "FM_out": 1}
    rows = {r["level"]: r for r in length.level_scores(counts, PAPER)}
    assert rows["Level:0"]["PM"] == pytest.approx(60.0)
    assert rows["All"]["PM_in"] == 3 and rows["All"]["PM_out"] == 2
    assert math.isnan(rows["Level:1"]["PM"])  # no outputs at level 1


def test_pm_and_fm_differ_where_windows_differ():
    # 95 words for target 80: outside PM (70, 90] but inside FM (60, 100].
    counts = length.in_out_counts([95], ["80"], PAPER)
    assert counts["80"] == {"PM_in": 0, "PM_out": 1, "FM_in": 1, "FM_out": 0}


def test_seed_table_reproduces_from_counts():
    """gpt-4-turbo All-Level row of the seed: PM 1227/773 -> 61.35, FM 1547/453 -> 77.35."""
    row = length._score_row("All", [{"PM_in": 1227, "PM_out": 773, "FM_in": 1547, "FM_out": 453}])
    assert round(row["PM"], 2) == 61.35 and round(row["FM"], 2) == 77.35


def test_multi_mlt_average_is_mean_of_targets():
    words = [10, 10, 30, 99]
    names = ["10", "10", "30", "30"]
    result = length.multi_mlt_scores(words, names, PAPER)
    assert result["per_target_FM"] == {"10": 100.0, "30": 50.0}
    assert result["avg_FM"] == pytest.approx(75.0)


def test_self_generated_scores_use_emitted_mlt_window():
    texts = ["[MLT:10]one two three", "[MLT:30]" + " w" * 5, "no mlt here", "x [MLT:10] late"]
    result = length.self_generated_scores(texts, PAPER)
    assert result["emitted"]["10"] == 1 and result["emitted"]["30"] == 1
    assert result["no_mlt"] == 2
    assert result["FM"] == pytest.approx(25.0)  # only the first is inside its own window
    assert result["avg_words"] == pytest.approx((3 + 5 + 3 + 2) / 4)


def test_length_errors_exclude_open_ended_target():
    result = length.length_errors([10, 33, 2000], ["10", "30", ">800"], PAPER)
    assert result["n"] == 2
    assert result["exact_match"] == pytest.approx(50.0)
    assert result["rmse"] == pytest.approx(math.sqrt((0 + 9) / 2))


def test_ttest_welch_by_default_student_for_original():
    ruler, vanilla = [10, 11, 12, 30], [50, 80, 20, 90]
    welch = length.length_ttest(ruler, vanilla)
    student = length.length_ttest(ruler, vanilla, compat="original")
    from scipy import stats

    assert welch["p"] == pytest.approx(stats.ttest_ind(ruler, vanilla, equal_var=False).pvalue)
    assert student["p"] == pytest.approx(stats.ttest_ind(ruler, vanilla).pvalue)
    assert welch["p"] != pytest.approx(student["p"])
    # The study's compat offers the registered tests.
    schema = yaml.safe_load((REPO / "src/reprolm/studies/ruler/schema.yaml").read_text())
    assert schema["properties"]["compat"]["enum"] == length.LENGTH_TTESTS.names()


def test_config_targets_and_unknown_name():
    targets = TargetSet.from_config([{"name": "5", "level": 0, "pm": [0, 8], "fm": [0, 10], "bin": [3, 7]}])
    assert targets["5"].fm.contains(10) and not targets["5"].pm.contains(10)
    with pytest.raises(KeyError, match="unknown length target '7'"):
        targets["7"]


def test_a_config_without_length_targets_has_none():
    assert configured_targets(None) is None
    assert configured_targets("paper").names == ["10", "30", "50", "80", "150", "300", "500", "700", ">800"]


# ---- the Ruler tables: every figure with its bootstrap over prompts ----


# Which of _ruler_scores' outputs ran to max_new_tokens, in row order: TLG's at 500, 700
# and >800 words; multi-MLT's 100-word answer of prompt 0; self-MLT's [MLT:30] answer.
TLG_AT_LIMIT = [False] * 9 + [True] * 3
MULTI_AT_LIMIT = [False, False, True] + [False] * 6
SELF_AT_LIMIT = [False, True, False, False]


def _ruler_scores(flagged: bool = True):
    """length_levels over 12 prompts (one target each), multi-MLT over 3 prompts asked at three
    targets, self-MLT over 4 prompts, as the metrics write them. ``flagged``: the generation
    rows say which outputs ran to max_new_tokens; else they are a generation file's written
    before they did."""
    from reprolm.aggregate.tables import Score
    from reprolm.score.metrics import compute

    context = {"length_targets": "paper"}

    def generated(rows: list[dict], at_limit: list[bool]) -> list[dict]:
        if not flagged:
            return rows
        return [{**row, "hit_max_new_tokens": hit} for row, hit in zip(rows, at_limit, strict=True)]

    tlg = [
        {"id": i, "TargetLength": name, "text": " w" * words}
        for i, (name, words) in enumerate(
            [
                ("10", 5),
                ("10", 25),
                ("30", 30),
                ("30", 39),
                ("50", 45),
                ("80", 95),
                ("80", 80),
                ("150", 160),
                ("300", 250),
                ("500", 500),
                ("700", 700),
                (">800", 900),
            ]
        )
    ]
    multi = [
        {"id": prompt, "TargetLength": name, "text": " w" * words}
        for prompt, lengths in enumerate([(9, 30, 100), (12, 50, 45), (30, 25, 48)])
        for name, words in zip(["10", "30", "50"], lengths, strict=True)
    ]
    self_mlt = [
        {"id": i, "text": text}
        for i, text in enumerate(
            ["[MLT:10]" + " w" * 8, "[MLT:30]" + " w" * 50, "no MLT" + " w" * 3, "[MLT:50]" + " w" * 55]
        )
    ]
    return [
        Score("length_levels", "b", "r", "tlg", compute("length_levels", generated(tlg, TLG_AT_LIMIT), context)),
        Score(
            "length_multi_mlt",
            "b",
            "r",
            "multi_mlt",
            compute("length_multi_mlt", generated(multi, MULTI_AT_LIMIT), context),
        ),
        Score(
            "length_self_mlt",
            "b",
            "r",
            "self_mlt",
            compute("length_self_mlt", generated(self_mlt, SELF_AT_LIMIT), context),
        ),
    ]


def test_level_and_target_figures_are_the_pooled_ones_with_a_bootstrap_over_prompts():
    import numpy as np

    from reprolm.aggregate.uncertainty import ratio_of_sums, unit_draws
    from reprolm.studies.ruler import tables

    scores = _ruler_scores()
    levels = tables.tlg_levels(scores, PAPER).set_index("level")
    reported = {row["level"]: row for row in scores[0].data["levels"]}
    for label, row in levels.iterrows():
        assert row["PM"].value == reported[label]["PM"] and row["FM"].value == reported[label]["FM"]
        assert row["PM_in"] == reported[label]["PM_in"]
    # Level 0: targets 10, 30, 50, 80 (prompts 0-6); PM inside: 5, 30, 39, 45, 80 words -> 5 of 7.
    level0 = levels.loc["Level:0", "PM"]
    assert level0.value == pytest.approx(100 * 5 / 7)
    inside = [1, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0]
    counted = [1] * 7 + [0] * 5
    assert np.array_equal(level0.replicates, ratio_of_sums(inside, counted, range(12), 100.0).replicates)
    # ... which is, per draw of the 12 prompts, the drawn level-0 prompts' share inside.
    row = unit_draws(range(12))[0]
    assert level0.replicates[0] == pytest.approx(100 * sum(inside[i] for i in row) / sum(counted[i] for i in row))
    assert level0.low <= level0.value <= level0.high
    per_target = tables.tlg_targets(scores, PAPER).set_index("target")
    # Target 80: 95 and 80 words, both in the FM window (60, 100], only 80 in PM's (70, 90].
    assert per_target.loc["80", "FM"].value == 100.0 and per_target.loc["80", "PM"].value == 50.0
    assert per_target.loc[">800", "FM"].value == 100.0


def test_each_length_table_says_which_definition_made_its_rows():
    """A row's definition: the chat template its recipe trained with (a replicate's and an
    extrapolation's are their recipe's; a baseline's its own) and, for TLG prompts, how
    they were picked."""
    import dataclasses

    from reprolm.studies.ruler import tables

    definitions = tables.Definitions(
        {"chat_templates": {"r": "ruler_custom", "vanilla": "own"}, "single_turn": {"tlg": "human_then_gpt"}}
    )
    scores = _ruler_scores()
    replicate = [dataclasses.replace(s, recipe="r-seed3+expo0.3") for s in scores]
    for batch in (scores, replicate):
        levels = tables.tlg_levels(batch, PAPER, definitions)
        assert set(levels["definition"]) == {"template=ruler_custom, single_turn=human_then_gpt"}
        assert set(tables.tlg_targets(batch, PAPER, definitions)["definition"]) == set(levels["definition"])
        assert tables.length_error_table(batch, PAPER, definitions)["definition"].tolist() == list(
            set(levels["definition"])
        )
        assert tables.multi_mlt_table(batch, PAPER, definitions)["definition"].tolist() == ["template=ruler_custom"]
        assert tables.self_mlt_table(batch, PAPER, definitions)["definition"].tolist() == ["template=ruler_custom"]
    baseline = dataclasses.replace(scores[1], recipe="pretrained")
    assert tables.multi_mlt_table([baseline], PAPER, definitions)["definition"].tolist() == ["template=own"]
    vanilla = dataclasses.replace(scores[0], recipe="vanilla")
    ttest = tables.ttest_table([scores[0], vanilla], "r", "vanilla", "paper", definitions)
    assert ttest["definition"].tolist() == [
        "r: template=ruler_custom, single_turn=human_then_gpt; vanilla: template=own, single_turn=human_then_gpt"
    ]


def test_rows_of_a_prompt_set_with_the_originals_doubled_bos_are_marked_beside_the_default():
    """A baseline asked the TLG set twice, with one BOS (`tlg`) and with the original's
    doubled BOS (`tlg_doubled_bos`, prompt_bos: tokenizer): one row each, the second marked."""
    import dataclasses

    from reprolm.studies.ruler import tables

    definitions = tables.Definitions({"prompt_bos": {"tlg": "one", "tlg_doubled_bos": "tokenizer"}})
    one = dataclasses.replace(_ruler_scores()[0], recipe="pretrained")
    doubled = dataclasses.replace(one, name="tlg_doubled_bos")
    levels = tables.tlg_levels([one, doubled], PAPER, definitions)
    assert levels[levels["level"] == "All"]["model"].tolist() == ["b/pretrained", "b/pretrained [prompt_bos=tokenizer]"]
    assert tables.length_error_table([one, doubled], PAPER, definitions)["model"].tolist() == [
        "b/pretrained",
        "b/pretrained [prompt_bos=tokenizer]",
    ]
    assert set(tables.tlg_targets([doubled], PAPER, definitions)["model"]) == {"b/pretrained [prompt_bos=tokenizer]"}


def test_tlg_only_baselines_get_the_tlg_evaluations_alone():
    from reprolm.studies.ruler import Ruler

    config = {
        "ruler": {
            "bases": ["b"],
            "recipes": ["r"],
            "baselines": ["chat", "big_chat"],
            "tlg_only": ["big_chat"],
            "evaluations": [
                {"promptset": "tlg", "metric": "length_levels"},
                {"promptset": "tlg_doubled_bos", "metric": "length_levels", "recipes": ["pretrained"]},
                {"promptset": "multi_mlt", "metric": "length_multi_mlt"},
            ],
            "lm_eval_suite": "general",
        },
        "base_models": {name: {"hub": {"path": f"org/{name}"}} for name in ("b", "chat", "big_chat")},
    }
    paths = Ruler().score_paths(config)
    big = sorted(path for path in paths if "/big_chat/" in path)
    assert big == [
        "results/scores/length_levels/big_chat/pretrained/tlg.json",
        "results/scores/length_levels/big_chat/pretrained/tlg_doubled_bos.json",
    ]
    assert "results/scores/length_multi_mlt/chat/pretrained/multi_mlt.json" in paths
    assert "results/scores/lm_eval/chat/pretrained/general.json" in paths
    assert "results/scores/length_levels/b/r/tlg_doubled_bos.json" not in paths


def test_length_errors_rmse_is_the_root_of_the_pooled_squared_error_per_draw():
    import numpy as np

    from reprolm.aggregate.uncertainty import unit_draws
    from reprolm.studies.ruler import tables

    scores = _ruler_scores()
    data = scores[0].data
    row = tables.length_error_table(scores, PAPER).iloc[0]
    assert row["exact_match"].value == data["errors"]["exact_match"] == 100 * 4 / 11
    assert row["rmse"].value == data["errors"]["rmse"] and row["n"] == 11
    errors = [
        (words - PAPER[name].value) ** 2 if PAPER[name].value is not None else None
        for words, name in zip(data["word_counts"], data["target_names"], strict=True)
    ]
    draws = unit_draws(data["ids"])
    by_hand = [math.sqrt(np.mean([errors[i] for i in draw if errors[i] is not None])) for draw in draws[:10]]
    assert row["rmse"].replicates[:10] == pytest.approx(by_hand)


def test_multi_mlt_draws_a_prompts_outputs_at_every_target_together():
    import numpy as np

    from reprolm.aggregate.uncertainty import unit_draws
    from reprolm.studies.ruler import tables

    scores = _ruler_scores()
    row = tables.multi_mlt_table(scores, PAPER).iloc[0]
    # FM inside, prompts 0-2: target 10: 9, 12 in, 30 out; target 30: 30 in, 50 out, 25 in;
    # target 50: 100 out, 45 and 48 in.
    assert [row[name].value for name in ("10", "30", "50")] == [100 * 2 / 3] * 3
    assert row["80"] is None
    assert row["Avg FM"].value == scores[1].data["avg_FM"]
    draws = unit_draws([0, 1, 2])
    inside = {"10": [1, 1, 0], "30": [1, 0, 1], "50": [0, 1, 1]}
    for name, hits in inside.items():
        assert np.allclose(row[name].replicates, [100 * np.mean([hits[p] for p in draw]) for draw in draws])
    assert np.allclose(row["Avg FM"].replicates, np.mean([row[name].replicates for name in ("10", "30", "50")], axis=0))
    assert row["Avg FM"].low <= row["Avg FM"].value <= row["Avg FM"].high


def test_self_mlt_keeps_counts_and_resamples_fm_and_mean_words(tmp_path):
    import pandas as pd

    from reprolm.io import write_table
    from reprolm.studies.ruler import tables

    scores = _ruler_scores()
    assert scores[2].data["mlt_names"] == ["10", "30", None, "50"]
    assert scores[2].data["word_counts"] == [8, 50, 5, 55] and scores[2].data["ids"] == [0, 1, 2, 3]
    frame = tables.self_mlt_table(scores, PAPER)
    row = frame.iloc[0]
    # Inside its own window: 8 (MLT 10) and 55 (MLT 50); 50 is outside MLT 30's (20, 40].
    assert row["FM"].value == scores[2].data["FM"] == 50.0
    assert row["Avg"].value == scores[2].data["avg_words"] == (8 + 50 + 5 + 55) / 4
    assert row["no MLT"] == 1 and row["10"] == 1
    write_table(frame, tmp_path, "self_mlt")
    written = pd.read_csv(tmp_path / "self_mlt.csv")
    assert list(written.columns) == [
        "model",
        *PAPER.names,
        "no MLT",
        *["FM", "FM lo", "FM hi", "Avg", "Avg lo", "Avg hi"],
        *["at max_new_tokens", "at max_new_tokens lo", "at max_new_tokens hi"],
        "definition",
    ]
    assert written["definition"].tolist() == ["template=own"]
    assert written["10"].dtype == "int64"
    assert (written["FM lo"] <= written["FM"]).all() and (written["FM"] <= written["FM hi"]).all()


def test_the_length_tables_give_the_share_of_outputs_at_max_new_tokens_by_prompt():
    """Each length table's ``at max_new_tokens``: the percentage of its row's outputs whose
    generation record says they ran to the limit, with the bootstrap over prompts (a
    multi-MLT prompt's outputs at every target drawn together)."""
    import numpy as np

    from reprolm.aggregate.uncertainty import ratio_of_sums
    from reprolm.studies.ruler import tables

    scores = _ruler_scores()
    assert scores[0].data["hit_max_new_tokens"] == TLG_AT_LIMIT
    levels = tables.tlg_levels(scores, PAPER).set_index("level")["at max_new_tokens"]
    # Level 0: targets 10-80 (none ran on); level 1: 150, 300, 500 (the 500); level 2: 700, >800.
    assert [levels[label].value for label in ("Level:0", "Level:1", "Level:2", "All")] == pytest.approx(
        [0.0, 100 / 3, 100.0, 25.0]
    )
    level1 = [PAPER[name].level == 1 for name in scores[0].data["target_names"]]
    assert np.array_equal(
        levels["Level:1"].replicates,
        ratio_of_sums(np.logical_and(TLG_AT_LIMIT, level1), level1, range(12), 100.0).replicates,
        equal_nan=True,  # draws without a level-1 prompt
    )
    errors = tables.length_error_table(scores, PAPER).iloc[0]["at max_new_tokens"]
    assert errors.value == 25.0 and np.array_equal(errors.replicates, levels["All"].replicates)
    assert errors.low < 25.0 < errors.high
    multi = tables.multi_mlt_table(scores, PAPER).iloc[0]["at max_new_tokens"]
    assert multi.value == pytest.approx(100 / 9)
    # Prompts, not outputs, are drawn: prompt 0's three outputs hold the one at the limit.
    per_prompt = [1, 0, 0]
    assert np.array_equal(multi.replicates, ratio_of_sums(per_prompt, [3, 3, 3], range(3), 100.0).replicates)
    chosen = tables.self_mlt_table(scores, PAPER).iloc[0]["at max_new_tokens"]
    assert chosen.value == 25.0 and chosen.units == 4


def test_generations_written_before_the_flag_leave_the_share_empty_never_zero(tmp_path):
    """Score files of generations without ``hit_max_new_tokens`` (and score files written
    before the metrics kept it): the share is unknown, an empty cell with no interval; the
    tables are otherwise those of flagged generations."""
    import pandas as pd

    from reprolm.studies.ruler import tables

    unflagged = _ruler_scores(flagged=False)
    assert unflagged[0].data["hit_max_new_tokens"] == [None] * 12
    older = [
        dataclasses.replace(s, data={k: v for k, v in s.data.items() if k != "hit_max_new_tokens"}) for s in unflagged
    ]
    share = ["at max_new_tokens", "at max_new_tokens lo", "at max_new_tokens hi"]
    written = {}
    for label, batch in {"flagged": _ruler_scores(), "unflagged": unflagged, "older": older}.items():
        tables.write_ruler_tables(
            batch, {"recipes": ["r"]}, {"length_targets": "paper"}, tmp_path / label, tmp_path / "plots"
        )
        written[label] = {
            name: pd.read_csv(tmp_path / label / f"{name}.csv", dtype=str, keep_default_na=False)
            for name in ("tlg_levels", "length_errors", "multi_mlt", "self_mlt")
        }
    for name, flagged in written["flagged"].items():
        # (A level's interval is left out where too few draws hold its prompts, as PM's and FM's.)
        assert (flagged["at max_new_tokens"] != "").all(), name
        for label in ("unflagged", "older"):
            cells = written[label][name]
            assert (cells[share] == "").all().all(), (label, name)
            pd.testing.assert_frame_equal(cells.drop(columns=share), flagged.drop(columns=share))


def test_ruler_tables_refuse_a_score_the_configured_targets_do_not_reproduce():
    from dataclasses import replace

    from reprolm.length import Window
    from reprolm.studies.ruler import tables

    narrower = TargetSet([replace(t, fm=Window(60, 90)) if t.name == "80" else t for t in PAPER])
    with pytest.raises(ValueError, match="length_levels score of b/r on tlg: FM of 80 is 100.0 in the score file"):
        tables.tlg_targets(_ruler_scores(), narrower)


def test_ruler_tables_and_plot_carry_the_intervals(tmp_path):
    import numpy as np
    import pandas as pd

    from reprolm.io import split_estimates
    from reprolm.studies.ruler import tables

    tables.write_ruler_tables(
        _ruler_scores(), {"recipes": ["r"]}, {"length_targets": "paper"}, tmp_path / "tables", tmp_path / "plots"
    )
    levels = pd.read_csv(tmp_path / "tables" / "tlg_levels.csv")
    assert list(levels.columns) == [
        "model",
        "level",
        "PM_in",
        "PM_out",
        "PM",
        "PM lo",
        "PM hi",
        "FM_in",
        "FM_out",
        "FM",
        "FM lo",
        "FM hi",
        "at max_new_tokens",
        "at max_new_tokens lo",
        "at max_new_tokens hi",
        "definition",
    ]
    assert levels["PM_in"].dtype == "int64"
    errors = pd.read_csv(tmp_path / "tables" / "length_errors.csv")
    assert list(errors.columns) == [
        "model",
        "exact_match",
        "exact_match lo",
        "exact_match hi",
        "rmse",
        "rmse lo",
        "rmse hi",
        "n",
        "at max_new_tokens",
        "at max_new_tokens lo",
        "at max_new_tokens hi",
        "definition",
    ]
    replicates = pd.read_parquet(tmp_path / "tables" / "tlg_levels.replicates.parquet")
    assert set(replicates["column"]) == {"PM", "FM", "at max_new_tokens"}
    assert (tmp_path / "plots" / "tlg_targets.png").stat().st_size > 0
    per_target = tables.tlg_targets(_ruler_scores(), PAPER)
    spread = split_estimates(per_target)[0]
    bars = tables._error_bars(spread, "FM")
    assert bars.shape == (2, 9)
    # A bar's interval where the draws define it; none (zero length) where too few draws hold
    # one of the target's outputs.
    for row, estimate in enumerate(per_target["FM"]):
        expected = (
            [0.0, 0.0] if np.isnan(estimate.low) else [estimate.value - estimate.low, estimate.high - estimate.value]
        )
        assert bars[:, row] == pytest.approx(expected)
    # Two of twelve prompts per target at most: a draw misses a target's prompts too often
    # (11% of draws for two) for any per-target interval; the pooled "All" level has one.
    assert all(np.isnan(estimate.low) for estimate in per_target["FM"])
    assert levels.loc[levels["level"] == "All", "FM lo"].notna().all()
    assert np.all(bars >= 0)


def test_general_table_reports_the_metrics_ruler_names_each_in_its_own_column(tmp_path):
    """One lm-eval run logs every metric of a task: the table reads the original's (``acc``
    for HellaSwag, both GSM8K filters) where the suite reports another, and names the
    metric in each column."""
    import gzip
    import json

    from reprolm.aggregate.tables import load_scores
    from reprolm.io import write_json
    from reprolm.paths import score_path
    from reprolm.studies.ruler import tables

    acc, acc_norm = [1, 0, 0, 1], [1, 1, 1, 0]
    strict, flexible = [0.0, 0.0, 1.0], [1.0, 0.0, 1.0]
    records = [
        {"spec": "hellaswag", "task": "hellaswag", "doc_id": i, "filter": "none", "values": {"acc": a, "acc_norm": n}}
        for i, (a, n) in enumerate(zip(acc, acc_norm, strict=True))
    ]
    records += [
        {"spec": "gsm8k", "task": "gsm8k", "doc_id": i, "filter": name, "values": {"exact_match": v}}
        for name, values in {"strict-match": strict, "flexible-extract": flexible}.items()
        for i, v in enumerate(values)
    ]
    data = {
        "metric": "lm_eval",
        "task_order": ["hellaswag", "gsm8k"],
        "tasks": {
            "hellaswag": {
                "metric": "acc_norm,none",
                "value": 0.75,
                "metrics": {"acc,none": 0.5, "acc_norm,none": 0.75},
                "n_docs": 4,
            },
            "gsm8k": {
                "metric": "exact_match,flexible-extract",
                "value": 2 / 3,
                "metrics": {"exact_match,strict-match": 1 / 3, "exact_match,flexible-extract": 2 / 3},
                "n_docs": 3,
            },
        },
    }
    path = tmp_path / score_path("lm_eval", "b", "ruler", "general")
    write_json(data, path)
    with gzip.open(path.with_name("general.samples.jsonl.gz"), "wt") as stream:
        stream.writelines(json.dumps(record) + "\n" for record in records)
    scores = load_scores([path])
    suite = tables.general_table(scores)
    assert list(suite.columns) == ["model", "hellaswag (acc_norm)", "gsm8k (exact_match,flexible-extract)"]
    assert suite.iloc[0]["hellaswag (acc_norm)"].value == 75.0
    original = tables.general_table(
        scores, {"hellaswag": ["acc,none"], "gsm8k": ["exact_match,strict-match", "exact_match,flexible-extract"]}
    )
    assert list(original.columns) == [
        "model",
        "hellaswag (acc)",
        "gsm8k (exact_match,strict-match)",
        "gsm8k (exact_match,flexible-extract)",
    ]
    row = original.iloc[0]
    assert row["hellaswag (acc)"].value == 50.0
    assert row["gsm8k (exact_match,strict-match)"].value == pytest.approx(100 / 3)
    assert row["gsm8k (exact_match,flexible-extract)"].value == pytest.approx(200 / 3)
    assert row["hellaswag (acc)"].low <= 50.0 <= row["hellaswag (acc)"].high
