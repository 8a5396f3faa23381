"""A sixth study from one file outside the package: each model's greedy accuracy on
GSM8K-style problems, one table and one plot, and a paper figure and an effect of its own for
the paper comparison. `tests/test_study_plugin.py` runs it through the workflow to the
report; nothing under src/ or workflow/ knows it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reprolm.io import write_table
from reprolm.studies import Study, register_study


def write_accuracy_tables(scores, study: dict, settings: dict, tables: Path, plots: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        {
            "model": s.model,
            "accuracy": s.data["accuracy"],
            "unparsed": s.data["unparsed"],
            "problems": len(s.data["ids"]),
        }
        for s in scores
        if s.metric == "answer_accuracy"
    ]
    frame = pd.DataFrame(rows).sort_values(["accuracy", "model"], ascending=[False, True], kind="stable")
    frame.insert(0, "rank", range(1, len(frame) + 1))
    write_table(frame, tables, "accuracy")
    figure, axes = plt.subplots(figsize=(4, 3))
    axes.bar(frame["model"], frame["accuracy"])
    axes.set_ylabel("greedy accuracy (%)")
    figure.tight_layout()
    figure.savefig(plots / "accuracy.png", dpi=120)
    plt.close(figure)


class GreedyAccuracy(Study):
    name = "greedy_accuracy"
    caption = """``accuracy``: the percentage of problems whose answer, read after the last
    "The answer is", equals the reference, from one greedy answer per problem; ``unparsed``
    counts answers with no number to read."""
    plots_caption = "Greedy accuracy per model."
    # Set beside the tiny model of tests/test_study_plugin.py, so that its row is filled: the
    # GEM paper's greedy GSM8K accuracy of Llama-3-8B fine-tuned with CE.
    headlines = [
        {
            "figure": "GSM8K greedy accuracy",
            "model": "Llama-3-8B CE (GEM paper)",
            "paper": 47.2,
            "table": "accuracy",
            "where": {"model": "tiny_llama_small/pretrained"},
            "column": "accuracy",
        }
    ]
    directions = [
        {
            "claim": "greedy decoding answers some problems right (accuracy above 0%)",
            "table": "accuracy",
            "column": "accuracy",
            "higher": {"model": "tiny_llama_small/pretrained"},
            "lower": 0,
        }
    ]
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["bases", "evaluations"],
        "properties": {
            "bases": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "recipes": {"type": "array", "items": {"type": "string"}},
            "evaluations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["promptset", "metric"],
                    "properties": {"promptset": {"type": "string"}, "metric": {"const": "answer_accuracy"}},
                },
            },
        },
    }

    def table_writer(self):
        return write_accuracy_tables


register_study(GreedyAccuracy())
