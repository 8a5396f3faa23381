"""Reading score files and writing tables (CSV plus a markdown rendering)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reprolm.paths import parse_score_path
from reprolm.provenance import atomic_path


@dataclass(frozen=True)
class Score:
    metric: str
    base: str
    recipe: str
    name: str  # prompt set or lm-eval suite
    data: dict

    @property
    def model(self) -> str:
        return f"{self.base}/{self.recipe}"


def load_scores(paths) -> list[Score]:
    """Score files laid out as :func:`reprolm.paths.score_path` makes them."""
    return [Score(*parse_score_path(path), json.loads(Path(path).read_text())) for path in paths]


def write_table(frame: pd.DataFrame, folder: str | Path, name: str, decimals: int | None = 2,
                markdown: bool = True) -> Path:
    """``decimals=None`` keeps full precision (p-values). ``markdown``: also a ``.md``
    rendering beside the CSV, which only a rule whose output is the whole folder may write."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rounded = frame if decimals is None else frame.round(decimals)
    csv_path = folder / f"{name}.csv"
    with atomic_path(csv_path) as tmp:
        rounded.to_csv(tmp, index=False)
    if markdown:
        with atomic_path(folder / f"{name}.md") as tmp:
            tmp.write_text(rounded.to_markdown(index=False) + "\n")
    return csv_path
