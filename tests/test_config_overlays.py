"""Config overlays: a config file with `extends: PATH` is laid over the file it names, in the
library and in a real Snakemake run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from default_config import DEFAULT
from reprolm.config import overlays
from reprolm.errors import ConfigError
from workflow_helpers import dry_run_details, scratch_copy, snakemake


def _write(path: Path, config: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


BASE = {
    "seed": 42,
    "studies": ["ruler", "expo"],
    "recipes": {"sft": {"learning_rate": 0.003, "epochs": 8}, "dpo": {"beta": 0.1}},
    "ruler": {"bases": ["a", "b"], "compat": "paper"},
    "expo": {"alphas": [0.1, 0.3]},
}


def test_an_overlay_merges_mappings_replaces_lists_and_scalars_and_removes_keys_set_to_null(tmp_path):
    _write(tmp_path / "base.yaml", BASE)
    overlay = _write(
        tmp_path / "overlay.yaml",
        {
            "extends": "base.yaml",
            "seed": 7,
            "studies": ["ruler"],
            "recipes": {"sft": {"epochs": 2}, "dpo": None, "kto": {"beta": 0.2}},
            "ruler": {"bases": ["b"]},
            "expo": None,
        },
    )
    assert overlays.load(overlay, tmp_path) == {
        "seed": 7,
        "studies": ["ruler"],
        "recipes": {"sft": {"learning_rate": 0.003, "epochs": 2}, "kto": {"beta": 0.2}},
        "ruler": {"bases": ["b"], "compat": "paper"},
    }
    # The base's key order is kept, new keys come after.
    assert list(overlays.load(overlay, tmp_path)["recipes"]) == ["sft", "kto"]
    # A file without `extends` is itself.
    assert overlays.load(tmp_path / "base.yaml", tmp_path) == BASE


def test_overlays_chain_and_a_path_is_read_from_the_working_directory_or_beside_the_file(tmp_path):
    _write(tmp_path / "config" / "base.yaml", BASE)
    # From the working directory ...
    _write(tmp_path / "variants" / "middle.yaml", {"extends": "config/base.yaml", "seed": 1, "expo": None})
    # ... or beside the extending file.
    top = _write(tmp_path / "variants" / "top.yaml", {"extends": "middle.yaml", "ruler": {"compat": "original"}})
    resolved = overlays.load(top, tmp_path)
    assert resolved["seed"] == 1 and "expo" not in resolved
    assert resolved["ruler"] == {"bases": ["a", "b"], "compat": "original"}
    assert resolved["recipes"] == BASE["recipes"]


def test_a_cycle_is_refused_naming_both_files(tmp_path):
    first = _write(tmp_path / "first.yaml", {"extends": "second.yaml", "seed": 1})
    _write(tmp_path / "second.yaml", {"extends": "first.yaml", "seed": 2})
    with pytest.raises(ConfigError, match=r"second\.yaml: extends: first\.yaml is already in the chain") as error:
        overlays.load(first, tmp_path)
    assert f"{tmp_path / 'first.yaml'} -> {tmp_path / 'second.yaml'} -> {tmp_path / 'first.yaml'}" in str(error.value)
    itself = _write(tmp_path / "itself.yaml", {"extends": "itself.yaml"})
    with pytest.raises(ConfigError, match=r"itself\.yaml: extends: itself\.yaml is already in the chain"):
        overlays.load(itself, tmp_path)


def test_a_missing_base_or_a_null_on_a_key_the_base_lacks_is_refused_naming_the_file_and_key(tmp_path):
    overlay = _write(tmp_path / "sub" / "overlay.yaml", {"extends": "config/missing.yaml"})
    with pytest.raises(ConfigError) as error:
        overlays.load(overlay, tmp_path)
    assert str(error.value) == (
        f"{overlay}: extends: config/missing.yaml: no such config file (looked for "
        f"{tmp_path / 'config/missing.yaml'} or {tmp_path / 'sub/config/missing.yaml'} or "
        f"{overlays.PACKAGE_ROOT / 'config/missing.yaml'})"
    )
    # A file that is not YAML is named with the line where its parse stopped.
    (tmp_path / "broken.yaml").write_text("seed: 42\nrecipes: {dpo: [\n")
    cut = _write(tmp_path / "cut.yaml", {"extends": "broken.yaml"})
    with pytest.raises(ConfigError, match=r"(?s)broken\.yaml: not valid YAML: .*broken\.yaml\", line 3"):
        overlays.load(cut, tmp_path)
    # A misspelt study in a fragment's path is given the closest that is there.
    misspelt = _write(tmp_path / "misspelt.yaml", {"extends": ["reprolm/studies/rulr/config.yaml"]})
    with pytest.raises(
        ConfigError,
        match=r"rulr/config\.yaml: no such config file .*; did you mean reprolm/studies/ruler/config\.yaml\?$",
    ):
        overlays.load(misspelt, tmp_path)
    _write(tmp_path / "base.yaml", BASE)
    typo = _write(tmp_path / "typo.yaml", {"extends": "base.yaml", "recipes": {"dpoo": None}})
    with pytest.raises(ConfigError, match=r"typo\.yaml: recipes\.dpoo: set to null to remove it, but .*base\.yaml has"):
        overlays.load(typo, tmp_path)
    for wrong_value in ([], ["base.yaml", 3], {"base": "base.yaml"}):
        wrong = _write(tmp_path / "wrong.yaml", {"extends": wrong_value})
        with pytest.raises(ConfigError, match=r"wrong\.yaml: extends: expected the path of a config file or a list"):
            overlays.load(wrong, tmp_path)


def test_a_list_of_files_is_composed_each_over_the_one_before_and_is_its_own_base(tmp_path):
    """How the embedded default is made of config/base.yaml and the studies' fragments: a
    later file's values win, its nulls remove what an earlier file set, and a run of the
    composing file (or of an overlay of it) is named by that file, not by its first part."""
    _write(tmp_path / "base.yaml", BASE)
    _write(tmp_path / "part.yaml", {"seed": 9, "recipes": {"dpo": None, "kto": {"beta": 0.1}}})
    composed = _write(tmp_path / "composed.yaml", {"extends": ["base.yaml", "part.yaml"], "studies": ["ruler"]})
    resolved = overlays.load(composed, tmp_path)
    assert resolved["seed"] == 9 and resolved["studies"] == ["ruler"]
    assert "dpo" not in resolved["recipes"] and resolved["recipes"]["kto"] == {"beta": 0.1}
    assert resolved["ruler"] == BASE["ruler"]
    overlay = _write(tmp_path / "overlay.yaml", {"extends": "composed.yaml", "seed": 3})
    assert overlays.extends_chain(overlay, tmp_path) == [overlay, tmp_path / "composed.yaml"]
    assert overlays.extends_chain(composed, tmp_path) == [composed]
    # An error names the file whose value the merge holds: the part that set it.
    _write(tmp_path / "part.yaml", {"recipes": {"kto": {"beta": "high"}}})
    with pytest.raises(ConfigError, match=r"^part\.yaml: recipes\.kto\.beta: must be a number"):
        with overlays.naming_the_file([composed], root=tmp_path):
            raise ConfigError("recipes.kto.beta: must be a number")


def test_the_extends_that_snakemake_keeps_of_several_configfiles_is_read_beside_its_file(tmp_path):
    first = _write(tmp_path / "a" / "first.yaml", {"extends": "base.yaml"})
    second = _write(tmp_path / "b" / "second.yaml", {"seed": 3})
    assert overlays.overlay_origin([first, second]) == first
    assert overlays.overlay_origin([second]) == second


def test_an_error_names_the_layer_whose_value_the_merge_holds_at_its_key():
    layers = [
        ("--config", {"generation": {"batch_size": 4}}),
        ("top.yaml", {"recipes": {"dpo": {"beta": 0.2}}, "ruler": {"bases": ["c"]}}),
        ("base.yaml", BASE),
    ]
    assert overlays.key_origin(("generation", "batch_size"), layers) == "--config"
    assert overlays.key_origin(("recipes", "dpo", "beta"), layers) == "top.yaml"
    # top.yaml sets recipes, but not recipes.sft: base.yaml's value is kept.
    assert overlays.key_origin(("recipes", "sft", "epochs"), layers) == "base.yaml"
    # A list replaces the base's whole: an item's key is the replacing file's.
    assert overlays.key_origin(("ruler", "bases", "0"), layers) == "top.yaml"
    assert overlays.key_origin(("ruler", "compat"), layers) == "base.yaml"
    assert overlays.key_origin(("judges",), layers) is None


def test_a_config_error_raised_inside_is_named_with_its_file(tmp_path):
    _write(tmp_path / "base.yaml", BASE)
    top = _write(tmp_path / "top.yaml", {"extends": "base.yaml", "seed": 7})
    with pytest.raises(ConfigError) as error, overlays.naming_the_file([top], {"ruler": {"bases": ["z"]}}, tmp_path):
        raise ConfigError("ruler.compat: 'nope' is not one of ['paper', 'original']")
    assert str(error.value) == "base.yaml: ruler.compat: 'nope' is not one of ['paper', 'original']"
    with pytest.raises(ConfigError) as error, overlays.naming_the_file([top], {"ruler": {"bases": ["z"]}}, tmp_path):
        raise ConfigError("ruler.bases[0]: 'z' is not declared")
    assert str(error.value) == "--config: ruler.bases[0]: 'z' is not declared"
    # A message that does not open with a key held by any file is left as it was.
    for message in ("judges: none is declared", f"{top}: extends: broken", "study 'x' is enabled"):
        with pytest.raises(ConfigError) as error, overlays.naming_the_file([top], {}, tmp_path):
            raise ConfigError(message)
        assert str(error.value) == message


@pytest.mark.slow
def test_snakemake_runs_an_overlay_with_its_changes_and_without_the_study_it_removes(tmp_path):
    assert "flr" in DEFAULT["studies"] and DEFAULT["expo"]["alpha_search"]["alphas"] == [0.1, 0.3, 0.5]
    work = scratch_copy(tmp_path)
    studies = [study for study in DEFAULT["studies"] if study != "flr"]
    _write(
        work / "variant.yaml",
        {"extends": "config/config.yaml", "studies": studies, "flr": None, "expo": {"alpha_search": {"alphas": [0.2]}}},
    )
    outputs = [output for job in dry_run_details(work, "--configfile", "variant.yaml") for output in job.outputs]
    assert "results/tables/expo" in outputs and "results/tables/gem" in outputs
    assert [output for output in outputs if "flr" in output] == []
    extrapolated = sorted({output for output in outputs if output.startswith("results/models/") and "+expo" in output})
    assert extrapolated == ["results/models/tiny_llama/dpo+expo0.2", "results/models/tiny_llama/sft+expo0.2"]
    # A broken chain stops Snakemake before any job, naming the file it looked for.
    _write(work / "broken.yaml", {"extends": "config/default.yaml"})
    result = snakemake(work, "-n", "--configfile", "broken.yaml", check=False)
    assert result.returncode != 0
    assert "broken.yaml: extends: config/default.yaml: no such config file" in result.stdout + result.stderr
