"""LM-Harmony: train-before-test harmonises model rankings (docs/studies/harmony.md, seed 002).
Beside this module: its config section's schema (schema.yaml), the rule of the step only it
takes (rules.smk: train_before_test), its PC1 and ranking-consistency analysis (rankings.py)
and table writer (tables.py)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from reprolm.config.lookups import task_data
from reprolm.errors import ConfigError, require
from reprolm.paths import score_path
from reprolm.score.task_facts import refuse_metrics_not_reported, refuse_tasks_without_training_split
from reprolm.stages import RuleStage
from reprolm.studies.base import Study, register_study, section_schema

# The report's caption of both score tables, direct and train-before-test.
SCORES_CAPTION = """\
    Scores x100 of every model on every task, evaluated directly (``direct_scores``) or
    after fine-tuning on the task's training split (``train_before_test_scores``: the test
    score at the epoch with the best validation score). ``{task} lo`` / ``{task} hi``: a
    95% normal interval, score -/+ 1.96 standard errors over the task's test documents
    (lm-eval's standard error of a 0/1 metric, sqrt(p (1 - p) / (n - 1)), the paper's);
    CoLA's MCC has none. It is the test set's sampling error alone: the epoch choice and
    the fine-tuning seed add more.
"""


class Harmony(Study):
    name = "harmony"
    tables = "reprolm.studies.harmony.tables:write_harmony_tables"
    rule_stages = {
        "train_before_test": RuleStage(
            "train_before_test", resources="train_before_test", trains=True, inference=True, resumes=True
        )
    }
    schema = section_schema(__file__)
    caption = """\
        Scores x100 of every model on every task, evaluated directly and after fine-tuning on the
        task's training split (train-before-test: the test score at the epoch with the best
        validation score). ``{task} lo`` / ``{task} hi`` bound a 95% normal interval, score
        -/+ 1.96 standard errors over the task's test documents (lm-eval's standard error of a
        0/1 metric, sqrt(p (1 - p) / (n - 1)), which is also the paper's); CoLA's MCC has no
        interval, since the score files keep no per-document predictions. The interval is the
        test set's sampling error alone: the choice of epoch and the fine-tuning seed add
        more. Leaderboards rank by the first principal component of the task scores; a model's
        ``PC1 lo`` / ``PC1 hi`` come from 1000 draws of the TASKS with replacement, PC1
        recomputed on each draw's columns and signed to agree with the one on all tasks (drawing
        models would leave a model's score undefined whenever it is not drawn).
        ``consistency_summary`` gives the mean pairwise Kendall tau-b between the
        tasks' model rankings and the variance the first component explains, direct against
        train-before-test, and ``consistency_per_task`` each task's mean tau with the others;
        their ``lo`` / ``hi`` are a 95% percentile bootstrap over models (1000 draws of the
        models with replacement, every tau recomputed on the drawn models with tau-b, which
        leaves out the pair a model drawn twice makes with itself; tasks on which all drawn
        models score alike are left out of that draw's PC1). Direct and train-before-test
        draw the same models, so their difference is paired. A figure that fewer than 95% of
        the draws define (too few distinct models drawn) has no interval: the interval of the
        other draws would be too narrow. ``reference_comparison``, where
        the paper's published results are configured, sets each hub model's scores (as it is,
        not fine-tuned by a recipe) beside the paper's on the tasks and metrics the paper
        reports, x100, with the paper's standard error, the difference, its standard error
        (the paper's and this run's combined in quadrature; the paper's alone for MCC), and
        whether this run's score lies within 1 and within 2 of them of the paper's.
    """
    table_captions = {
        "direct_scores": SCORES_CAPTION,
        "train_before_test_scores": SCORES_CAPTION,
        "leaderboard_*": """\
            Models ranked by the first principal component (PC1) of their task scores, direct or
            train-before-test, with each task's rank. ``PC1 lo`` / ``PC1 hi``: 95% percentile
            interval over 1000 draws of the tasks with replacement, PC1 recomputed on each draw's
            columns and signed to agree with the one on all tasks.
        """,
        "consistency_summary": """\
            Direct evaluation against train-before-test: ``mean_kendall_tau`` is the mean pairwise
            Kendall tau-b between the tasks' model rankings (1: every task ranks the models alike;
            negative: rankings disagree), ``pc1_share`` the variance the first principal component
            explains. ``lo`` / ``hi``: 95% percentile bootstrap over models (1000 draws with
            replacement, every tau recomputed on the drawn models); both evaluations draw the same
            models, so their difference is paired. A figure fewer than 95% of the draws define
            (too few distinct models) has no interval.
        """,
        "consistency_per_task": """\
            Per task, its mean Kendall tau-b with every other task's model ranking, direct and
            train-before-test (negative: the task ranks models against the others). ``lo`` /
            ``hi``: 95% percentile bootstrap over models, as in ``consistency_summary``.
        """,
        "reference_comparison": """\
            Each hub model's scores (as it is, not fine-tuned) beside the paper's published ones,
            x100, on the tasks and metrics the paper reports: the paper's standard error, the
            difference, its standard error (the paper's and this run's in quadrature; the paper's
            alone for MCC), and whether this run's score lies within 1 and within 2 of them.
        """,
    }
    pretrained_recipes = True

    def check_section(self, config: Mapping) -> None:
        for index, task in enumerate(config["harmony"].get("tasks", [])):
            if task.get("source"):
                require(task["source"], config["sources"], f"harmony.tasks[{index}].source")
        reference = config["harmony"].get("reference_results")
        if reference and not Path(reference).is_file():
            raise ConfigError(
                f"harmony.reference_results: {reference} does not exist (the paper's all_results.json; "
                "config/reference/lm-harmony/all_results.json ships with the project)"
            )

    def table_files(self, config: Mapping) -> list[str]:
        reference = config["harmony"].get("reference_results")
        return [reference] if reference else []

    def preflight(self, config: Mapping, task_cache: str) -> None:
        tasks = config["harmony"]["tasks"]
        try:
            refuse_tasks_without_training_split(tasks, task_cache, "harmony.tasks")
            refuse_metrics_not_reported({f"harmony.tasks[{i}]": task for i, task in enumerate(tasks)}, task_cache)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def settings(self, config: Mapping) -> dict:
        # The paper's published scores (all_results.json), and the hub checkpoint each base
        # is, to find a base's scores in them.
        bases = config["harmony"]["bases"]
        return {
            "reference_results": config["harmony"].get("reference_results"),
            "hub_ids": {
                base: config["base_models"][base]["hub"]["path"]
                for base in bases
                if "hub" in config["base_models"][base]
            },
        }

    def score_paths(self, config: Mapping) -> list[str]:
        tasks = [task["name"] for task in config["harmony"].get("tasks", [])]
        return super().score_paths(config) + [
            score_path("train_before_test", base, recipe, task)
            for base, recipe in self.models(config)
            for task in tasks
        ]

    def job_flops(self, config: Mapping, rule: str, wildcards: Mapping, parameters: int) -> float | None:
        """train_before_test: ``6 x N x`` (training documents x epochs x ``max_length``) plus
        ``2 x N x`` (validation and test documents x (epochs + 1) x ``max_length``), where
        ``harmony.train`` caps all three document counts."""
        if rule != "train_before_test":
            return None
        train = config.get(self.name, {}).get("train", {})
        epochs, length = train.get("num_train_epochs", 1), train.get("max_length", 1024)
        documents = [train.get(key) for key in ("max_num_train", "max_num_valid", "max_num_test")]
        if not all(documents):
            return None
        return (
            6 * parameters * documents[0] * epochs * length
            + 2 * parameters * (documents[1] + documents[2]) * (epochs + 1) * length
        )


def task_spec(config: Mapping, name: str) -> dict:
    """A train-before-test task's settings by its short name."""
    for task in config["harmony"]["tasks"]:
        if task["name"] == name:
            return task
    raise KeyError(f"harmony.tasks has no task named {name!r}")


def task_inputs(config: Mapping, name: str) -> dict[str, list[str]]:
    """What a train-before-test job reads of its task's documents: the raw source the task
    names (``docs``), else the hub dataset the ``lm_eval_task_data`` rule fetched
    (``hub_data``)."""
    task = task_spec(config, name)
    return {"docs": [], "hub_data": [], "docs" if task.get("source") else "hub_data": [task_data(task)]}


register_study(Harmony())
