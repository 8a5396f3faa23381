"""Reading score files, and combining figures computed from them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from reprolm.aggregate.uncertainty import Estimate
from reprolm.paths import parse_score_path


@dataclass(frozen=True)
class Score:
    metric: str
    base: str
    recipe: str
    name: str  # prompt set or lm-eval suite
    data: dict
    # The file it was read from: files written beside it (lm-eval's per-document log) are
    # found from here.
    path: Path | None = field(default=None, compare=False)

    @property
    def model(self) -> str:
        return f"{self.base}/{self.recipe}"


def load_scores(paths) -> list[Score]:
    """Score files laid out as :func:`reprolm.paths.score_path` makes them."""
    return [Score(*parse_score_path(path), json.loads(Path(path).read_text()), Path(path)) for path in paths]


def mean_of_estimates(estimates: Sequence[Estimate]) -> Estimate:
    """The plain mean of figures over the same units (an average of columns): their draws
    are the same, so each replicate is the mean of the figures' replicates of that draw."""
    return Estimate(sum(e.value for e in estimates) / len(estimates),
                    np.stack([e.replicates for e in estimates]).mean(axis=0))
