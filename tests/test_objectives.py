"""Training objectives (reprolm.train.objectives): the schema's ``recipes.*.objective`` and
its conditions follow the registry's entries and their properties."""

from __future__ import annotations

import pytest
import yaml

from reprolm.config.resources import ACTIVATION_BYTES_PER_TOKEN, STATE_BYTES, finetune_gib
from reprolm.train.objectives import DEFAULT_OBJECTIVE, OBJECTIVES, PREFERENCE_PAIRS, objective_of
from workflow_helpers import REPO

RECIPE = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]["recipes"][
    "additionalProperties"
]


def test_the_schemas_objectives_and_their_required_keys_are_the_registrys():
    objective = RECIPE["properties"]["objective"]
    assert objective["enum"] == OBJECTIVES.names() and objective["default"] == DEFAULT_OBJECTIVE
    requirements = {tuple(branch["if"]["properties"]["objective"]["enum"]): branch for branch in RECIPE["allOf"]}
    with_beta = [name for name in OBJECTIVES if "beta" in OBJECTIVES[name].settings({"max_length": 8, "beta": 0.2})]
    assert requirements[tuple(with_beta)]["then"] == {"required": ["beta"]}
    # Objectives on preference pairs take no chat format; the others need one.
    on_pairs = [name for name in OBJECTIVES if OBJECTIVES[name].reads == PREFERENCE_PAIRS]
    assert requirements[tuple(on_pairs)]["else"] == {"required": ["format"]}


def test_a_reference_model_adds_its_weights_and_pairs_to_the_memory_estimate():
    recipe = {"max_length": 1024, "per_device_train_batch_size": 8}
    assert objective_of(recipe).name == "sft"
    sft = finetune_gib(10**9, 1, 0, recipe)
    dpo = finetune_gib(10**9, 1, 0, {**recipe, "objective": "dpo"})
    reward = finetune_gib(10**9, 1, 0, {**recipe, "objective": "reward"})
    assert reward == sft
    # The reference's weights and a second sequence of each example's activations.
    extra = STATE_BYTES["weights"] * 10**9 + 8 * 1024 * ACTIVATION_BYTES_PER_TOKEN
    assert dpo - sft == pytest.approx(extra / 2**30)
