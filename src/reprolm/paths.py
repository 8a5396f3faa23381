"""Every artifact path the workflow makes, built and parsed in one place, and the model names
they carry (``pretrained``, ``{recipe}+expo{alpha}``, ``{recipe}-seed{seed}``).

Scores follow one convention: ``results/scores/{metric}/{base}/{recipe}/{name}.json``, where a
judge-graded metric is ``{kind}_{judge}`` (``grade_tiny_rm``, ``win_rate_flr``) and ``name``
is the prompt set, lm-eval suite or task. Scores of a judge on a dataset (no model) are
``results/scores/{metric}/{judge}/{dataset}/{split}.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

PRETRAINED = "pretrained"  # the recipe name of a base model used as it is
# Written into a downloaded checkpoint whose config says ``hub.trust_remote_code: true``
# (and carried into what is made from it): only then may its own modelling code run.
REMOTE_CODE_MARKER = "reprolm_trusts_remote_code"
EXPO_SUFFIX = re.compile(r"^(?P<recipe>[A-Za-z0-9_.-]+)\+expo(?P<alpha>[0-9]+(?:\.[0-9]+)?)$")


def split_expo(recipe: str) -> tuple[str, float | None]:
    """``"dpo+expo0.5"`` -> ``("dpo", 0.5)``: an extrapolated model names the recipe it
    extrapolates and alpha; a plain recipe gives ``(recipe, None)``."""
    match = EXPO_SUFFIX.match(recipe)
    return (match["recipe"], float(match["alpha"])) if match else (recipe, None)


def expo_name(recipe: str, alpha: float) -> str:
    """The model name of ``recipe`` extrapolated by ``alpha`` (``0.30`` and ``0.3`` name one model)."""
    return f"{recipe}+expo{alpha:g}"


SEED_SUFFIX = re.compile(r"^(?P<recipe>[A-Za-z0-9_]+)-seed(?P<seed>[0-9]+)$")


def split_seed(recipe: str) -> tuple[str, int | None]:
    """``"gem_linear-seed7"`` -> ``("gem_linear", 7)``: a replicate of a recipe trained with
    another seed names the recipe and the seed; a plain name gives ``(recipe, None)``."""
    match = SEED_SUFFIX.match(recipe)
    return (match["recipe"], int(match["seed"])) if match else (recipe, None)


def seed_name(recipe: str, seed: int) -> str:
    """The model name of ``recipe`` trained with ``seed`` (a replicate besides the default seed's)."""
    return f"{recipe}-seed{seed}"


def raw_dir(source: str) -> str:
    return f"resources/raw/{source}"


def lm_eval_data_dir(task: str) -> str:
    """The record of an lm-eval task's datasets, fetched into the datasets cache."""
    return f"resources/lm_eval_data/{task}"


def nltk_data_dir(package: str) -> str:
    return f"resources/nltk_data/{package}"


def hub_model_dir(repo_id: str) -> str:
    """A hub model that is not a base model (a sentence encoder): ``org/name`` as ``org--name``."""
    return f"resources/hub_models/{repo_id.replace('/', '--')}"


def base_model_dir(base: str) -> str:
    return f"resources/models/{base}"


def model_dir(base: str, recipe: str) -> str:
    return base_model_dir(base) if recipe == PRETRAINED else f"results/models/{base}/{recipe}"


def dataset_dir(dataset: str) -> str:
    return f"results/datasets/{dataset}"


def dataset_file(dataset: str, split: str) -> str:
    return f"{dataset_dir(dataset)}/{split}.parquet"


def generations_file(base: str, recipe: str, promptset: str) -> str:
    return f"results/generations/{base}/{recipe}/{promptset}.parquet"


def score_path(metric: str, base: str, recipe: str, name: str) -> str:
    """A model's score: a metric over its generations, an lm-eval suite, a train-before-test task."""
    return f"results/scores/{metric}/{base}/{recipe}/{name}.json"


LM_EVAL_SAMPLES_SUFFIX = ".samples.jsonl.gz"


def lm_eval_samples_path(score: str | Path) -> str:
    """lm-eval's per-document log, written beside its score file by the same job."""
    score = Path(score)
    return str(score.with_name(score.stem + LM_EVAL_SAMPLES_SUFFIX))


def judged_metric(kind: str, judge: str) -> str:
    """The metric name of a judge's scores: ``grade_{judge}``, ``win_rate_{judge}``."""
    return f"{kind}_{judge}"


def grade_path(judge: str, base: str, recipe: str, promptset: str) -> str:
    return score_path(judged_metric("grade", judge), base, recipe, promptset)


def win_rate_path(judge: str, base: str, recipe: str, promptset: str) -> str:
    return score_path(judged_metric("win_rate", judge), base, recipe, promptset)


def judge_score_path(kind: str, judge: str, dataset: str, split: str = "test") -> str:
    """A judge's score on a dataset (pair accuracy, rating agreement, model ranking)."""
    return f"results/scores/{kind}/{judge}/{dataset}/{split}.json"


def tables_dir(study: str) -> str:
    return f"results/tables/{study}"


def plots_dir(study: str) -> str:
    return f"results/plots/{study}"


class ScorePath(NamedTuple):
    metric: str
    base: str  # or the judge, for a judge's score on a dataset
    recipe: str  # or the dataset
    name: str  # prompt set, suite, task or split


def parse_score_path(path: str | Path) -> ScorePath:
    """The parts of ``results/scores/{metric}/{base}/{recipe}/{name}.json``."""
    path = Path(path)
    metric, base, recipe = path.parts[-4:-1]
    return ScorePath(metric, base, recipe, path.stem)


def on_the_hub(name: str) -> bool:
    """A hub id (``owner/name``), not a packaged loader (``parquet``), a local folder or file,
    or a URL."""
    return name.count("/") == 1 and "://" not in name and not Path(name).exists()
