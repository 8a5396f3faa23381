"""The lock of a config's remote inputs: every model, dataset and file its DAG reads from
the internet, resolved to an immutable revision and written beside the config
(``config/paper.lock.yaml`` for ``config/paper.yaml``), as a package manager locks.

An input is one entry, keyed ``{kind} {name}``:

- ``model {repo}`` and ``dataset {repo}``: a hub repository (base models, the tokenizers their
  chat templates come from, sentence encoders; hub datasets, those lm-eval tasks read among
  them), locked to the hub's commit sha of the reference the config names (``main`` unless
  a ``revision`` is given);
- ``url {address}``: a file a source reads by URL (``data_files``), locked to its content's
  sha256;
- ``lm_eval_task {task}``: the hub datasets an lm-eval task (or group) reads, each a
  ``dataset`` entry of its own;
- ``nltk {package}``: an NLTK data package, locked to its archive's sha256.

``reprolm lock`` resolves them on a host that reaches the hub; downloads pass the locked
revision and check the locked hash (``reprolm.data.sources``, ``reprolm.models.base``,
``reprolm.data.hub_assets``); a real run of a config whose inputs are not all locked is
refused before any job (:func:`refuse_unlocked`).
"""

from __future__ import annotations

import datetime
import re
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reprolm.config.lookups import nltk_data
from reprolm.data.released_ratings import released_files
from reprolm.errors import ConfigError
from reprolm.io import atomic_path
from reprolm.paths import on_the_hub
from reprolm.pins import SHA, TIMEOUT_S, LockError, fetch_url, hub_commit, url_etag

LOCK_SUFFIX = ".lock.yaml"
# A commit in a hub or GitHub file address: .../resolve/{sha}/... or raw.githubusercontent.com/{owner}/{repo}/{sha}/...
URL_COMMIT = re.compile(r"(?:/resolve/|raw\.githubusercontent\.com/[^/]+/[^/]+/)([0-9a-f]{40})/")
HEADER = """\
# The lock of {config}: every remote input its DAG reads, at an immutable revision (a hub
# commit sha; a file's sha256). Made by `reprolm lock --configfile {config}` on a host that
# reaches the hub; commit it with the config. `reprolm lock --check` says what moved upstream,
# `reprolm lock --update NAME` re-resolves an entry. Entries marked `public` were filled in
# from public sources (the commit in the config's own URL), not resolved by `reprolm lock`.
"""


@dataclass
class RemoteInput:
    """One remote input: its lock key, what it is and which config keys read it."""

    kind: str  # model, dataset, url, lm_eval_task, nltk
    name: str  # the repo, URL, task or package
    ref: str | None = None  # the revision the config names (hub repositories)
    read_by: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kind} {self.name}" + (f"@{self.ref}" if self.ref else "")


def lock_path(configfiles: Iterable[str | Path]) -> Path | None:
    """The lock beside the run's last config file (None for the embedded default)."""
    files = [Path(name) for name in configfiles]
    if not files:
        return None
    last = files[-1]
    return last.with_name(last.name.removesuffix(last.suffix) + LOCK_SUFFIX)


def _add(found: dict[str, RemoteInput], item: RemoteInput, reader: str) -> None:
    found.setdefault(item.key, item).read_by.append(reader)


def lm_eval_tasks(config: Mapping) -> dict[str, list[str]]:
    """The lm-eval tasks whose hub datasets the DAG fetches, with the config keys naming each:
    every lm-eval task spec in the config (a mapping with a ``task`` and the ``metric`` read
    of it: an lm-eval suite's, or a study's own task list) that names no local ``source``."""
    tasks: dict[str, list[str]] = {}

    def visit(node, where: str) -> None:
        if isinstance(node, Mapping):
            if isinstance(node.get("task"), str) and isinstance(node.get("metric"), str):
                if not node.get("source"):
                    tasks.setdefault(node["task"], []).append(f"{where}.{node.get('name', node['task'])}")
                return
            for key, value in node.items():
                if not str(key).startswith("_"):
                    visit(value, f"{where}.{key}" if where else str(key))
        elif isinstance(node, list):
            for item in node:
                visit(item, where)

    visit(config, "")
    return tasks


def remote_inputs(config: Mapping) -> dict[str, RemoteInput]:
    """Every remote input ``config`` reads, by lock key, each with the config keys reading it:
    what the download rules fetch (base models, chat-template tokenizers, hub sources and the
    files they name by URL, released sources' files without a published checksum, sentence
    encoders, lm-eval tasks' datasets, NLTK packages). The datasets of an lm-eval task are known
    only from lm-eval's task files (:func:`task_datasets`), so here the task stands for them."""
    found: dict[str, RemoteInput] = {}
    for name, spec in config.get("base_models", {}).items():
        hub = spec.get("hub")
        if not hub:
            continue
        _add(found, RemoteInput("model", hub["path"], hub.get("revision")), f"base_models.{name}.hub.path")
        template = hub.get("chat_template_from")
        if template and on_the_hub(template):
            _add(found, RemoteInput("model", template), f"base_models.{name}.hub.chat_template_from")
    for name, spec in config.get("sources", {}).items():
        # A released file with a published checksum is pinned by it; the others by the lock.
        for released in released_files(name, spec) if "released" in spec else []:
            if released.checksum is None:
                _add(found, RemoteInput("url", released.url), released.key)
        hub = spec.get("hub")
        if not hub:
            continue
        if on_the_hub(hub["path"]):
            splits = ",".join(hub.get("splits") or [hub.get("split", "train")])
            subset = f" {hub['name']}" if hub.get("name") else ""
            reader = f"sources.{name}.hub ({hub['path']}{subset}: {splits})"
            _add(found, RemoteInput("dataset", hub["path"], hub.get("revision")), reader)
        for split, urls in (hub.get("data_files") or {}).items():
            for url in [urls] if isinstance(urls, str) else urls:
                if "://" in url:
                    _add(found, RemoteInput("url", url), f"sources.{name}.hub.data_files.{split}")
    for name, settings in config.get("metrics", {}).items():
        encoder = settings.get("encoder", "packaged")
        if encoder != "packaged" and on_the_hub(encoder):
            _add(found, RemoteInput("model", encoder), f"metrics.{name}.encoder")
    for task, readers in lm_eval_tasks(config).items():
        for reader in readers:
            _add(found, RemoteInput("lm_eval_task", task), reader)
    for suite_name, suite in config.get("lm_eval_suites", {}).items():
        for folder in nltk_data(suite):
            _add(found, RemoteInput("nltk", Path(folder).name), f"lm_eval_suites.{suite_name}.nltk_data")
    return found


# Reading and writing the lock.


def read_lock(path: str | Path | None) -> dict[str, dict]:
    """The lock's entries by key ({} where there is no lock file)."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as error:
        raise LockError(f"{path}: not a YAML file ({error})") from None
    entries = data.get("inputs") or {}
    if not isinstance(entries, dict):
        raise LockError(f"{path}: `inputs` must map each input's key to its entry")
    return entries


def write_lock(path: str | Path, entries: Mapping[str, dict], config_name: str) -> None:
    text = HEADER.format(config=config_name) + yaml.safe_dump(
        {"inputs": dict(sorted(entries.items()))}, sort_keys=False, allow_unicode=True, width=120
    )
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text)


def is_locked(key: str, entries: Mapping[str, dict]) -> bool:
    """Whether ``key``'s entry pins its input: a hub commit sha, a file's sha256, an lm-eval
    task's datasets each locked."""
    entry = entries.get(key)
    if not entry:
        return False
    kind = key.split(" ", 1)[0]
    if kind in ("model", "dataset"):
        return bool(SHA.match(str(entry.get("revision") or "")))
    if kind == "lm_eval_task":
        datasets = entry.get("datasets")
        return isinstance(datasets, list) and all(is_locked(dataset, entries) for dataset in datasets)
    return bool(entry.get("sha256"))


def unlocked(config: Mapping, entries: Mapping[str, dict]) -> list[str]:
    """The keys of ``config``'s remote inputs the lock does not pin, in order."""
    return [key for key in remote_inputs(config) if not is_locked(key, entries)]


def refuse_unlocked(
    config: Mapping, path: Path | None, dry_run: bool, warn: Callable[[str], None], configfile: str = ""
) -> None:
    """Refuse a run of ``config`` whose remote inputs are not all locked (a ConfigError
    listing them and the command that locks them); for a dry run (or while the workflow is
    parsed, before Snakemake says whether it is one), or a config with
    ``allow_unpinned: true``, warn the same instead."""
    if path is None:
        missing = list(remote_inputs(config))
        where = "the embedded config"
    else:
        missing = unlocked(config, read_lock(path))
        where = str(path)
    if not missing:
        return
    command = f"reprolm lock --configfile {configfile}" if configfile else "reprolm lock --configfile CONFIG"
    shown = "\n".join(f"  {key}" for key in missing)
    message = (
        f"{len(missing)} remote input{'s' if len(missing) != 1 else ''} of the config not locked in {where} "
        f"(read at whatever the hub serves that day):\n{shown}\nLock them on a host that reaches the hub: {command}"
    )
    if config.get("allow_unpinned"):
        warn(f"{message}\n(allow_unpinned: true: the run goes on unpinned)")
    elif dry_run:
        warn(f"{message}\n(a dry run goes on; a real run is refused before its first job until they are locked)")
    else:
        raise ConfigError(message)


# What the downloads read of the lock.


def locked_revision(entries: Mapping[str, dict], kind: str, repo: str, ref: str | None = None) -> str | None:
    """The locked commit of a hub ``kind`` (model or dataset) ``repo`` (None where unlocked)."""
    entry = entries.get(RemoteInput(kind, repo, ref).key) or {}
    revision = entry.get("revision")
    return revision if revision and SHA.match(revision) else None


def locked_hub(hub: Mapping, entries: Mapping[str, dict], kind: str) -> dict:
    """A hub spec (base model or source) with the lock's revision, and for a source each of
    its ``data_files`` URLs' locked sha256 under ``locked_files``."""
    pinned = dict(hub)
    if on_the_hub(hub["path"]):
        revision = locked_revision(entries, kind, hub["path"], hub.get("revision"))
        if revision:
            pinned["revision"] = revision
    template = hub.get("chat_template_from")
    if template and on_the_hub(template):
        revision = locked_revision(entries, "model", template)
        if revision:
            pinned["chat_template_revision"] = revision
    files = {}
    for urls in (hub.get("data_files") or {}).values():
        for url in [urls] if isinstance(urls, str) else urls:
            digest = (entries.get(RemoteInput("url", url).key) or {}).get("sha256")
            if digest:
                files[url] = digest
    if files:
        pinned["locked_files"] = files
    return pinned


def released_checksum(entries: Mapping[str, dict], url: str, published: str | None) -> str | None:
    """What a released file's download is checked against: its published checksum, else the
    SHA-256 the lock recorded for its URL (None where neither is known)."""
    if published:
        return published
    digest = (entries.get(RemoteInput("url", url).key) or {}).get("sha256")
    return f"sha256:{digest}" if digest else None


def locked_source(spec: Mapping, entries: Mapping[str, dict]) -> dict:
    """A source spec with its hub dataset's locked revision and its URLs' locked hashes."""
    return {**spec, "hub": locked_hub(spec["hub"], entries, "dataset")} if spec.get("hub") else dict(spec)


def lm_eval_revisions(entries: Mapping[str, dict], task: str) -> dict[str, str]:
    """The locked commits of the hub datasets lm-eval ``task`` reads, by repo."""
    entry = entries.get(RemoteInput("lm_eval_task", task).key) or {}
    revisions = {}
    for key in entry.get("datasets") or []:
        revision = (entries.get(key) or {}).get("revision")
        if revision:
            revisions[key.split(" ", 1)[1]] = revision
    return revisions


# Resolving inputs: the hub's API, a file's bytes.


def task_datasets(task: str) -> list[tuple[str, str | None]]:
    """The hub datasets (path, config name) lm-eval ``task`` reads, a group's subtasks'
    included, from lm-eval's own task files (nothing downloaded); an unknown task is a
    LockError."""
    from reprolm.score.lm_eval_bridge import builtin_task_config, leaf_tasks

    found: dict[tuple[str, str | None], None] = {}
    try:
        leaves = leaf_tasks(task)
    except ValueError as error:
        raise LockError(str(error)) from None
    for leaf in leaves:
        config = leaf if isinstance(leaf, dict) else builtin_task_config(leaf, resolve_functions=False)
        if config.get("dataset_path"):
            found[(config["dataset_path"], config.get("dataset_name"))] = None
    return sorted(found, key=lambda item: (item[0], item[1] or ""))


def nltk_package_url(package: str, timeout: float = TIMEOUT_S) -> str:
    """Where NLTK's downloader fetches ``package``'s archive, from NLTK's package index."""
    from xml.etree import ElementTree

    import nltk

    request = urllib.request.Request(nltk.downloader.Downloader.DEFAULT_URL, headers={"User-Agent": "reprolm"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        index = ElementTree.fromstring(response.read())
    for entry in index.iter("package"):
        if entry.get("id") == package:
            return entry.get("url")
    raise LockError(f"NLTK's index ({nltk.downloader.Downloader.DEFAULT_URL}) lists no package {package!r}")


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def resolve(item: RemoteInput, entries: dict[str, dict], log: Callable[[str], None] = print) -> None:
    """Resolve ``item`` into ``entries`` (an lm-eval task's datasets each as their own entry)."""
    entry: dict = {"read_by": sorted(set(item.read_by))}
    if item.kind in ("model", "dataset"):
        entry.update(repo=item.name, ref=item.ref or "main", revision=hub_commit(item.kind, item.name, item.ref))
    elif item.kind == "url":
        digest, headers = fetch_url(item.name)
        entry.update(url=item.name, sha256=digest, size=headers["size"], etag=headers["etag"])
        commit = URL_COMMIT.search(item.name)
        if commit:
            entry["revision"] = commit[1]
    elif item.kind == "lm_eval_task":
        subsets: dict[str, list[str]] = {}
        for path, name in task_datasets(item.name):
            subsets.setdefault(path, []).extend([name] if name else [])
        keys = []
        for path, names in subsets.items():
            dataset = RemoteInput("dataset", path)
            keys.append(dataset.key)
            shown = ", ".join(names) if len(names) <= 3 else f"{len(names)} configs"
            reader = f"lm_eval task {item.name}" + (f" ({shown})" if shown else "")
            if dataset.key not in entries or not is_locked(dataset.key, entries):
                resolve(RemoteInput("dataset", path, read_by=[reader]), entries, log)
            elif reader not in entries[dataset.key].get("read_by", []):
                entries[dataset.key]["read_by"] = sorted({*entries[dataset.key]["read_by"], reader})
        entry.update(task=item.name, datasets=sorted(set(keys)))
    elif item.kind == "nltk":
        url = nltk_package_url(item.name)
        digest, headers = fetch_url(url)
        entry.update(package=item.name, url=url, sha256=digest, size=headers["size"], etag=headers["etag"])
    entry["resolved"] = _today()
    entries[item.key] = entry
    shown = entry.get("revision") or entry.get("sha256") or ", ".join(entry.get("datasets", []))
    log(f"{item.key}: {shown}")


def lock(
    config: Mapping,
    path: Path,
    config_name: str,
    update: Iterable[str] | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, dict]:
    """Write ``path``, the lock of ``config``: inputs not locked yet resolved (and those
    ``update`` names again: keys, or names such as a repo id), the locked ones kept, entries
    no longer read dropped. Returns the entries."""
    old = read_lock(path)
    inputs = remote_inputs(config)
    wanted = set(update or ())
    unknown = [name for name in wanted if not any(_names(key, name) for key in [*inputs, *old])]
    if unknown:
        raise LockError(
            f"--update: {', '.join(sorted(unknown))}: no such input of the config (name an entry by its key, "
            "or its repository id, URL, lm-eval task or NLTK package)"
        )
    entries: dict[str, dict] = {}
    kept = {key: entry for key, entry in old.items() if not any(_names(key, name) for name in wanted)}
    # The datasets an lm-eval task reads are entries of their own, kept with the task.
    needed = set(inputs)
    for key in inputs:
        if key.startswith("lm_eval_task ") and key in kept:
            needed.update(kept[key].get("datasets") or [])
    for key in needed:
        if key in kept and is_locked(key, kept) and not kept[key].get("public"):
            entries[key] = kept[key]
    for key, item in inputs.items():
        if key not in entries:
            resolve(item, entries, log)
        else:
            # The config's readers as they are now, and the lm-eval tasks reading a dataset.
            tasks = [reader for reader in entries[key].get("read_by", []) if reader.startswith("lm_eval task ")]
            entries[key]["read_by"] = sorted({*item.read_by, *tasks})
    write_lock(path, entries, config_name)
    return entries


def _names(key: str, name: str) -> bool:
    return name == key or name == key.split(" ", 1)[1] or name == key.split(" ", 1)[1].split("@", 1)[0]


@dataclass
class Moved:
    key: str
    locked: str
    now: str


def check(entries: Mapping[str, dict]) -> tuple[list[Moved], list[str]]:
    """What moved upstream since the lock, without downloading: each hub repository's commit
    at its reference asked again, each file's ETag asked by a HEAD request. Returns the
    moved inputs and those that could not be told (no ETag, or no answer)."""
    moved, untold = [], []
    for key, entry in sorted(entries.items()):
        kind = key.split(" ", 1)[0]
        try:
            if kind in ("model", "dataset"):
                ref = entry.get("ref") or None
                now = hub_commit(kind, entry["repo"], None if ref == "main" else ref)
                if now != entry.get("revision"):
                    moved.append(Moved(key, str(entry.get("revision")), now))
            elif kind in ("url", "nltk"):
                if not entry.get("etag"):
                    untold.append(f"{key}: no ETag recorded; only a download can tell (its sha256 is checked then)")
                    continue
                now = url_etag(entry["url"])
                if now != entry["etag"]:
                    moved.append(Moved(key, entry["etag"], str(now)))
        except Exception as error:  # the hub's and the network's errors are many kinds
            untold.append(f"{key}: no answer ({type(error).__name__}: {str(error).strip().splitlines()[0]})")
    return moved, untold
