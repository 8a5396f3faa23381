"""Length targets (Ruler): the word count, target windows, training bins and Meta Length
Tokens. Data builders, generation and scoring all use these; scoring is in
:mod:`reprolm.score.length`.

Windows are half-open ``(lo, hi]``: a count ``c`` is inside when ``lo < c <= hi``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

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
    def parse(cls, pair: Sequence, where: str = "window") -> Window:
        lo, hi = pair
        window = cls(float(lo), math.inf if hi is None else float(hi))
        # An inverted window contains nothing: every PM/FM computed with it would be wrong.
        if window.hi <= window.lo:
            raise ValueError(f"{where}: window [{lo}, {hi}] is empty; the lower bound must be below the upper")
        return window


@dataclass(frozen=True)
class LengthTarget:
    """One target length: its level, evaluation windows and training bin (None: a field the
    reader did not declare, :func:`reads_length_targets`)."""

    name: str  # "10", ">800"
    level: int | None
    pm: Window | None
    fm: Window | None
    bin: Window | None

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


def _target(name, level, pm, fm, bin_, where: str = "length target"):
    return LengthTarget(
        name,
        None if level is None else int(level),
        None if pm is None else Window.parse(pm, f"{where}.pm"),
        None if fm is None else Window.parse(fm, f"{where}.fm"),
        None if bin_ is None else Window.parse(bin_, f"{where}.bin"),
    )


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
    def from_config(cls, spec) -> TargetSet:
        if spec == "paper":
            return cls(PAPER_TARGETS)
        return cls(
            _target(str(t["name"]), t.get("level"), t.get("pm"), t.get("fm"), t.get("bin"), f"length_targets[{index}]")
            for index, t in enumerate(spec)
        )

    def __iter__(self):
        return iter(self.targets)

    def __getitem__(self, name: str) -> LengthTarget:
        try:
            return self.by_name[str(name)]
        except KeyError:
            raise KeyError(f"unknown length target {name!r}; configured: {list(self.by_name)}") from None

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


def configured_targets(spec) -> TargetSet | None:
    """The config's ``length_targets``, or None where it has none: the config check has
    refused any builder, prompt kind or metric of such a config that reads them."""
    return None if spec is None else TargetSet.from_config(spec)


# The fields of a configured length target; every reader reads the names (and their order).
TARGET_FIELDS = ("name", "level", "pm", "fm", "bin")


def reads_length_targets(*fields: str) -> Callable[[Callable], Callable]:
    """Declares that a dataset builder, prompt kind or metric reads the length targets, and
    which of their ``fields`` besides the names: a config using it without ``length_targets``
    is refused before any job, and its jobs are given those fields only
    (:func:`targets_read`), so that editing another one reruns none of them. A field read
    but not declared is None where the entry reads it: it fails instead of being missed."""
    unknown = sorted(set(fields) - set(TARGET_FIELDS))
    if unknown:
        raise ValueError(f"unknown length target fields {unknown}; known: {list(TARGET_FIELDS)}")

    def declare(entry: Callable) -> Callable:
        entry.length_target_fields = tuple(f for f in TARGET_FIELDS if f == "name" or f in fields)
        return entry

    return declare


def target_fields(entry: Callable | None) -> tuple[str, ...]:
    """The fields of the length targets ``entry`` reads (none: it does not read them)."""
    return getattr(entry, "length_target_fields", ())


def needs_length_targets(entry: Callable) -> bool:
    return bool(target_fields(entry))


def targets_read(entry: Callable | None, spec):
    """What ``entry`` reads of the config's ``length_targets`` (``spec``): each target's
    declared fields, in the config's order (``paper``: the package's own targets, as is);
    None where it reads none or the config has none. A job's params hold this, not ``spec``."""
    fields = target_fields(entry)
    if not fields or spec is None or isinstance(spec, str):
        return spec if fields else None
    return [{key: target[key] for key in fields if key in target} for target in spec]


def strip_mlt(text: str) -> str:
    return MLT_PATTERN.sub("", text)


def leading_mlt(text: str) -> str | None:
    """The MLT a self-generating model emitted first, or None."""
    match = MLT_PATTERN.search(text)
    if match is None or text[: match.start()].strip():
        return None
    return match.group(1)
