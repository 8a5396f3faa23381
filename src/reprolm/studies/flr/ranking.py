"""FLR's model ranking: a judge's mean score per model over its answers, correlated with the
models' arena ELO ratings (``flr.ranking``).

The answers stream through the judge ``CHUNK_ROWS`` at a time, read from their parquet a
record batch at a time, so that a benchmark of many models' answers (WildBench: about 30,000,
3.7 million follow-ups under FLR) holds one chunk's conversations and a score per answer.
After each chunk the scores so far are saved beside the output (:class:`RankingProgress`);
a stop signal (reprolm.stopping) ends the job there, and its retry skips the rows already
scored: the chunks, and so the judge's batches, are those an uninterrupted run makes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import yaml

from reprolm.io import atomic_path
from reprolm.provenance.hashing import content_hash, recorded_hash
from reprolm.score.flr import FollowUpScorer, load_followups
from reprolm.score.reward_benchmarks import correlations
from reprolm.stopping import JobStopped, stop_request

CHUNK_ROWS = 512
ROW_FIELDS = ("id", "model", "conversation")


def load_elo(path: str | Path) -> dict[str, float]:
    table = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    ratings = table.get("elo") if isinstance(table, Mapping) else None
    if not isinstance(ratings, Mapping) or not all(isinstance(v, (int, float)) for v in ratings.values()):
        raise ValueError(f"{path}: expected 'elo' mapping model name -> rating")
    return {str(model): float(rating) for model, rating in ratings.items()}


def read_rows(path: str | Path) -> Iterator[dict]:
    """The answers' id, model and conversation, a record batch at a time."""
    source = pq.ParquetFile(path)
    missing = [name for name in ROW_FIELDS if name not in source.schema_arrow.names]
    if missing:
        raise KeyError(f"{path}: the model ranking needs the fields {missing}; it has {source.schema_arrow.names}")
    for batch in source.iter_batches(batch_size=CHUNK_ROWS, columns=list(ROW_FIELDS)):
        yield from batch.to_pylist()


def progress_key(inputs: Mapping[str, str], judge_spec: Mapping, batching) -> str:
    """What a saved progress is valid for: the inputs' content (a model by its provenance
    record's hash where it has one), the judge's settings and how it batches."""
    hashes = {name: recorded_hash(path) or content_hash(path) for name, path in sorted(inputs.items())}
    material = json.dumps([hashes, dict(judge_spec), batching, CHUNK_ROWS], sort_keys=True, default=str)
    return hashlib.sha256(material.encode()).hexdigest()[:16]


class RankingProgress:
    """The answers scored so far, in a hidden file beside the output, written atomically
    after each chunk; one saved under another key (changed inputs, settings or batching) is
    not used."""

    def __init__(self, output: str | Path, key: str):
        output = Path(output)
        self.path = output.with_name(f".{output.name}.progress")
        self.key = key

    def load(self) -> dict[str, list]:
        saved = json.loads(self.path.read_text()) if self.path.exists() else {}
        if saved.get("key") != self.key:
            return {"ids": [], "answer_models": [], "scores": []}
        return {name: saved[name] for name in ("ids", "answer_models", "scores")}

    def save(self, done: Mapping[str, list]) -> None:
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps({"key": self.key, **done}))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def model_ranking(
    judge, rows: Iterable[Mapping], elo: Mapping[str, float], progress: RankingProgress | None = None
) -> dict:
    """Mean judge score per model over its answers, correlated with the ELO ratings of the
    models that have one (models without a rating are reported but not correlated). Each
    answer's id, model and score are kept for the tables' intervals of the means. With
    ``progress``, rows it holds are not scored again."""
    done = progress.load() if progress else {"ids": [], "answer_models": [], "scores": []}
    remaining = iter(rows)
    skipped = sum(1 for _ in itertools.islice(remaining, len(done["ids"])))
    if skipped < len(done["ids"]):
        raise ValueError(f"{progress.path}: holds {len(done['ids'])} scored answers, the rows only {skipped}")
    while chunk := list(itertools.islice(remaining, CHUNK_ROWS)):
        done["scores"] += judge.score([list(row["conversation"]) for row in chunk])
        done["ids"] += [row["id"] for row in chunk]
        done["answer_models"] += [row["model"] for row in chunk]
        if progress:
            progress.save(done)
            if stop_request.requested:
                raise JobStopped(stop_request.signal_name, f"{len(done['ids'])} answers scored")
    by_model: dict[str, list[float]] = defaultdict(list)
    for model, score in zip(done["answer_models"], done["scores"], strict=True):
        if not math.isnan(score):
            by_model[model].append(score)
    means = {model: float(np.mean(values)) for model, values in sorted(by_model.items())}
    rated = [model for model in means if model in elo]
    return {
        **correlations([means[m] for m in rated], [elo[m] for m in rated]),
        "models": len(rated),
        "unrated_models": sorted(set(means) - set(rated)),
        "mean_score": means,
        "elo": {m: elo[m] for m in rated},
        **done,
    }


def rank_answers(judge: str, rows: str, options: Mapping) -> dict:
    """The ranking job's code with the FLR judge in folder ``judge`` (its settings in
    ``options``; ``batch_tokens`` where given, else sized to the device) over the answers in ``rows``, each model rated by its name's order: what
    ``reprolm rehearse --sizes`` runs on a stand-in judge to model the job's memory."""
    scorer = FollowUpScorer(
        judge,
        load_followups(options["followups"], options["categories"]),
        compat=options["compat"],
        format=options["format"],
        batch_tokens=options.get("batch_tokens"),
    )
    models = sorted(set(pq.read_table(rows, columns=["model"]).column("model").to_pylist()))
    return model_ranking(scorer, read_rows(rows), {model: float(rank) for rank, model in enumerate(models)})
