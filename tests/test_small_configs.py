"""The embedded default (config/config.yaml) is composed of config/base.yaml and each study's
fragment (reprolm/studies/{study}/config.yaml); the per-study small configs
(tests/configs/config-{study}.yaml) are the base and one study's fragment, with only that
study's section trimmed: subsets of the default.

tests/test_determinism.py runs each of them clean and expects the same bytes as the default
run at the same paths; that holds only if every source, tokenizer, base model, dataset,
recipe, prompt set, judge and setting a small config keeps is the default's, unchanged. Only
the study's own section may be trimmed (fewer bases, recipes, tasks, judges), never changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from default_config import DEFAULT
from reprolm.checks import check_config
from reprolm.config import overlays
from reprolm.config.schema import validate_config
from workflow_helpers import REPO, scratch_copy, snakemake

CONFIGS = sorted((REPO / "tests" / "configs").glob("config-*.yaml"))
# Sections whose entries are kept or left out, each kept entry unchanged.
NAMED = ("sources", "tokenizers", "base_models", "datasets", "recipes", "promptsets", "judges", "lm_eval_suites")
# Settings kept whole or not at all.
WHOLE = ("seed", "length_targets", "generation", "metrics", "extrapolation", "_gsm8k_prompt")
# The claims this tiny run is not expected to show: each study's fragment holds its own.
CLAIMS = "claims"
# The keys of each study's section a small config may trim (a list to a sublist, a mapping
# to fewer entries or sublists, or the key left out); every other key is the default's.
TRIMMED = {
    "ruler": {"bases", "lm_eval_suite", "lm_eval_metrics"},
    "expo": {"recipes", "lm_eval_suite"},
    "flr": {"judges", "alignment"},
    "gem": {"recipes", "labels"},
    "harmony": {"bases", "tasks"},
}


def _is_trimmed(small, default) -> bool:
    """``small`` is ``default`` with items left out (recursively for mappings)."""
    if isinstance(default, list):
        return isinstance(small, list) and all(item in default for item in small)
    if isinstance(default, dict):
        return isinstance(small, dict) and all(
            key in default and (small[key] == default[key] or _is_trimmed(small[key], default[key])) for key in small
        )
    return small == default


def test_there_is_a_small_config_for_every_default_study():
    assert sorted(path.stem.removeprefix("config-") for path in CONFIGS) == sorted(DEFAULT["studies"])


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_small_config_keeps_the_default_params_of_everything_it_keeps(path: Path):
    small = overlays.load(path, REPO)
    study = path.stem.removeprefix("config-")
    assert small["studies"] == [study]
    assert set(small) <= {"studies", study, CLAIMS, *NAMED, *WHOLE}, sorted(set(small))
    for claim, why in small.get(CLAIMS, {}).get("not_expected", {}).items():
        assert why == DEFAULT[CLAIMS]["not_expected"][claim], f"{path.name}: claims.not_expected.{claim}"
    for section in NAMED:
        for name, spec in small.get(section, {}).items():
            assert spec == DEFAULT[section][name], f"{path.name}: {section}.{name} differs from config/config.yaml"
    for key in WHOLE:
        if key in small:
            assert small[key] == DEFAULT[key], f"{path.name}: {key} differs from config/config.yaml"
    assert small["seed"] == DEFAULT["seed"]
    for key, value in small[study].items():
        if key in TRIMMED[study]:
            assert _is_trimmed(value, DEFAULT[study][key]), (
                f"{path.name}: {study}.{key} is not a subset of the default's"
            )
        else:
            assert value == DEFAULT[study][key], f"{path.name}: {study}.{key} differs from config/config.yaml"
    assert set(DEFAULT[study]) - set(small[study]) <= TRIMMED[study]


def test_the_default_is_the_base_and_each_default_studys_fragment():
    """No fragment sets what the base or another fragment sets (an entry of a named section,
    or a top-level key), so the order they are laid in changes nothing."""
    written = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    fragments = [f"reprolm/studies/{study}/config.yaml" for study in written["studies"]]
    assert written["extends"] == ["config/base.yaml", *fragments]
    set_by: dict[tuple, str] = {}
    for name in written["extends"]:
        part = yaml.safe_load((REPO / name if name.startswith("config/") else overlays.PACKAGE_ROOT / name).read_text())
        for key, value in part.items():
            entries = value if key in NAMED else value["not_expected"] if key == CLAIMS else [None]
            for entry in entries:
                assert (key, entry) not in set_by, f"{name}: {key}.{entry} is set by {set_by[(key, entry)]} too"
                set_by[(key, entry)] = name
    study_keys = {key for key, entry in set_by if entry is None and key in DEFAULT["studies"]}
    assert {key: set_by[(key, None)] for key in study_keys} == {
        study: f"reprolm/studies/{study}/config.yaml" for study in DEFAULT["studies"]
    }


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_small_config_adds_its_study_to_the_base_in_a_few_lines(path: Path):
    study = path.stem.removeprefix("config-")
    written = yaml.safe_load(path.read_text())
    assert written["extends"] == ["config/base.yaml", f"reprolm/studies/{study}/config.yaml"]
    assert set(written) == {"extends", "studies", study}, sorted(written)
    assert len(path.read_text().splitlines()) <= 15, path.name


def test_trimming_is_told_from_changing():
    assert _is_trimmed([1, 3], [1, 2, 3]) and not _is_trimmed([1, 4], [1, 2, 3])
    assert _is_trimmed({"a": [1], "b": 2}, {"a": [1, 2], "b": 2, "c": 3})
    assert not _is_trimmed({"b": 5}, {"b": 2}) and not _is_trimmed({"d": 1}, {"b": 2})


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.stem)
def test_small_config_passes_the_workflows_config_checks(path: Path, monkeypatch):
    """What the workflow checks before any job (the schema, then the cross-key checks)."""
    monkeypatch.chdir(REPO)
    small = overlays.load(path, REPO)
    schema = REPO / "workflow" / "schemas" / "config.schema.yaml"
    validate_config(small, schema)
    check_config(small, schema)


@pytest.mark.workflow
@pytest.mark.parametrize("study", ["ruler", "harmony"])
def test_small_config_that_no_test_runs_plans_a_run(study, tmp_path):
    """Ruler's and Harmony's small configs run nowhere else in the suite (the determinism test
    runs the others): a dry run parses the workflow with them, whatever top-level section
    (``judges``, ...) they leave out."""
    work = scratch_copy(tmp_path)
    result = snakemake(work, "-n", "--configfile", str(REPO / "tests" / "configs" / f"config-{study}.yaml"))
    assert "build_base_model" in result.stdout
