"""Every leaf key of the default config changed, one at a time, to another value the workflow
accepts: the rules that rerun are those whose code reads the key, as the registry entries
declare it, and a key only scoring or tables read reruns no dataset, model or generation.
The table of every key is docs/rerun-scope.md (`REPROLM_WRITE_RERUN_SCOPE=1` writes it)."""

from __future__ import annotations

import os

import pytest

from default_config import DEFAULT
from reprolm.data.builders import BUILDERS
from reprolm.generate.prompts import PROMPT_BUILDERS, PROMPTSET_KEYS, RECIPE_KEYS
from reprolm.length import TARGET_FIELDS, target_fields
from reprolm.score.metrics import METRICS
from reprolm.stages import stage_of
from rerun_scope import PAGE, dotted, leaves, page, scope_of_every_key
from workflow_helpers import REPO, scratch_copy

pytestmark = [pytest.mark.workflow, pytest.mark.key_scan]

# What a model, a dataset or a generation is: none reruns for a key only scoring or tables read.
UPSTREAM_RULES = {"raw_source", "tokenizer", "build_base_model", "dataset", "finetune", "extrapolate", "generate"}
# Rules whose jobs read a study's own settings whole (its section, Study.settings).
TABLES = {"study_tables"}


@pytest.fixture(scope="module")
def scopes(tmp_path_factory):
    return {scope.key: scope for scope in scope_of_every_key(scratch_copy(tmp_path_factory.mktemp("scope")))}


def _named(value) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))


def _readers(registry, field: str) -> list:
    return [name for name in registry if field in target_fields(registry[name])]


def test_every_leaf_key_is_changed_to_a_value_the_workflow_accepts(scopes):
    """Every number, flag and list of numbers moves; a name or text may have no other value
    the default accepts (a model's only tokenizer): the page lists those."""
    assert list(scopes) == [key for key, _ in leaves(DEFAULT)]
    refused = {key: scope.before for key, scope in scopes.items() if not scope.accepted}
    assert not [dotted(key) for key, value in refused.items() if not _named(value)]
    assert len(refused) < len(scopes) / 5


def test_a_length_target_field_reruns_exactly_the_rules_whose_entries_read_it(scopes):
    by_rule = {"dataset": BUILDERS, "generate": PROMPT_BUILDERS, "score": METRICS}
    for field in TARGET_FIELDS[1:]:
        readers = {rule for rule, registry in by_rule.items() if _readers(registry, field)}
        for key, scope in scopes.items():
            if key[0] == "length_targets" and key[2] == field:
                assert set(scope.triggered) == readers | TABLES, (dotted(key), scope.triggered)
                if "dataset" not in readers and "generate" not in readers:
                    assert not UPSTREAM_RULES & set(scope.rules), (dotted(key), scope.rules)


def test_the_issues_window_edit_reruns_only_length_scores_and_what_is_above_them(scopes):
    scope = scopes[("length_targets", len(DEFAULT["length_targets"]) - 1, "pm")]
    assert scope.triggered == ("score", "study_tables")
    assert not UPSTREAM_RULES & set(scope.rules)
    assert 0 < scope.rules["score"] <= 22


def test_a_prompt_set_key_regenerates_only_where_generation_reads_it(scopes):
    for key, scope in scopes.items():
        # (nothing reruns for the prompt sets only jobs after the ExPO alpha search read)
        if key[0] == "promptsets" and key[2] not in ("dataset", "split") and scope.rules:
            assert ("generate" in scope.triggered) == (key[2] in PROMPTSET_KEYS), (dotted(key), scope.triggered)


def test_a_recipe_key_retrains_only_where_the_finetune_reads_it(scopes):
    for key, scope in scopes.items():
        if key[0] == "recipes" and key[2] not in ("dataset", "init") and scope.accepted:
            assert ("finetune" in scope.triggered) == (key[2] not in RECIPE_KEYS), (dotted(key), scope.triggered)
            if key[2] in RECIPE_KEYS:
                assert "generate" in scope.triggered


def test_a_metric_setting_rescores_and_nothing_before_it(scopes):
    for key, scope in scopes.items():
        if key[0] == "metrics":
            # (besides the score jobs, the download of an asset a setting names: an encoder)
            others = set(scope.triggered) - {"score", "study_tables"}
            assert "score" in scope.triggered and {stage_of(rule) for rule in others} <= {"download"}, dotted(key)
            assert not UPSTREAM_RULES & set(scope.rules), (dotted(key), scope.rules)


def test_the_committed_page_is_the_table_of_every_key(scopes):
    made = page(list(scopes.values()))
    if os.environ.get("REPROLM_WRITE_RERUN_SCOPE"):
        (REPO / PAGE).write_text(made)
    assert (REPO / PAGE).read_text() == made, (
        f"{PAGE} is not what the rerun scope gives: run REPROLM_WRITE_RERUN_SCOPE=1 pytest "
        "tests/test_rerun_scope.py and commit the page"
    )
