"""The dataset builders by name (``datasets.*.builder``), as lazy ``module:object`` entries:
naming and listing them loads no heavy library (the config checks and the workflow ask them
while they parse), and looking one up imports its module. The package's shared builders are
in :mod:`reprolm.data.builders`; a study registers its own from its folder
(``Study.builders``)."""

from __future__ import annotations

from collections.abc import Callable

from reprolm.registry import Registry

# A builder: the build context (reprolm.data.builders.BuildContext) -> records by split.
Builder = Callable[..., dict[str, list[dict]]]
BUILDERS: Registry[Builder] = Registry("dataset builder", per_job=True)
SHARED_BUILDERS = {
    "preference_pairs": "reprolm.data.builders:build_preference_pairs",
    "instructions": "reprolm.data.builders:build_instructions",
    "rated_responses": "reprolm.data.builders:build_rated_responses",
    "model_outputs": "reprolm.data.builders:build_model_outputs",
    "online_preferences": "reprolm.data.builders:build_online_preferences",
    "chat_sft": "reprolm.data.builders:build_chat_sft",
}
for name, reference in SHARED_BUILDERS.items():
    BUILDERS.register_lazy(name, reference)
