"""`reprolm lock`: every remote input of a config resolved to an immutable revision, against
local stand-ins for the hub's API and the file servers (tests/hub_standin.py); downloads
reading the lock; a run of an unlocked config refused."""

from __future__ import annotations

import hashlib

import pytest
import yaml

from hub_standin import NLTK_INDEX, FileServerStandIn, HubAPIStandIn, nltk_index
from reprolm import lock
from reprolm.cli import main

PARQUET_URL = "https://huggingface.co/datasets/org/files/resolve/" + "ab" * 20 + "/test.parquet"
NLTK_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/tokenizers/punkt_tab.zip"
COMMITS = {
    ("model", "org/base"): "1" * 40,
    ("model", "org/chat"): "2" * 40,
    ("model", "org/encoder"): "3" * 40,
    ("dataset", "org/prompts"): "4" * 40,
    ("dataset", "allenai/ai2_arc"): "5" * 40,
}
CONFIG = {
    "base_models": {"base": {"hub": {"path": "org/base", "chat_template_from": "org/chat"}}},
    "sources": {
        "prompts": {"schema": "prompts", "hub": {"path": "org/prompts", "name": "default", "split": "train"}},
        "files": {
            "schema": "prompts",
            "hub": {"path": "parquet", "data_files": {"test": PARQUET_URL}, "split": "test"},
        },
    },
    "metrics": {"diversity": {"encoder": "org/encoder"}},
    "lm_eval_suites": {
        "general": {
            "tasks": [{"name": "arc", "task": "arc_challenge", "num_fewshot": 0, "metric": "acc,none"}],
            "nltk_data": ["punkt_tab"],
        }
    },
}


@pytest.fixture
def upstream(monkeypatch):
    """The hub's commits and the files' bytes, as the stand-ins serve them (a test changes
    them to move an input upstream)."""
    files = {
        PARQUET_URL: b"parquet bytes",
        NLTK_URL: b"punkt_tab archive",
        NLTK_INDEX: nltk_index("punkt_tab", NLTK_URL),
    }
    return HubAPIStandIn(monkeypatch, dict(COMMITS)), FileServerStandIn(monkeypatch, files)


def _config(tmp_path) -> str:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "study.yaml").write_text(yaml.safe_dump(CONFIG))
    return "config/study.yaml"


def test_lock_resolves_every_remote_input_and_check_finds_what_moved_upstream(tmp_path, upstream, capsys):
    hub, files = upstream
    configfile = _config(tmp_path)
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile]) == 0
    path = tmp_path / "config" / "study.lock.yaml"
    text = path.read_text()
    assert text.startswith("# The lock of config/study.yaml")
    entries = yaml.safe_load(text)["inputs"]
    assert sorted(entries) == [
        "dataset allenai/ai2_arc",
        "dataset org/prompts",
        "lm_eval_task arc_challenge",
        "model org/base",
        "model org/chat",
        "model org/encoder",
        "nltk punkt_tab",
        f"url {PARQUET_URL}",
    ]
    assert entries["model org/base"]["revision"] == "1" * 40 and entries["model org/base"]["ref"] == "main"
    assert entries["model org/chat"]["read_by"] == ["base_models.base.hub.chat_template_from"]
    assert entries["dataset org/prompts"]["read_by"] == ["sources.prompts.hub (org/prompts default: train)"]
    # lm-eval's own task file names the dataset its task reads.
    assert entries["lm_eval_task arc_challenge"]["datasets"] == ["dataset allenai/ai2_arc"]
    assert entries["dataset allenai/ai2_arc"] == {
        "read_by": ["lm_eval task arc_challenge (ARC-Challenge)"],
        "repo": "allenai/ai2_arc",
        "ref": "main",
        "revision": "5" * 40,
        "resolved": entries["dataset allenai/ai2_arc"]["resolved"],
    }
    url = entries[f"url {PARQUET_URL}"]
    assert url["sha256"] == hashlib.sha256(b"parquet bytes").hexdigest() and url["revision"] == "ab" * 20
    assert entries["nltk punkt_tab"]["sha256"] == hashlib.sha256(b"punkt_tab archive").hexdigest()
    assert entries["nltk punkt_tab"]["url"] == NLTK_URL
    assert lock.unlocked(CONFIG, entries) == []

    # Nothing moved: --check downloads nothing (HEAD requests and the hub's API only).
    gets = list(files.gets)
    capsys.readouterr()
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile, "--check"]) == 0
    assert files.gets == gets
    # The base model got a new commit and the file new bytes under the same names.
    hub.commits[("model", "org/base")] = "9" * 40
    files.files[PARQUET_URL] = b"parquet bytes, re-uploaded"
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile, "--check"]) == 1
    assert files.gets == gets
    out = capsys.readouterr().out
    assert f"model org/base: moved upstream: locked {'1' * 40}, now {'9' * 40}" in out
    assert f"url {PARQUET_URL}: moved upstream: locked" in out
    assert out.count("moved upstream") == 2
    assert path.read_text() == text  # --check writes nothing

    # --update NAME re-resolves that entry alone.
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile, "--update", "org/base"]) == 0
    updated = yaml.safe_load(path.read_text())["inputs"]
    assert updated["model org/base"]["revision"] == "9" * 40
    assert updated[f"url {PARQUET_URL}"] == url
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile, "--check"]) == 1
    assert capsys.readouterr().out.count("moved upstream") == 1
    assert main(["--root", str(tmp_path), "lock", "--configfile", configfile, "--update", "no/such"]) == 2
    assert "--update: no/such: no such input of the config" in capsys.readouterr().err


def test_an_unlocked_config_is_refused_listing_its_inputs_and_a_dry_run_warns(tmp_path):
    from reprolm.config.errors import ConfigError

    path = tmp_path / "study.lock.yaml"
    entries = {
        "model org/base": {"revision": "1" * 40},
        "model org/chat": {"revision": "main"},  # a branch is not a lock
        f"url {PARQUET_URL}": {"sha256": None, "revision": "ab" * 20, "public": "the commit in its URL"},
    }
    lock.write_lock(path, entries, "study.yaml")
    with pytest.raises(ConfigError) as refused:
        lock.refuse_unlocked(CONFIG, path, dry_run=False, warn=print, configfile="study.yaml")
    message = str(refused.value)
    assert message.startswith(f"6 remote inputs of the config not locked in {path}")
    assert "\n  model org/chat\n  dataset org/prompts\n" in message and f"  url {PARQUET_URL}\n" in message
    assert "model org/base" not in message
    assert message.endswith("Lock them on a host that reaches the hub: reprolm lock --configfile study.yaml")
    warnings = []
    lock.refuse_unlocked(CONFIG, path, dry_run=True, warn=warnings.append, configfile="study.yaml")
    assert len(warnings) == 1 and warnings[0].startswith(message)
    assert "a real run is refused until they are locked" in warnings[0]
    lock.refuse_unlocked({**CONFIG, "allow_unpinned": True}, path, dry_run=False, warn=warnings.append)
    assert "allow_unpinned: true: the run goes on unpinned" in warnings[-1]
    # Nothing remote (the embedded default's case): nothing to lock, nothing said.
    lock.refuse_unlocked({"sources": {}}, None, dry_run=False, warn=warnings.append)
    assert len(warnings) == 2
