"""Length-control scoring (Ruler): PM/FM per target and level, exact-length rate, RMSE,
multi-MLT and self-generated MLT scores, and the t-test of lengths.

Level and "All" scores pool the in/out counts across targets; they are not means of
per-target percentages.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from reprolm.length import TargetSet, count_words, leading_mlt, strip_mlt
from reprolm.registry import Registry


def in_out_counts(
    word_counts: Sequence[int], target_names: Sequence[str], targets: TargetSet
) -> dict[str, dict[str, int]]:
    """Per target: how many outputs fall inside/outside its PM and FM windows."""
    counts = {t.name: {"PM_in": 0, "PM_out": 0, "FM_in": 0, "FM_out": 0} for t in targets}
    for words, name in zip(word_counts, target_names, strict=True):
        target = targets[name]
        row = counts[target.name]
        row["PM_in" if target.pm.contains(words) else "PM_out"] += 1
        row["FM_in" if target.fm.contains(words) else "FM_out"] += 1
    return counts


def _percent(inside: int, outside: int) -> float:
    total = inside + outside
    return 100.0 * inside / total if total else float("nan")


def _score_row(label: str, rows: Iterable[Mapping[str, int]]) -> dict:
    pooled = {"PM_in": 0, "PM_out": 0, "FM_in": 0, "FM_out": 0}
    for row in rows:
        for key in pooled:
            pooled[key] += row[key]
    return {
        "level": label,
        "PM_in": pooled["PM_in"],
        "PM_out": pooled["PM_out"],
        "PM": _percent(pooled["PM_in"], pooled["PM_out"]),
        "FM_in": pooled["FM_in"],
        "FM_out": pooled["FM_out"],
        "FM": _percent(pooled["FM_in"], pooled["FM_out"]),
    }


def level_scores(counts: Mapping[str, Mapping[str, int]], targets: TargetSet) -> list[dict]:
    """Rows ``Level:0`` .. and ``All``: counts pooled over the level's targets."""
    rows = [
        _score_row(f"Level:{level}", (counts[t.name] for t in targets if t.level == level)) for level in targets.levels
    ]
    rows.append(_score_row("All", counts.values()))
    return rows


def target_scores(counts: Mapping[str, Mapping[str, int]], targets: TargetSet) -> list[dict]:
    """One row per target, in configured order (the seed's per-MLT tables)."""
    rows = []
    for t in targets:
        row = _score_row(t.name, [counts[t.name]])
        row["target"] = row.pop("level")
        row["level"] = t.level
        rows.append(row)
    return rows


def multi_mlt_scores(word_counts: Sequence[int], target_names: Sequence[str], targets: TargetSet) -> dict:
    """Per-target FM and their plain mean ("Avg FM" of the multi-MLT table)."""
    counts = in_out_counts(word_counts, target_names, targets)
    per_target = {name: _percent(c["FM_in"], c["FM_out"]) for name, c in counts.items() if c["FM_in"] + c["FM_out"]}
    return {"per_target_FM": per_target, "avg_FM": sum(per_target.values()) / len(per_target)}


def self_generated_scores(texts: Sequence[str], targets: TargetSet) -> dict:
    """Counts per emitted MLT, FM against each output's own MLT window, mean words; and per
    output its word count and leading MLT (None where it starts with none), which the
    tables resample.

    An output that starts with no known MLT counts as outside its window.
    """
    emitted = {t.name: 0 for t in targets}
    inside = 0
    words, leading = [], []
    for text in texts:
        name = leading_mlt(text)
        n = count_words(strip_mlt(text))
        words.append(n)
        leading.append(name)
        if name in emitted:
            emitted[name] += 1
            inside += targets[name].fm.contains(n)
    no_mlt = len(texts) - sum(emitted.values())
    return {
        "emitted": emitted,
        "no_mlt": no_mlt,
        "FM": 100.0 * inside / len(texts),
        "avg_words": sum(words) / len(words),
        "n": len(texts),
        "word_counts": words,
        "mlt_names": leading,
    }


def self_mlt_inside(word_counts: Sequence[int], mlt_names: Sequence[str | None], targets: TargetSet) -> list[bool]:
    """Per output: whether its word count is in the FM window of the MLT it emitted (False
    for an output with no known MLT)."""
    known = set(targets.names)
    return [
        name in known and targets[name].fm.contains(words) for words, name in zip(word_counts, mlt_names, strict=True)
    ]


def length_errors(word_counts: Sequence[int], target_names: Sequence[str], targets: TargetSet) -> dict:
    """Exact-length rate (%) and RMSE of the length, over targets with a numeric value."""
    pairs = [
        (n, targets[name].value)
        for n, name in zip(word_counts, target_names, strict=True)
        if targets[name].value is not None
    ]
    if not pairs:
        return {"exact_match": float("nan"), "rmse": float("nan"), "n": 0}
    exact = sum(n == v for n, v in pairs)
    rmse = math.sqrt(sum((n - v) ** 2 for n, v in pairs) / len(pairs))
    return {"exact_match": 100.0 * exact / len(pairs), "rmse": rmse, "n": len(pairs)}


@dataclass(frozen=True)
class LengthTTest:
    """A ``compat`` of the t-test of output lengths."""

    name: str
    # Student's test (one pooled variance); else Welch's (unequal variances).
    equal_var: bool


# paper: Welch's test; original: Student's, as the original code calls scipy.stats.ttest_ind
# with its defaults.
LENGTH_TTESTS: Registry[LengthTTest] = Registry("length t-test")
LENGTH_TTESTS.register("paper", LengthTTest("paper", equal_var=False))
LENGTH_TTESTS.register("original", LengthTTest("original", equal_var=True))


def length_ttest(lengths: Sequence[int], baseline_lengths: Sequence[int], compat: str = "paper") -> dict:
    """t-test of output lengths, a model's against a baseline's on the same prompts (Ruler's
    against vanilla), by the registered
    test ``compat`` names (:data:`LENGTH_TTESTS`)."""
    from scipy import stats

    test = LENGTH_TTESTS.get(compat, "length t-test compat")
    result = stats.ttest_ind(lengths, baseline_lengths, equal_var=test.equal_var)
    return {"t": float(result.statistic), "p": float(result.pvalue), "compat": compat}
