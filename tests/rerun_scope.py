"""The rerun scope of every leaf key of the default config: each changed to another value
the workflow accepts, and the jobs the change reruns after a finished run of the default
(reprolm.dag_jobs and reprolm.impact: two Snakemake DAGs, read with Snakemake's API in
worker processes, one per core)."""

from __future__ import annotations

import copy
import multiprocessing
import os
import re
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

import yaml

from reprolm import dag_jobs, impact
from reprolm.config import overlays

REPO = Path(__file__).resolve().parents[1]
PAGE = Path("docs") / "rerun-scope.md"
# The config's maps of named entries: a key's siblings are the same key of the other entries.
NAMED = (
    "datasets",
    "promptsets",
    "recipes",
    "judges",
    "base_models",
    "lm_eval_suites",
    "metrics",
    "tokenizers",
    "sources",
)

Key = tuple
# Values tried per key: each refused one costs a parse of the workflow.
TRIES = 4
# Reader processes at most (each holds Snakemake and a parsed workflow, about 250 MB).
MAX_READERS = 8


class Scope(NamedTuple):
    key: Key
    before: object
    after: object  # the value it was changed to (where ``accepted``)
    accepted: bool
    triggered: tuple[str, ...]  # rules with a job rerun by its own trigger
    rules: dict[str, int]  # every rule rerun, with its job count


def dotted(key: Key) -> str:
    return ".".join(str(part) for part in key)


def leaves(value, key: Key = ()) -> Iterator[tuple[Key, object]]:
    """Every leaf key of a config: a scalar, or a list of scalars (a window, a list of names)."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from leaves(item, (*key, name))
    elif isinstance(value, list) and value and all(isinstance(item, (dict, list)) for item in value):
        for index, item in enumerate(value):
            yield from leaves(item, (*key, index))
    else:
        yield key, value


def _pattern(key: Key) -> tuple:
    """A key with its entry's name (under a map of named entries) and list positions left out."""
    return tuple(
        "*" if isinstance(part, int) or (index == 1 and key[0] in NAMED) else part for index, part in enumerate(key)
    )


def _siblings(config, key: Key) -> list:
    pattern = _pattern(key)
    found = []
    for other, value in leaves(config):
        if other != key and _pattern(other) == pattern and value not in found:
            found.append(value)
    return found


def _resolved(node: dict, schema: dict) -> dict:
    while isinstance(node, dict) and "$ref" in node:
        node = schema["definitions"][node["$ref"].rsplit("/", 1)[-1]]
    return node if isinstance(node, dict) else {}


def _branches(node: dict, schema: dict) -> list[dict]:
    node = _resolved(node, schema)
    found = [node]
    for choice in ("oneOf", "anyOf"):
        for branch in node.get(choice, []):
            found += _branches(branch, schema)
    return found


def schema_values(schema: dict, key: Key) -> list:
    """The values the config schema enumerates for ``key`` (``enum``, ``const``)."""
    nodes = [schema]
    for part in key:
        following = []
        for node in (branch for each in nodes for branch in _branches(each, schema)):
            if isinstance(part, int):
                following += [node["items"]] if isinstance(node.get("items"), dict) else []
            elif part in node.get("properties", {}):
                following.append(node["properties"][part])
            elif isinstance(node.get("additionalProperties"), dict):
                following.append(node["additionalProperties"])
            else:
                following += list(node.get("patternProperties", {}).values())
        nodes = following
    values = []
    for node in (branch for each in nodes for branch in _branches(each, schema)):
        values += node.get("enum", []) + ([node["const"]] if "const" in node else [])
    return values


def _scalar_alternatives(value) -> list:
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [value + 1, value - 1]
    if isinstance(value, float):
        return [value / 2, value * 2] if 0 < value <= 1 else [value * 2, value / 2]
    if isinstance(value, str):
        # A number written as text (a length target's name) moves a step.
        digits = re.search(r"\d+$", value)
        return [value[: digits.start()] + str(int(digits.group()) + 1)] if digits else [f"{value}x"]
    return []


def _entry_names(config, value) -> list:
    """Where ``value`` names an entry of a map of named entries: the map's other names."""
    return [
        other
        for name in NAMED
        if isinstance(value, str) and value in config.get(name, {})
        for other in config[name]
        if other != value
    ]


def alternatives(config, schema, key: Key, value) -> list:
    """Values to try for ``key`` in place of ``value``, the likeliest to be accepted first
    (at most :data:`TRIES`): a value the schema enumerates, a sibling entry's value, another
    entry's name, a scalar moved a step, a list with one item moved, left out or replaced."""
    found = [v for v in schema_values(schema, key) if not isinstance(value, list)]
    if isinstance(value, list):
        for index, item in enumerate(value):
            if item is not None and not isinstance(item, str):
                for moved in _scalar_alternatives(item):
                    found.append([*value[:index], moved, *value[index + 1 :]])
                break
        if len(value) > 1:
            found += [value[:-1], value[1:]]
        found += [value[::-1]] if len(set(map(repr, value))) > 1 else []
        if len(value) == 1:
            found += [[name] for name in _entry_names(config, value[0])]
    else:
        moved = _scalar_alternatives(value)
        # A name that is a number (a length target's) first moves: its siblings' are taken.
        found += moved[:1] if isinstance(value, str) and value[-1:].isdigit() else []
        found += [s for s in _siblings(config, key) if type(s) is type(value)]
        found += _entry_names(config, value)
        found += moved
    found += [s for s in _siblings(config, key) if isinstance(value, list) and s != value]
    unique = []
    for candidate in found:
        if candidate != value and candidate not in unique:
            unique.append(candidate)
    return unique[:TRIES]


def changed(config, key: Key, value) -> dict:
    result = copy.deepcopy(config)
    target = result
    for part in key[:-1]:
        target = target[part]
    target[key[-1]] = value
    return result


def _scope(root: Path, config: dict, schema: dict, default: dict, key: Key, value) -> Scope:
    """``key`` changed to the first alternative the workflow accepts (after: None where none is)."""
    for candidate in alternatives(config, schema, key, value):
        try:
            states = dag_jobs.dag_states(root, config=changed(config, key, candidate), sized=False).states
        except Exception:  # the workflow refuses the value: the next one
            continue
        found = impact.reruns(default, states)
        return Scope(
            key,
            value,
            candidate,
            True,
            tuple(sorted(impact.rules_triggered(found))),
            dict(sorted(impact.rules_rerun(found).items())),
        )
    return Scope(key, value, None, False, (), {})


def _scopes(root: Path, keys: list[Key]) -> list[Scope]:
    config = overlays.load(root / "config" / "config.yaml", root)
    schema = yaml.safe_load((root / "workflow" / "schemas" / "config.schema.yaml").read_text())
    default = dag_jobs.dag_states(root, sized=False).states
    values = dict(leaves(config))
    return [_scope(root, config, schema, default, key, values[key]) for key in keys]


def scope_of_every_key(root: Path = REPO) -> list[Scope]:
    """The scope of every leaf key, in the config's order: about 800 reads of the workflow, in
    one process per core (each reads the default's DAG once)."""
    keys = [key for key, _ in leaves(overlays.load(root / "config" / "config.yaml", root))]
    workers = min(len(os.sched_getaffinity(0)), MAX_READERS)
    # Every worker gets keys from all over the config: a study's keys cost alike.
    shares = [keys[index::workers] for index in range(workers)]
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        found = {scope.key: scope for share in pool.map(_scopes, [root] * workers, shares) for scope in share}
    return [found[key] for key in keys]


def page(scopes: list[Scope]) -> str:
    lines = [
        "# What each config key reruns",
        "",
        "Generated by `tests/test_rerun_scope.py` (do not edit): every leaf key of",
        "`config/config.yaml` changed to another value the workflow accepts, and the jobs",
        "Snakemake would rerun after a finished run of the default config (`reprolm impact`",
        "answers the same question for your own change). *Triggered*: the rules whose jobs",
        "rerun because their own params, inputs, code or software changed; *rerun*: every rule",
        "with its job count, the jobs after them included.",
        "",
        "| key | changed to | triggered | rerun (jobs) |",
        "| --- | --- | --- | --- |",
    ]
    for scope in scopes:
        after = (
            "—"
            if scope.after is None and not scope.rules
            else f"`{yaml.safe_dump(scope.after, default_flow_style=True, width=1000).strip().removesuffix('...').strip()}`"
        )
        rerun = ", ".join(f"{rule} {count}" for rule, count in scope.rules.items()) or "nothing"
        lines.append(f"| `{dotted(scope.key)}` | {after} | {', '.join(scope.triggered) or '—'} | {rerun} |")
    return "\n".join(lines) + "\n"
