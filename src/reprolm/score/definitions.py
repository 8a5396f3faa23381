"""The definitions a metric can be scored by: the values of its settings' ``compat`` (the
headline definition) and ``variants`` (others scored beside it, under ``variants`` in the
score), registered with the metric they change and what scoring by them reads beside the
generations. Loads no heavy library: the workflow's input functions ask it while they parse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from reprolm.registry import Registry

# The definition a metric is scored by where its settings name none.
DEFAULT_DEFINITION = "paper"


@dataclass(frozen=True)
class Definition:
    name: str
    # Scores text rendered through the generating model's chat template: the score job reads
    # the model's folder.
    reads_model: bool = False
    # NLTK data packages its tokenizer reads (fetched by the nltk_data rule).
    nltk_data: tuple[str, ...] = ()


def definitions(kind: str, *entries: Definition) -> Registry[Definition]:
    registered: Registry[Definition] = Registry(kind)
    for entry in entries:
        registered.register(entry.name, entry)
    return registered


# How answers are read: as the paper describes, or as the original code does
# (evaluation/utils/gsm8k.py; reprolm.score.sampling).
ANSWER_READINGS = definitions("answer reading", Definition("paper"), Definition("original"))
# The original evaluation scores each sample in its chat-template rendering, tokenised by
# NLTK's word_tokenize (reprolm.score.diversity).
DIVERSITY_DEFINITIONS = definitions(
    "diversity definition", Definition("paper"), Definition("original", reads_model=True, nltk_data=("punkt_tab",))
)
# By metric: the definitions it can be scored by.
DEFINITIONS: Registry[Registry[Definition]] = Registry("metric with definitions")
DEFINITIONS.register("answer_accuracy", ANSWER_READINGS)
DEFINITIONS.register("answer_voting", ANSWER_READINGS)
DEFINITIONS.register("diversity", DIVERSITY_DEFINITIONS)


def chosen_definitions(metric: str, settings: Mapping) -> list[Definition]:
    """The metric's definitions its settings choose, the headline (``compat``) first, then
    its ``variants``; none for a metric with one definition."""
    if metric not in DEFINITIONS:
        return []
    registered = DEFINITIONS[metric]
    headline = settings.get("compat", DEFAULT_DEFINITION)
    chosen = [registered.get(headline, f"metrics.{metric}.compat")]
    for name in dict.fromkeys(settings.get("variants", [])):
        if name != headline:
            chosen.append(registered.get(name, f"metrics.{metric}.variants"))
    return chosen
