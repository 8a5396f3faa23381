"""`reprolm lock`: every remote input of a config resolved to an immutable revision, against
local stand-ins for the hub's API and the file servers (tests/hub_standin.py); downloads
reading the lock; a run of an unlocked config refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

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
        "prompts": {"schema": "writing_prompts", "hub": {"path": "org/prompts", "name": "default", "split": "train"}},
        "files": {
            "schema": "writing_prompts",
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
    from reprolm.errors import ConfigError

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
    assert "a real run is refused before its first job until they are locked" in warnings[0]
    lock.refuse_unlocked({**CONFIG, "allow_unpinned": True}, path, dry_run=False, warn=warnings.append)
    assert "allow_unpinned: true: the run goes on unpinned" in warnings[-1]
    # Nothing remote (the embedded default's case): nothing to lock, nothing said.
    lock.refuse_unlocked({"sources": {}}, None, dry_run=False, warn=warnings.append)
    assert len(warnings) == 2


LOCKED = {
    "model org/base": {"repo": "org/base", "revision": "1" * 40},
    "model org/chat": {"repo": "org/chat", "revision": "2" * 40},
    "dataset org/prompts": {"repo": "org/prompts", "revision": "4" * 40},
    f"url {PARQUET_URL}": {"url": PARQUET_URL, "sha256": None},
    "lm_eval_task arc_challenge": {"task": "arc_challenge", "datasets": ["dataset allenai/ai2_arc"]},
    "dataset allenai/ai2_arc": {"repo": "allenai/ai2_arc", "revision": "5" * 40},
}


class LoadDatasetStandIn:
    """``datasets.load_dataset`` for hub datasets (none reachable here): each call recorded,
    a hub dataset answered with ``rows`` (as a DatasetDict where no split is asked); packaged
    builders reading local files (parquet, json, csv) run for real."""

    def __init__(self, monkeypatch, rows: list[dict]):
        import datasets

        self.real, self.rows, self.calls = datasets.load_dataset, rows, []
        monkeypatch.setattr(datasets, "load_dataset", self.load)

    def load(self, path, name=None, split=None, revision=None, data_files=None, **options):
        import datasets

        self.calls.append({"path": path, "name": name, "split": split, "revision": revision})
        if path in ("parquet", "json", "csv"):
            return self.real(path, name, split=split, data_files=data_files, **options)
        dataset = datasets.Dataset.from_list(self.rows)
        return dataset if split else datasets.DatasetDict({"train": dataset, "validation": dataset, "test": dataset})


def _parquet_bytes(rows: list[dict]) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), sink)
    return sink.getvalue()


def test_the_locked_revision_reaches_snapshot_download_and_load_dataset_and_the_record(tmp_path, monkeypatch, upstream):
    import huggingface_hub

    from reprolm.data.sources import fetch_splits
    from reprolm.models.base import download_base_model
    from reprolm.provenance import records

    hub, files = upstream
    asked = []

    def snapshot_download_stand_in(repo_id, revision, local_dir, allow_patterns):
        asked.append((repo_id, revision))
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "config.json").write_text("{}")
        (Path(local_dir) / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download_stand_in)
    pinned = lock.locked_hub({"path": "org/base", "chat_template_from": "org/chat"}, LOCKED, "model")
    assert pinned == {
        "path": "org/base",
        "chat_template_from": "org/chat",
        "revision": "1" * 40,
        "chat_template_revision": "2" * 40,
    }
    notes = {}
    token = records._STEP_NOTES.set(notes)
    try:
        download_base_model({"path": "org/base", "revision": pinned["revision"]}, str(tmp_path / "base"))
        # The lock's commit, not the hub's newest: the hub moved on since.
        hub.commits[("dataset", "org/prompts")] = "8" * 40
        loads = LoadDatasetStandIn(monkeypatch, [{"instruction": "Say hi."}])
        spec = lock.locked_source(CONFIG["sources"]["prompts"], LOCKED)
        assert fetch_splits({"name": "prompts", **spec}) == {"train": [{"instruction": "Say hi."}]}
        assert loads.calls == [{"path": "org/prompts", "name": "default", "split": "train", "revision": "4" * 40}]
        # A file named by URL: fetched, hashed, read from the local copy.
        rows = [{"instruction": "Write a poem."}]
        files.files[PARQUET_URL] = _parquet_bytes(rows)
        digest = hashlib.sha256(files.files[PARQUET_URL]).hexdigest()
        entries = {**LOCKED, f"url {PARQUET_URL}": {"url": PARQUET_URL, "sha256": digest}}
        spec = lock.locked_source(CONFIG["sources"]["files"], entries)
        assert spec["hub"]["locked_files"] == {PARQUET_URL: digest}
        assert fetch_splits({"name": "files", **spec}) == {"test": rows}
    finally:
        records._STEP_NOTES.reset(token)
    assert asked == [("org/base", "1" * 40)]
    assert notes["read"] == [
        {"kind": "model", "repo": "org/base", "revision": "1" * 40},
        {"kind": "dataset", "repo": "org/prompts", "name": "default", "revision": "4" * 40},
        {"kind": "url", "url": PARQUET_URL, "sha256": digest},
    ]
    # An unpinned run (allow_unpinned) reads, and records, the hub's commit of the day.
    notes.clear()
    token = records._STEP_NOTES.set(notes)
    try:
        download_base_model({"path": "org/base"}, str(tmp_path / "unpinned"))
    finally:
        records._STEP_NOTES.reset(token)
    assert asked[-1] == ("org/base", "1" * 40) and notes["read"][0]["revision"] == "1" * 40


def test_a_file_whose_content_differs_from_the_lock_fails_naming_both_hashes(tmp_path, upstream):
    from reprolm.data.sources import write_source

    _, files = upstream
    files.files[PARQUET_URL] = _parquet_bytes([{"instruction": "Write a poem, re-uploaded."}])
    locked = hashlib.sha256(b"the bytes that were locked").hexdigest()
    served = hashlib.sha256(files.files[PARQUET_URL]).hexdigest()
    spec = lock.locked_source(CONFIG["sources"]["files"], {f"url {PARQUET_URL}": {"sha256": locked}})
    with pytest.raises(lock.LockError) as refused:
        write_source({"name": "files", **spec}, tmp_path / "files")
    assert str(refused.value) == (
        f"sources.files.hub.data_files.test: {PARQUET_URL}: content sha256 {served} differs from the lock's "
        f"{locked}: the file changed upstream since it was locked (re-lock it deliberately: "
        f"reprolm lock --update {PARQUET_URL})"
    )
    assert not (tmp_path / "files").exists()


def test_an_lm_eval_tasks_locked_revision_reaches_load_dataset_through_dataset_kwargs(tmp_path, monkeypatch):
    from reprolm.data.hub_assets import cache_lm_eval_task, pinned_task_configs
    from reprolm.data.upstream import make_fixture

    configs = pinned_task_configs("arc_challenge", lock.lm_eval_revisions(LOCKED, "arc_challenge"))
    assert [config["dataset_kwargs"] for config in configs] == [{"revision": "5" * 40}]
    # A group: each of its tasks pinned (lm-eval's own mmlu group, 57 tasks on cais/mmlu).
    group = pinned_task_configs("mmlu", {"cais/mmlu": "6" * 40})
    assert len(group) == 57 and {config["dataset_kwargs"]["revision"] for config in group} == {"6" * 40}
    made = make_fixture("arc", n=4, seed=0)
    loads = LoadDatasetStandIn(monkeypatch, next(iter(made.values())) if isinstance(made, dict) else made)
    manifest = cache_lm_eval_task("arc_challenge", tmp_path / "arc", {"allenai/ai2_arc": "5" * 40})
    assert loads.calls == [{"path": "allenai/ai2_arc", "name": "ARC-Challenge", "split": None, "revision": "5" * 40}]
    assert manifest["arc_challenge"]["documents"] == {"test": 4, "train": 4, "validation": 4}


@pytest.mark.workflow
def test_a_real_run_of_an_unlocked_config_is_refused_before_any_job_and_its_dry_run_warns(tmp_path):
    from workflow_helpers import scratch_copy, snakemake

    work = scratch_copy(tmp_path)
    overlay = {
        "extends": "config/config.yaml",
        "base_models": {"hub_llama": {"hub": {"path": "example/tiny-llama"}}},
        "ruler": {"baselines": ["hub_llama"]},
    }
    (work / "hub.yaml").write_text(yaml.safe_dump(overlay))
    refused = snakemake(work, "--configfile", "hub.yaml", check=False)
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "1 remote input of the config not locked in hub.lock.yaml" in output
    assert (
        "  model example/tiny-llama\nLock them on a host that reaches the hub: reprolm lock --configfile hub.yaml"
        in (output)
    )
    assert not (work / "results").exists() and not (work / "resources" / "models").exists()
    planned = snakemake(work, "-n", "--configfile", "hub.yaml")
    assert "a dry run goes on; a real run is refused before its first job until they are locked" in (
        planned.stdout + planned.stderr
    )
    # Locked: nothing to say.
    lock.write_lock(work / "hub.lock.yaml", {"model example/tiny-llama": {"revision": "1" * 40}}, "hub.yaml")
    assert "not locked" not in (lambda r: r.stdout + r.stderr)(snakemake(work, "-n", "--configfile", "hub.yaml"))
    # The embedded default reads nothing remote: nothing to lock.
    assert "not locked" not in (lambda r: r.stdout + r.stderr)(snakemake(work, "-n"))


def _job(rule: str, output: str, inputs: dict | None = None, params: dict | None = None):
    """What a rule's script is given as ``snakemake`` (Snakemake's own Namedlists)."""
    from types import SimpleNamespace

    from snakemake.iocontainers import Namedlist

    return SimpleNamespace(
        rule=rule,
        input=Namedlist(fromdict=inputs or {}),
        output=Namedlist([output]),
        params=Namedlist(fromdict=params or {}),
        wildcards=Namedlist(fromdict={}),
        log=[f"logs/{rule}.log"],
        threads=1,
        resources=Namedlist(fromdict={}),
        config={"seed": 0},
    )


def _download_and_tabulate(upstream_commit: str, monkeypatch) -> None:
    """A download of a hub dataset and of a base model at the lock's commits, and a table
    made from both, each as a recorded step of the workflow."""
    import huggingface_hub

    from reprolm.data.sources import write_source
    from reprolm.models.base import download_base_model
    from reprolm.provenance import tracked_step

    def snapshot_download_stand_in(repo_id, revision, local_dir, allow_patterns):
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "config.json").write_text(f'{{"commit": "{revision}"}}')
        (Path(local_dir) / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download_stand_in)
    LoadDatasetStandIn(monkeypatch, [{"instruction": "Say hi."}])
    entries = {**LOCKED, "model org/base": {"revision": upstream_commit}}
    spec = {"name": "prompts", **lock.locked_source(CONFIG["sources"]["prompts"], entries)}
    with tracked_step(_job("raw_source", "resources/raw/prompts", params={"spec": spec})):
        write_source(spec, "resources/raw/prompts")
    hub = lock.locked_hub({"path": "org/base"}, entries, "model")
    with tracked_step(_job("download_base_model", "resources/models/base", params={"hub": hub})):
        download_base_model(hub, "resources/models/base")
    inputs = {"source": "resources/raw/prompts", "model": "resources/models/base"}
    with tracked_step(_job("study_tables", "results/tables/table.csv", inputs=inputs)):
        Path("results/tables").mkdir(parents=True, exist_ok=True)
        Path("results/tables/table.csv").write_text("model,score\nbase,1\n")


def test_lineage_of_a_table_names_the_commits_behind_it_and_verify_checks_a_fresh_download(
    tmp_path, monkeypatch, upstream, capsys
):
    (tmp_path / "run").mkdir()
    monkeypatch.chdir(tmp_path / "run")
    _download_and_tabulate("1" * 40, monkeypatch)
    record = json.loads(Path("resources/models/base/provenance.json").read_text())
    assert record["read"] == [{"kind": "model", "repo": "org/base", "revision": "1" * 40}]
    assert main(["lineage", "results/tables/table.csv"]) == 0
    tree = capsys.readouterr().out
    assert f"    read: dataset org/prompts (default) at commit {'4' * 40}" in tree
    assert f"    read: model org/base at commit {'1' * 40}" in tree
    graph = json.loads(main(["lineage", "--json", "results/tables/table.csv"]) == 0 and capsys.readouterr().out)
    assert graph["artifacts"]["resources/raw/prompts"]["read"][0]["revision"] == "4" * 40

    # A fresh download in another run folder, checked against the first run's records: the
    # same commits and content pass; a model read at another commit is named.
    (tmp_path / "again").mkdir()
    monkeypatch.chdir(tmp_path / "again")
    _download_and_tabulate("1" * 40, monkeypatch)
    assert main(["verify", "resources", "--against", str(tmp_path / "run")]) == 0
    _download_and_tabulate("7" * 40, monkeypatch)
    capsys.readouterr()
    assert main(["verify", "resources", "--against", str(tmp_path / "run")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"resources/models/base: read model org/base at {'7' * 40}, the original at {'1' * 40}",
        "resources/models/base: content differs from the original's: config.json",
    ]


def test_a_released_file_without_a_published_checksum_is_locked_and_checked_against_the_lock():
    """FLASK's reviews and FastChat's questions have published checksums; FastChat's
    pregenerated answers and grades (a Hugging Face Space read at main) have none, so the lock
    pins them and their download is checked against the lock's SHA-256."""
    from reprolm.config import overlays
    from reprolm.data.released_ratings import released_files

    repo = Path(__file__).resolve().parents[1]
    paper = overlays.load(repo / "config/paper.yaml", repo)
    files = [
        file for name, spec in paper["sources"].items() if "released" in spec for file in released_files(name, spec)
    ]
    unpublished = {file.url for file in files if file.checksum is None}
    assert unpublished and len(unpublished) < len(files)
    urls = {item.name for item in lock.remote_inputs(paper).values() if item.kind == "url"}
    assert unpublished <= urls and not {file.url for file in files if file.checksum} & urls
    url = sorted(unpublished)[0]
    entries = {lock.RemoteInput("url", url).key: {"sha256": "ab" * 32}}
    assert lock.released_checksum(entries, url, None) == "sha256:" + "ab" * 32
    assert lock.released_checksum(entries, url, "git-blob:1234") == "git-blob:1234"
    assert lock.released_checksum({}, url, None) is None
