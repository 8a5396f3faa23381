"""Length-control scoring (Ruler): word counts, target windows, PM/FM, MLT bins.

Windows are half-open ``(lo, hi]``: a count ``c`` is inside when ``lo < c <= hi``.
Level and "All" scores pool the in/out counts across targets; they are not means of
per-target percentages.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

WORD_PATTERN = re.compile(r"\w+")
MLT_PATTERN = re.compile(r"\[MLT:([^\]]+)\]")


def count_words(text: str) -> int:
    """Number of ``\\w+`` tokens, the study's word count."""
    return len(WORD_PATTERN.findall(text))


@dataclass(frozen=True)
class Window:
    lo: float
    hi: float  # math.inf for open-ended targets

    def contains(self, count: float) -> bool:
        return self.lo < count <= self.hi

    @classmethod
    def parse(cls, pair: Sequence) -> "Window":
        lo, hi = pair
        return cls(float(lo), math.inf if hi is None else float(hi))


@dataclass(frozen=True)
class LengthTarget:
    """One target length: its level, evaluation windows and training bin."""

    name: str  # "10", ">800"
    level: int
    pm: Window
    fm: Window
    bin: Window

    @property
    def mlt(self) -> str:
        return f"[MLT:{self.name}]"

    @property
    def value(self) -> int | None:
        """The numeric target, or None for open-ended targets like ">800"."""
        return None if self.name.startswith(">") else int(self.name)

    def instruction(self) -> str:
        """The word-count phrase of the baseline prompt (">" written "more than ")."""
        return self.name.replace(">", "more than ")


def _target(name, level, pm, fm, bin_):
    return LengthTarget(name, level, Window.parse(pm), Window.parse(fm), Window.parse(bin_))


PAPER_TARGETS: tuple[LengthTarget, ...] = (
    _target("10", 0, (0, 20), (0, 20), (5, 15)),
    _target("30", 0, (20, 40), (20, 40), (25, 35)),
    _target("50", 0, (40, 60), (40, 60), (45, 55)),
    _target("80", 0, (70, 90), (60, 100), (75, 85)),
    _target("150", 1, (130, 170), (100, 200), (135, 155)),
    _target("300", 1, (280, 320), (200, 400), (295, 305)),
    _target("500", 1, (450, 550), (400, 600), (495, 505)),
    _target("700", 2, (630, 770), (600, 800), (695, 705)),
    _target(">800", 2, (800, None), (800, None), (800, None)),
)


class TargetSet:
    """An ordered set of length targets, as configured (``paper`` or an explicit list)."""

    def __init__(self, targets: Iterable[LengthTarget]):
        self.targets = tuple(targets)
        self.by_name = {t.name: t for t in self.targets}
        if len(self.by_name) != len(self.targets):
            raise ValueError("length targets must have unique names")

    @classmethod
    def from_config(cls, spec) -> "TargetSet":
        if spec == "paper":
            return cls(PAPER_TARGETS)
        return cls(
            _target(str(t["name"]), int(t["level"]), t["pm"], t["fm"], t["bin"]) for t in spec
        )

    def __iter__(self):
        return iter(self.targets)

    def __getitem__(self, name: str) -> LengthTarget:
        try:
            return self.by_name[str(name)]
        except KeyError:
            raise KeyError(
                f"unknown length target {name!r}; configured: {list(self.by_name)}"
            ) from None

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.targets]

    @property
    def mlt_tokens(self) -> list[str]:
        return [t.mlt for t in self.targets]

    @property
    def levels(self) -> list[int]:
        return sorted({t.level for t in self.targets})

    def bin_for(self, word_count: int) -> LengthTarget | None:
        """The training bin a response of this length falls in (None: dropped)."""
        found = None
        for target in self.targets:
            if target.bin.contains(word_count):
                found = target
        return found

    def by_mlt(self, token: str) -> LengthTarget | None:
        match = MLT_PATTERN.fullmatch(token)
        return self.by_name.get(match.group(1)) if match else None


def strip_mlt(text: str) -> str:
    return MLT_PATTERN.sub("", text)


def leading_mlt(text: str) -> str | None:
    """The MLT a self-generating model emitted first, or None."""
    match = MLT_PATTERN.search(text)
    if match is None or text[: match.start()].strip():
        return None
    return match.group(1)


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
        _score_row(f"Level:{level}", (counts[t.name] for t in targets if t.level == level))
        for level in targets.levels
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


def multi_mlt_scores(
    word_counts: Sequence[int], target_names: Sequence[str], targets: TargetSet
) -> dict:
    """Per-target FM and their plain mean ("Avg FM" of the multi-MLT table)."""
    counts = in_out_counts(word_counts, target_names, targets)
    per_target = {
        name: _percent(c["FM_in"], c["FM_out"])
        for name, c in counts.items()
        if c["FM_in"] + c["FM_out"]
    }
    return {"per_target_FM": per_target, "avg_FM": sum(per_target.values()) / len(per_target)}


def self_generated_scores(texts: Sequence[str], targets: TargetSet) -> dict:
    """Counts per emitted MLT, FM against each output's own MLT window, mean words.

    An output that starts with no known MLT counts as outside its window.
    """
    emitted = {t.name: 0 for t in targets}
    inside = 0
    words = []
    for text in texts:
        name = leading_mlt(text)
        n = count_words(strip_mlt(text))
        words.append(n)
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
    }


def length_errors(
    word_counts: Sequence[int], target_names: Sequence[str], targets: TargetSet
) -> dict:
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


def length_ttest(
    ruler_lengths: Sequence[int], vanilla_lengths: Sequence[int], compat: str = "paper"
) -> dict:
    """t-test of output lengths, Ruler vs vanilla on the same prompts.

    ``paper``: Welch's test (unequal variances). ``original``: Student's test, as the
    original code calls ``scipy.stats.ttest_ind`` with its defaults.
    """
    result = stats.ttest_ind(ruler_lengths, vanilla_lengths, equal_var=(compat == "original"))
    return {"t": float(result.statistic), "p": float(result.pvalue), "compat": compat}
