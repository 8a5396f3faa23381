"""A metric's definitions (``compat`` and ``variants``) are registered options of the metric
(reprolm.score.definitions): the schema offers exactly those, and a score job's inputs follow
what the chosen ones read."""

from __future__ import annotations

import pytest
import yaml

from reprolm.config.lookups import definition_inputs
from reprolm.registry import UnknownName
from reprolm.score.definitions import DEFINITIONS
from workflow_helpers import REPO

METRIC_SETTINGS = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())["properties"]["metrics"][
    "properties"
]


def test_the_schema_offers_each_metrics_registered_definitions():
    with_definitions = sorted(name for name, node in METRIC_SETTINGS.items() if "compat" in node["properties"])
    assert with_definitions == sorted(DEFINITIONS)
    for metric in with_definitions:
        options = METRIC_SETTINGS[metric]["properties"]
        assert options["compat"]["enum"] == DEFINITIONS[metric].names(), metric
        assert options["variants"]["items"]["enum"] == DEFINITIONS[metric].names(), metric


def test_a_score_job_reads_what_its_chosen_definitions_read():
    nothing = {"model": [], "nltk_data": []}
    rendered = {"model": ["results/models/tiny/sft"], "nltk_data": ["resources/nltk_data/punkt_tab"]}
    assert definition_inputs("diversity", {}, "tiny", "sft") == nothing
    assert definition_inputs("diversity", {"variants": ["original"]}, "tiny", "sft") == rendered
    assert definition_inputs("diversity", {"compat": "original", "variants": ["paper"]}, "tiny", "sft") == rendered
    # The answer metrics' original reading reads nothing more; a metric without definitions neither.
    assert definition_inputs("answer_voting", {"compat": "original"}, "tiny", "sft") == nothing
    assert definition_inputs("length_levels", {}, "tiny", "sft") == nothing
    with pytest.raises(UnknownName, match=r"^metrics\.diversity\.variants: unknown diversity definition 'orignal'"):
        definition_inputs("diversity", {"variants": ["orignal"]}, "tiny", "sft")
