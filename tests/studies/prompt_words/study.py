"""A study with a step of its own, all in this folder: how long each prompt set's prompts are
(words per prompt). Its rule (rules.smk) runs its metric (count_words.py) on a prompt set's
dataset, and its table writer (below) makes one table. Nothing under src/ or workflow/ knows
it; tests/test_study_plugin.py plans and runs it from its config section alone."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reprolm.config.lookups import promptset_spec
from reprolm.io import write_table
from reprolm.studies import Study, register_study

METRIC = "prompt_words"


def prompt_words_path(dataset: str, split: str) -> str:
    """The step's output for one dataset split (laid out as a score file: its metric, then
    ``prompts`` where a score file names a base model)."""
    return f"results/scores/{METRIC}/prompts/{dataset}/{split}.json"


def write_prompt_word_tables(scores, study: dict, settings: dict, tables: Path, plots: Path) -> None:
    """One row per prompt set: its prompts and their mean and largest word count."""
    by_split = {(score.recipe, score.name): score for score in scores}
    rows = []
    for promptset, (dataset, split) in settings["splits"].items():
        words = by_split[(dataset, split)].data["words"]
        rows.append({"promptset": promptset, "prompts": len(words), "mean_words": sum(words) / len(words)})
        rows[-1]["max_words"] = max(words)
    write_table(pd.DataFrame(rows), tables, "prompt_words")


class PromptWords(Study):
    name = "prompt_words"
    caption = """``prompt_words``: per prompt set, the number of prompts and their mean and
    largest word count (``\\w+`` tokens of the prompt's first turn)."""
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["promptsets"],
        "properties": {"promptsets": {"type": "array", "minItems": 1, "items": {"type": "string"}}},
    }

    def check_section(self, config) -> None:
        from reprolm.errors import require

        for promptset in config[self.name]["promptsets"]:
            require(promptset, config.get("promptsets", {}), f"{self.name}.promptsets")

    def models(self, config) -> list[tuple[str, str]]:
        return []

    def score_paths(self, config) -> list[str]:
        return [prompt_words_path(*split) for split in self.settings(config)["splits"].values()]

    def settings(self, config) -> dict:
        """The dataset split each prompt set's prompts come from."""
        splits = {}
        for promptset in config[self.name]["promptsets"]:
            spec = promptset_spec(config, promptset)
            splits[promptset] = [spec["dataset"], spec["split"]]
        return {"splits": splits}

    def table_writer(self):
        return write_prompt_word_tables


register_study(PromptWords())
