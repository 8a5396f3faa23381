"""What jobs would fetch from a hub, fetched by download rules instead: where each job finds
it, and that a job finds NLTK data where the download rule leaves it."""

from __future__ import annotations

from reprolm.config import lookups


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
    IFEval's sentence-count instruction is no longer left out."""
    import nltk

    from reprolm.score.lm_eval_bridge import unscorable_instructions, use_nltk_data

    before = list(nltk.data.path)
    try:
        if unscorable_instructions("ifeval"):
            (tmp_path / "punkt_tab" / "tokenizers" / "punkt_tab" / "english").mkdir(parents=True)
            use_nltk_data([tmp_path / "punkt_tab"])
            assert nltk.data.path[0] == str(tmp_path / "punkt_tab")
        assert unscorable_instructions("ifeval") == {}
    finally:
        nltk.data.path[:] = before


def test_provenance_says_whether_the_job_could_reach_the_hubs(monkeypatch):
    from reprolm.provenance.environment import execution_host

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert execution_host()["hub_offline"] is True
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert execution_host()["hub_offline"] is False
