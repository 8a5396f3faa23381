"""FLR's model ranking: a judge's mean score per model over its answers, correlated with the
models' arena ELO ratings (``flr.ranking``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import yaml

from reprolm.score.reward_benchmarks import correlations


def load_elo(path: str | Path) -> dict[str, float]:
    table = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    ratings = table.get("elo") if isinstance(table, Mapping) else None
    if not isinstance(ratings, Mapping) or not all(isinstance(v, (int, float)) for v in ratings.values()):
        raise ValueError(f"{path}: expected 'elo' mapping model name -> rating")
    return {str(model): float(rating) for model, rating in ratings.items()}


def model_ranking(judge, rows: Sequence[Mapping], elo: Mapping[str, float]) -> dict:
    """Mean judge score per model over its answers, correlated with the ELO ratings of the
    models that have one (models without a rating are reported but not correlated). Each
    answer's id, model and score are kept for the tables' intervals of the means."""
    scores = judge.score([list(row["conversation"]) for row in rows])
    by_model: dict[str, list[float]] = defaultdict(list)
    for row, score in zip(rows, scores, strict=True):
        if not math.isnan(score):
            by_model[row["model"]].append(score)
    means = {model: float(np.mean(values)) for model, values in sorted(by_model.items())}
    rated = [model for model in means if model in elo]
    return {
        **correlations([means[m] for m in rated], [elo[m] for m in rated]),
        "models": len(rated),
        "unrated_models": sorted(set(means) - set(rated)),
        "mean_score": means,
        "elo": {m: elo[m] for m in rated},
        "ids": [row["id"] for row in rows],
        "answer_models": [row["model"] for row in rows],
        "scores": scores,
    }
