"""What jobs would fetch from a hub, fetched by download rules instead: where each job finds
it, and that a job finds NLTK data where the download rule leaves it."""

from __future__ import annotations

import pytest

from reprolm.config import lookups


def test_judge_rules_split_by_name_regex_with_nothing_matched_by_an_empty_side():
    import re

    from reprolm.score.judges import judge_name_regex

    judges = {"tiny.rm": {"kind": "reward_model"}, "gpt4": {"kind": "chat_endpoint"}, "ae": {"kind": "alpaca_eval"}}
    assert judge_name_regex(judges, api=False) == r"tiny\.rm"
    api = judge_name_regex(judges, api=True)
    assert re.fullmatch(api, "gpt4") and re.fullmatch(api, "ae") and not re.fullmatch(api, "tiny.rm")
    nothing = judge_name_regex({"gpt4": {"kind": "chat_endpoint"}}, api=False)
    assert not any(re.fullmatch(nothing, name) for name in ("", "gpt4", "x"))


def test_each_kind_of_hub_need_has_its_place_under_resources(tmp_path, monkeypatch):
    assert lookups.task_data({"task": "boolq", "source": "boolq_docs"}) == "resources/raw/boolq_docs"
    assert lookups.task_data({"task": "boolq"}) == "resources/lm_eval_data/boolq"
    ifeval = {"tasks": [{"task": "ifeval"}, {"task": "gsm8k"}]}
    assert lookups.nltk_data(ifeval) == ["resources/nltk_data/punkt_tab"]
    assert lookups.nltk_data({**ifeval, "nltk_data": []}) == []
    assert lookups.nltk_data({"tasks": [{"task": "gsm8k"}]}) == []
    encoder = {"encoder": "sentence-transformers/bert-large-nli-stsb-mean-tokens"}
    folder = "resources/hub_models/sentence-transformers--bert-large-nli-stsb-mean-tokens"
    assert lookups.hub_encoder(encoder) == folder
    assert lookups.hub_model_repo({"metrics": {"diversity": encoder}}, folder) == encoder["encoder"]
    assert lookups.hub_encoder({"encoder": "packaged"}) is None and lookups.hub_encoder({}) is None
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_encoder").mkdir()
    assert lookups.hub_encoder({"encoder": "my_encoder"}) is None


def test_ifeval_scores_every_instruction_once_nltk_finds_the_downloaded_package(tmp_path):
    """nltk.download(package, download_dir=D) leaves D/tokenizers/punkt_tab; pointed there,
    IFEval's sentence-count instruction is no longer left out. NLTK's own search path is
    replaced by an empty folder first, so a punkt_tab installed on the machine does not count."""
    import nltk

    from reprolm.score.lm_eval_bridge import unscorable_instructions, use_nltk_data

    before = list(nltk.data.path)
    try:
        nltk.data.path[:] = [str(tmp_path / "empty")]
        assert list(unscorable_instructions("ifeval")) == ["length_constraints:number_sentences"]
        (tmp_path / "punkt_tab" / "tokenizers" / "punkt_tab" / "english").mkdir(parents=True)
        use_nltk_data([tmp_path / "punkt_tab"])
        assert nltk.data.path[0] == str(tmp_path / "punkt_tab")
        assert unscorable_instructions("ifeval") == {}
    finally:
        nltk.data.path[:] = before


def test_an_lm_eval_tasks_data_is_recorded_by_what_lm_eval_loaded(tmp_path):
    """The download rule's manifest: per task, the dataset lm-eval read and its documents per
    split (here a task pointed at local documents; on the submitting host, the hub's)."""
    import json

    from reprolm.data.hub_assets import MANIFEST, cache_lm_eval_task
    from reprolm.data.task_docs import write_task_docs
    from reprolm.data.upstream import make_fixture
    from reprolm.score.lm_eval_bridge import TaskSpec, task_config

    write_task_docs(make_fixture("boolq", n=10, seed=3), tmp_path / "boolq")
    config = task_config(TaskSpec("boolq", "boolq", 0, "acc,none", tmp_path / "boolq"))
    manifest = cache_lm_eval_task(config, tmp_path / "lm_eval_data" / "boolq")
    assert manifest == {
        "boolq": {"dataset_path": "parquet", "dataset_name": None, "documents": {"train": 10, "validation": 10}}
    }
    assert json.loads((tmp_path / "lm_eval_data" / "boolq" / MANIFEST).read_text()) == manifest


def test_a_download_that_cannot_reach_the_hub_leaves_nothing_behind(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from reprolm.data.hub_assets import download_hub_model

    # huggingface_hub reads the variable when first imported, which an earlier test may have done.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(
        OSError,
        match=r"^hub model 'sentence-transformers/bert-large-nli-stsb-mean-tokens' could "
        r"not be downloaded: .*HF_HUB_OFFLINE",
    ):
        download_hub_model("sentence-transformers/bert-large-nli-stsb-mean-tokens", tmp_path / "encoder")
    assert list(tmp_path.iterdir()) == []


def test_provenance_says_whether_the_job_could_reach_the_hubs(monkeypatch):
    from reprolm.provenance.environment import execution_host

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert execution_host()["hub_offline"] is True
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert execution_host()["hub_offline"] is False
