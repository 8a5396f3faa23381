"""LM-Harmony: train-before-test harmonises model rankings (STUDIES.md, seed 002)."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.errors import ConfigError, require
from reprolm.paths import score_path
from reprolm.studies.base import Study, register_study



class Harmony(Study):
    name = "harmony"
    tables = "reprolm.aggregate.harmony_tables:write_harmony_tables"
    caption = """\
        Scores x100 of every model on every task, evaluated directly and after fine-tuning on the
        task's training split (train-before-test: the test score at the epoch with the best
        validation score). Leaderboards rank by the first principal component of the task scores;
        ``consistency_summary`` gives the mean pairwise Kendall tau-b between the tasks' model
        rankings and the variance the first component explains, direct against train-before-test.
    """
    pretrained_recipes = True

    def check_section(self, config: Mapping) -> None:
        for index, task in enumerate(config["harmony"].get("tasks", [])):
            if task.get("source"):
                require(task["source"], config["sources"], f"harmony.tasks[{index}].source")

    def preflight(self, config: Mapping, task_cache: str) -> None:
        from reprolm.score.task_facts import refuse_metrics_not_reported, refuse_tasks_without_training_split

        tasks = config["harmony"]["tasks"]
        try:
            refuse_tasks_without_training_split(tasks, task_cache, "harmony.tasks")
            refuse_metrics_not_reported({f"harmony.tasks[{i}]": task for i, task in enumerate(tasks)}, task_cache)
        except ValueError as error:
            raise ConfigError(str(error)) from None

    def score_paths(self, config: Mapping) -> list[str]:
        tasks = [task["name"] for task in config["harmony"].get("tasks", [])]
        return super().score_paths(config) + [
            score_path("train_before_test", base, recipe, task) for base, recipe in self.models(config) for task in tasks
        ]


def task_spec(config: Mapping, name: str) -> dict:
    """A train-before-test task's settings by its short name."""
    for task in config["harmony"]["tasks"]:
        if task["name"] == name:
            return task
    raise KeyError(f"harmony.tasks has no task named {name!r}")


register_study(Harmony())
