"""Reading score files."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

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
