"""Training objectives: what ``recipes.*.objective`` names, each a registered entry with what
the finetune stage, the config checks and the memory estimate ask of it.

Loads no heavy library when imported (the config checks and the workflow's resource lookups
read it): the trainer and its settings class are named by module and class, and imported
when a finetune asks for them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from reprolm.registry import Registry

# What the train file's rows hold: chat examples in a recipe's ``format``, or preference pairs
# (conversational ``prompt``, ``chosen`` and ``rejected`` turns).
EXAMPLES, PREFERENCE_PAIRS = "examples", "preference_pairs"
DEFAULT_OBJECTIVE = "sft"


def _no_settings(recipe: Mapping) -> dict:
    return {}


@dataclass(frozen=True)
class Objective:
    name: str
    # (module, class) of the trainer, and of the settings dataclass it reads.
    trainer: tuple[str, str]
    arguments: tuple[str, str]
    # The loss it minimises, as a sentence for messages and docs.
    loss: str
    # What the rows of its train file hold: EXAMPLES (through ``recipes.*.format``, the loss
    # ``recipes.*.loss`` picks) or PREFERENCE_PAIRS.
    reads: str
    # Settings of its arguments class that come from recipe keys.
    settings: Callable[[Mapping], dict] = field(default=_no_settings)
    # Keeps a frozen copy of the starting model as its reference (memory: a second set of
    # weights and each example's two sequences).
    reference_model: bool = False
    # Trains a sequence classifier with one output (a reward model, which judges read as one
    # checkpoint) instead of a causal LM.
    scores_sequences: bool = False
    # Each pair becomes a desirable and an undesirable example (TRL's unpaired format).
    unpaired: bool = False

    def trainer_class(self):
        return _imported(self.trainer)

    def arguments_class(self):
        return _imported(self.arguments)


def _imported(where: tuple[str, str]):
    module, name = where
    return getattr(importlib.import_module(module), name)


def _pair_settings(recipe: Mapping) -> dict:
    return {"beta": recipe.get("beta", 0.1), "max_length": recipe["max_length"]}


def _reward_settings(recipe: Mapping) -> dict:
    # Dropout makes the two sequences of a pair see different networks.
    return {"max_length": recipe["max_length"], "disable_dropout": True}


OBJECTIVES: Registry[Objective] = Registry("training objective")
OBJECTIVES.register(
    "sft",
    Objective(
        "sft",
        trainer=("transformers", "Trainer"),
        arguments=("transformers", "TrainingArguments"),
        loss="the recipe's loss (recipes.*.loss; cross-entropy by default) on the assistant tokens",
        reads=EXAMPLES,
    ),
)
OBJECTIVES.register(
    "dpo",
    Objective(
        "dpo",
        trainer=("trl", "DPOTrainer"),
        arguments=("trl", "DPOConfig"),
        loss="DPO's sigmoid loss on the policy's and the reference's log-ratios of chosen over rejected, scaled by beta",
        reads=PREFERENCE_PAIRS,
        settings=_pair_settings,
        reference_model=True,
    ),
)
OBJECTIVES.register(
    "kto",
    Objective(
        "kto",
        trainer=("trl", "KTOTrainer"),
        arguments=("trl", "KTOConfig"),
        loss="KTO's loss on desirable and undesirable answers against the reference's KL estimate, scaled by beta",
        reads=PREFERENCE_PAIRS,
        settings=_pair_settings,
        reference_model=True,
        unpaired=True,
    ),
)
OBJECTIVES.register(
    "reward",
    Objective(
        "reward",
        trainer=("trl", "RewardTrainer"),
        arguments=("trl", "RewardConfig"),
        loss="Bradley-Terry: -log sigmoid(r_chosen - r_rejected)",
        reads=PREFERENCE_PAIRS,
        settings=_reward_settings,
        scores_sequences=True,
    ),
)


def objective_of(recipe: Mapping, where: str | None = None) -> Objective:
    """The objective a recipe trains with (``sft`` where it names none)."""
    return OBJECTIVES.get(recipe.get("objective", DEFAULT_OBJECTIVE), where)
