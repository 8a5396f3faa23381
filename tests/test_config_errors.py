"""Configs refused before any job runs, and base models claimed by the right rule (no run needed)."""

from __future__ import annotations

import json

import pytest
import yaml

from reprolm.checks import LM_EVAL_TASK_CACHE
from reprolm.config import overlays
from workflow_helpers import dry_run_jobs, scratch_copy, snakemake

pytestmark = pytest.mark.workflow


def test_task_without_training_split_is_refused_before_any_job(tmp_path):
    work = scratch_copy(tmp_path)
    config = overlays.load(work / "config/config.yaml", work)
    config["harmony"]["tasks"].append({"name": "truthfulqa", "task": "truthfulqa_mc2", "metric": "acc,none"})
    (work / "bad.yaml").write_text(yaml.safe_dump(config))
    result = snakemake(work, "--configfile", "bad.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "tasks without a training split cannot be trained on: ['truthfulqa']" in output
    assert "configured tasks that have one: ['arc_easy', 'boolq', 'cola', 'gsm8k']" in output
    assert not (work / "results").exists()


def test_bad_config_fails_before_any_job_naming_the_file_and_key(tmp_path):
    work = scratch_copy(tmp_path)
    overlay = {"extends": "config/config.yaml", "generation": {"backend": "tpu"}}
    (work / "bad.yaml").write_text(yaml.safe_dump(overlay))
    result = snakemake(work, "--configfile", "bad.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "bad.yaml: generation.backend: 'tpu' is not one of ['transformers', 'vllm']" in output
    # A typo in the middle file of a chain of overlays: that file is named.
    (work / "typo.yaml").write_text(
        yaml.safe_dump({"extends": "config/config.yaml", "ruler": {"recipes": ["ruler", "vanila"]}})
    )
    (work / "top.yaml").write_text(yaml.safe_dump({"extends": "typo.yaml", "seed": 7}))
    result = snakemake(work, "--configfile", "top.yaml", check=False)
    assert result.returncode != 0
    allowed = "['ce', 'dpo', 'flr_dpo', 'flr_feedback', 'flr_kto', 'gem_linear', 'gem_logsigmoid', 'reward', 'ruler', 'sft', 'vanilla']"
    assert f"typo.yaml: ruler.recipes: 'vanila' is not declared; allowed: {allowed}" in result.stdout + result.stderr
    # Nothing made: no results, and resources holds only the lm-eval task answers it started with.
    assert not (work / "results").exists()
    assert [p.relative_to(work).as_posix() for p in (work / "resources").rglob("*")] == [LM_EVAL_TASK_CACHE]


def test_built_and_hub_base_models_go_to_their_own_rules(tmp_path):
    """One output pattern, two rules: each base name is claimed by the rule of its config section."""
    work = scratch_copy(tmp_path)
    config = overlays.load(work / "config/config.yaml", work)
    config["base_models"]["hub_llama"] = {"hub": {"path": "example/tiny-llama"}}
    config["ruler"]["baselines"] = ["hub_llama"]
    (work / "mixed.yaml").write_text(yaml.safe_dump(config))
    jobs = dry_run_jobs(work, "--configfile", "mixed.yaml")
    built = sorted(name for name, spec in config["base_models"].items() if "build" in spec)
    assert sorted(w["base"] for rule, w in jobs if rule == "build_base_model") == built
    assert [w["base"] for rule, w in jobs if rule == "download_base_model"] == ["hub_llama"]


def test_config_on_the_command_line_is_laid_over_the_embedded_default(tmp_path):
    """Without --configfile the Snakefile reads config/config.yaml itself (with libyaml);
    `--config` still applies on top of it, as over Snakemake's own `configfile:`, down to a
    nested key."""
    work = scratch_copy(tmp_path)
    rules = {rule for rule, _ in dry_run_jobs(work, "--config", "studies=[ruler]")}
    assert {"finetune", "generate", "score"} <= rules
    # ExPO, FLR, GEM and Harmony left out: none of their own steps is planned.
    assert not rules & {"extrapolate", "alpha_search", "train_before_test", "pair_accuracy", "rating_agreement"}
    bad = snakemake(work, "-n", "--config", "generation={backend: tpu}", check=False)
    assert bad.returncode != 0
    assert "--config: generation.backend: 'tpu' is not one of ['transformers', 'vllm']" in bad.stdout + bad.stderr


def test_a_misspelt_base_model_in_a_study_is_named_with_its_key_before_any_job(tmp_path):
    work = scratch_copy(tmp_path)
    (work / "typo.yaml").write_text(
        yaml.safe_dump({"extends": "config/config.yaml", "ruler": {"bases": ["tiny_lama"]}})
    )
    result = snakemake(work, "-n", "--configfile", "typo.yaml", check=False)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    allowed = "['tiny_llama', 'tiny_llama_small', 'tiny_neox', 'tiny_qwen2']"
    assert (
        f"typo.yaml: ruler.bases: 'tiny_lama' is not declared; allowed: {allowed}; did you mean 'tiny_llama'?" in output
    )
    assert "KeyError" not in output


def test_every_studys_bases_are_checked_where_its_section_lists_them():
    """Each study of the default config, a base of its models misspelt where its section lists
    it (``flr.alignment.bases`` for FLR), and a baseline: a config error naming that key."""
    import copy

    from reprolm.checks import check_config
    from reprolm.errors import ConfigError
    from reprolm.studies import enabled_studies
    from reprolm.studies.base import listing_key
    from workflow_helpers import REPO

    schema = REPO / "workflow/schemas/config.schema.yaml"
    default = overlays.load(REPO / "config/config.yaml", REPO)
    keys = {}
    for study in enabled_studies(default):
        base = study.models(default)[0][0]
        config = copy.deepcopy(default)
        key = listing_key(config[study.name], base, study.name)
        listing = config[study.name]
        for part in key.split(".")[1:]:
            listing = listing[part]
        listing[listing.index(base)] = base[:-1]
        with pytest.raises(ConfigError) as refused:
            check_config(config, schema)
        assert str(refused.value).startswith(f"{key}: {base[:-1]!r} is not declared; allowed: [")
        assert str(refused.value).endswith(f"did you mean {base!r}?")
        keys[study.name] = key
    assert keys == {
        "ruler": "ruler.bases",
        "harmony": "harmony.bases",
        "expo": "expo.bases",
        "flr": "flr.alignment.bases",
        "gem": "gem.bases",
    }
    config = copy.deepcopy(default)
    config["ruler"]["baselines"] = ["tiny_nox"]
    with pytest.raises(
        ConfigError, match=r"^ruler\.baselines: 'tiny_nox' is not declared; .* did you mean 'tiny_neox'\?$"
    ):
        check_config(config, schema)


def test_a_misspelt_schema_key_gets_a_did_you_mean_as_registry_names_do(tmp_path):
    work = scratch_copy(tmp_path)
    (work / "typo.yaml").write_text(
        yaml.safe_dump({"extends": "config/config.yaml", "recipes": {"ruler": {"learning_rte": 0.001}}})
    )
    result = snakemake(work, "-n", "--configfile", "typo.yaml", check=False)
    assert result.returncode != 0
    assert (
        "typo.yaml: recipes.ruler: 'learning_rte' is not a key of this section; did you mean 'learning_rate'?"
        in result.stdout + result.stderr
    )


def test_unknown_keys_are_named_before_missing_ones_in_every_section_and_study_section():
    import copy

    from reprolm.checks import check_config
    from reprolm.config.schema import validate_config
    from reprolm.errors import ConfigError
    from workflow_helpers import REPO

    schema = REPO / "workflow/schemas/config.schema.yaml"
    default = overlays.load(REPO / "config/config.yaml", REPO)

    def refused(change) -> str:
        config = copy.deepcopy(default)
        change(config)
        with pytest.raises(ConfigError) as error:
            validate_config(config, schema)
            check_config(config, schema)
        return str(error.value)

    # A required key misspelt is missing too; its spelling is what is reported.
    def misspell_required(config):
        config["recipes"]["ruler"]["learning_rte"] = config["recipes"]["ruler"].pop("learning_rate")

    assert refused(misspell_required) == (
        "recipes.ruler: 'learning_rte' is not a key of this section; did you mean 'learning_rate'?"
    )
    assert refused(lambda c: c["promptsets"]["tlg"]["sampling"].update(max_new_token=64)) == (
        "promptsets.tlg.sampling: 'max_new_token' is not a key of this section; did you mean 'max_new_tokens'?"
    )
    # A study's section, checked against its study's own schema.
    assert refused(lambda c: c["gem"].update(basses=["tiny_llama"])) == (
        "gem: 'basses' is not a key of this section; did you mean 'bases'?"
    )
    # Nothing close: the keys allowed there.
    assert refused(lambda c: c["sources"]["eli5"].update(zzz=1)) == (
        "sources.eli5: 'zzz' is not a key of this section; "
        "the keys allowed here: ['columns', 'files', 'fixture', 'hub', 'released', 'schema']"
    )


class HubStandIn:
    """A stand-in for the hub (none is reachable here): HfApi.model_info and dataset_info
    answer for the ids in ``known`` and otherwise raise what huggingface_hub raises for the
    hub's 404 answers (through its own hf_raise_for_status); every question is recorded."""

    def __init__(self, monkeypatch, known: set[tuple[str, str]], revisions: dict[str, set[str]] | None = None):
        from huggingface_hub import HfApi

        self.known, self.revisions, self.asked = known, revisions or {}, []
        monkeypatch.setattr(HfApi, "model_info", lambda api, repo, **options: self.answer("model", repo, **options))
        monkeypatch.setattr(HfApi, "dataset_info", lambda api, repo, **options: self.answer("dataset", repo, **options))

    def answer(self, kind: str, repo: str, revision=None, timeout=None):
        import httpx2
        from huggingface_hub.utils import hf_raise_for_status

        self.asked.append((kind, repo, revision))
        assert timeout is not None and timeout <= 5, "a question without a short timeout"
        if (kind, repo) not in self.known:
            code = "RepoNotFound"
        elif revision is not None and revision not in self.revisions.get(repo, set()):
            code = "RevisionNotFound"
        else:
            return {"id": repo}
        url = f"https://huggingface.co/api/{kind}s/{repo}"
        hf_raise_for_status(httpx2.Response(404, headers={"X-Error-Code": code}, request=httpx2.Request("GET", url)))


def _paper_config() -> dict:
    from reprolm.config import overlays
    from workflow_helpers import REPO

    return overlays.load(REPO / "config/paper.yaml", root=REPO)


def test_a_misspelt_hub_id_is_a_config_error_naming_its_key(monkeypatch, tmp_path):
    from reprolm.config.hub_ids import check_hub_ids, config_hub_ids
    from reprolm.errors import ConfigError

    config = _paper_config()
    ids = config_hub_ids(config)
    hub = HubStandIn(monkeypatch, {(hub_id.kind, hub_id.repo) for hub_id in ids})
    # Every kind of place a paper config names a hub id.
    assert {hub_id.key.split(".", 2)[0] + "." + hub_id.key.rsplit(".", 1)[1] for hub_id in ids} == {
        "base_models.path",
        "base_models.chat_template_from",
        "sources.path",
        "metrics.encoder",
    }
    assert not any(hub_id.repo in ("parquet", "json", "csv") for hub_id in ids)
    config["base_models"]["llama3_8b_instruct"]["hub"]["path"] = "meta-llama/Llama-3-8b-Instruc"
    cache = tmp_path / "hub_ids.json"
    warnings = []
    with pytest.raises(ConfigError) as refused:
        check_hub_ids(config, cache, warn=warnings.append, environ={})
    assert str(refused.value) == (
        "base_models.llama3_8b_instruct.hub.path: 'meta-llama/Llama-3-8b-Instruc' is not a model on the hub "
        "(or a private one this host's token cannot see); check its spelling"
    )
    assert warnings == []
    # Each distinct id asked once.
    assert len(hub.asked) == len({hub_id.cache_key for hub_id in config_hub_ids(config)}) == len(set(hub.asked))

    config = _paper_config()
    check_hub_ids(config, cache, warn=warnings.append, environ={})
    assert warnings == [] and len(json.loads(cache.read_text())) == len(set(hub.asked)) - 1
    # Confirmed ids are not asked again.
    hub.asked.clear()
    check_hub_ids(config, cache, warn=warnings.append, environ={})
    assert hub.asked == []

    config["sources"]["helpsteer"]["hub"]["revision"] = "no-such-tag"
    with pytest.raises(ConfigError, match=r"^sources\.helpsteer\.hub\.revision: 'no-such-tag' is not a revision "):
        check_hub_ids(config, cache, warn=warnings.append, environ={})
    assert hub.asked == [("dataset", "nvidia/HelpSteer", "no-such-tag")]


def test_hub_ids_are_named_unchecked_once_offline_or_unanswered_and_never_fail_the_run(monkeypatch, tmp_path):
    from huggingface_hub import HfApi

    from reprolm.config.hub_ids import check_hub_ids, config_hub_ids

    config = _paper_config()
    config["base_models"]["llama3_8b_instruct"]["hub"]["path"] = "meta-llama/Llama-3-8b-Instruc"
    named = len({hub_id.cache_key for hub_id in config_hub_ids(config)})
    asked = []

    def unreachable(api, repo, **options):
        import httpx2

        asked.append(repo)
        raise httpx2.ConnectError("[Errno -2] Name or service not known")

    # A stand-in for a host without network.
    monkeypatch.setattr(HfApi, "model_info", unreachable)
    monkeypatch.setattr(HfApi, "dataset_info", unreachable)
    warnings = []
    check_hub_ids(config, tmp_path / "hub_ids.json", warn=warnings.append, environ={"HF_HUB_OFFLINE": "1"})
    assert asked == [] and len(warnings) == 1
    assert warnings[0].startswith(f"{named} hub ids of the config unchecked: HF_HUB_OFFLINE is set")
    warnings.clear()
    check_hub_ids(config, tmp_path / "hub_ids.json", warn=warnings.append, environ={})
    # One question tells the hub is not reachable: the rest are not asked.
    assert len(asked) == 1 and warnings == [
        f"{named} hub ids of the config unchecked: the hub did not answer "
        "(ConnectError: [Errno -2] Name or service not known)"
    ]
    assert not (tmp_path / "hub_ids.json").exists()


def test_a_dry_run_offline_names_the_configs_hub_ids_unchecked_once(tmp_path):
    work = scratch_copy(tmp_path)
    overlay = {
        "extends": "config/config.yaml",
        "base_models": {"hub_llama": {"hub": {"path": "example/tiny-llama"}}},
        "ruler": {"baselines": ["hub_llama"]},
    }
    (work / "hub.yaml").write_text(yaml.safe_dump(overlay))
    result = snakemake(work, "-n", "--configfile", "hub.yaml")
    output = result.stdout + result.stderr
    assert output.count("hub id of the config unchecked") == 1
    assert "1 hub id of the config unchecked: HF_HUB_OFFLINE is set" in output
    # The default names no hub id: nothing to say.
    assert "unchecked" not in (lambda r: r.stdout + r.stderr)(snakemake(work, "-n"))


def test_fewshot_as_multiturn_without_the_chat_template_and_a_tlg_only_model_not_a_baseline_are_refused():
    import copy

    from reprolm.checks import check_config
    from reprolm.errors import ConfigError
    from workflow_helpers import REPO

    schema = REPO / "workflow/schemas/config.schema.yaml"
    default = overlays.load(REPO / "config/config.yaml", REPO)
    config = copy.deepcopy(default)
    suite = next(iter(config["lm_eval_suites"]))
    config["lm_eval_suites"][suite].update(apply_chat_template=False, fewshot_as_multiturn=True)
    with pytest.raises(
        ConfigError, match=rf"^lm_eval_suites\.{suite}\.fewshot_as_multiturn: .* apply_chat_template: true$"
    ):
        check_config(config, schema)
    config = copy.deepcopy(default)
    config["ruler"]["tlg_only"] = [config["ruler"]["bases"][0]]
    with pytest.raises(ConfigError, match=r"^ruler\.tlg_only: "):
        check_config(config, schema)
