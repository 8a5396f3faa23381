"""Length-control constants, windows, bins and pooled scores (Ruler, STUDIES.md section 1)."""

import math

import pytest

from reprolm.score import length
from reprolm.length import PAPER_TARGETS, TargetSet, Window, configured_targets, count_words

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
    assert pm == {"10": (0, 20), "30": (20, 40), "50": (40, 60), "80": (70, 90), "150": (130, 170),
                  "300": (280, 320), "500": (450, 550), "700": (630, 770), ">800": (800, math.inf)}
    assert fm == {"10": (0, 20), "30": (20, 40), "50": (40, 60), "80": (60, 100), "150": (100, 200),
                  "300": (200, 400), "500": (400, 600), "700": (600, 800), ">800": (800, math.inf)}


@pytest.mark.parametrize(
    ("window", "count", "inside"),
    [((0, 20), 0, False), ((0, 20), 1, True), ((0, 20), 20, True), ((0, 20), 21, False),
     ((70, 90), 70, False), ((70, 90), 71, True), ((70, 90), 90, True),
     ((800, None), 800, False), ((800, None), 801, True), ((800, None), 10**6, True)],
)
def test_windows_are_half_open(window, count, inside):
    assert Window.parse(window).contains(count) is inside


@pytest.mark.parametrize(
    ("words", "mlt"),
    [(5, None), (6, "[MLT:10]"), (15, "[MLT:10]"), (16, None), (25, None), (26, "[MLT:30]"),
     (35, "[MLT:30]"), (75, None), (80, "[MLT:80]"), (135, None), (136, "[MLT:150]"), (155, "[MLT:150]"),
     (156, None), (295, None), (305, "[MLT:300]"), (505, "[MLT:500]"), (700, "[MLT:700]"),
     (705, "[MLT:700]"), (800, None), (801, "[MLT:>800]")],
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


def test_config_targets_and_unknown_name():
    targets = TargetSet.from_config([{"name": "5", "level": 0, "pm": [0, 8], "fm": [0, 10], "bin": [3, 7]}])
    assert targets["5"].fm.contains(10) and not targets["5"].pm.contains(10)
    with pytest.raises(KeyError, match="unknown length target '7'"):
        targets["7"]


def test_a_config_without_length_targets_has_none():
    assert configured_targets(None) is None
    assert configured_targets("paper").names == ["10", "30", "50", "80", "150", "300", "500", "700", ">800"]
