"""The configuration reference's key list, written from the JSON schema's descriptions.

The schema (``workflow/schemas/config.schema.yaml``) is the one place a key is described:
``reprolm config-docs`` renders it as Markdown (``docs/configuration-keys.md``), and a test
keeps the committed page equal to what this module makes of the schema.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from reprolm.config.schema import completed
from reprolm.io import read_yaml
from reprolm.studies import with_study_sections

SCHEMA_FILE = Path("workflow/schemas/config.schema.yaml")
KEYS_PAGE = Path("docs/configuration-keys.md")

# A mapping whose keys are names of the researcher's choosing (`sources.{name}`).
NAME_MAP = "#/definitions/name_map"
NAME = "{name}"


def load_schema(path: str | Path = SCHEMA_FILE) -> dict:
    """The workflow's schema as the registries complete it, with each registered study's
    section (its folder's schema.yaml)."""
    return with_study_sections(completed(read_yaml(path)))


def keys_page(schema: Mapping, schema_path: str | Path = SCHEMA_FILE) -> str:
    """The Markdown page: each top-level key a section, its nested keys one entry each (by
    their full dotted path), and the shared blocks (``definitions``) the sections refer to."""
    definitions = schema.get("definitions", {})
    lines = [
        "# Configuration keys",
        "",
        f"<!-- Written by `reprolm config-docs` from {schema_path} and the studies' schema.yaml: edit",
        "the schemas' descriptions and run it again; tests/test_config_docs.py checks this page is current. -->",
        "",
        "Every key of the workflow configuration, from the JSON schema that checks it before any job",
        f"(`{schema_path}`; a study's section from its folder's `src/reprolm/studies/<study>/schema.yaml`).",
        f"`{NAME}` stands for a name of your choosing (letters, digits and `_`);",
        "**required** keys must be given where their parent is. How the files combine, and what",
        "is checked beyond the schema, is in [Configuration](configuration.md).",
        "",
    ]
    for key, node in schema.get("properties", {}).items():
        lines += _section(key, node, definitions)
    shared = [name for name, node in definitions.items() if name != NAME_MAP.rsplit("/", 1)[1]]
    if shared:
        lines += ["## Shared blocks", ""]
        lines += ["Blocks that several keys above take, described once.", ""]
        for name in shared:
            node = definitions[name]
            lines += [f"### {_block_title(name)}", ""]
            lines += _paragraph(node.get("description"))
            summary = _summary(node, definitions, required=False)
            if summary and not _is_object(node):
                lines += [f"Value: {summary}.", ""]
            lines += _entry_list(name, node, definitions, top=True)
    return "\n".join(_squeeze(lines)).rstrip() + "\n"


def write_keys_page(schema_path: str | Path = SCHEMA_FILE, output: str | Path = KEYS_PAGE) -> Path:
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(keys_page(load_schema(schema_path), schema_path))
    return output


def _section(key: str, node: Mapping, definitions: Mapping) -> list[str]:
    node = _resolved(node, definitions)
    lines = [f"## `{key}`", ""]
    lines += _paragraph(node.get("description"))
    summary = _summary(node, definitions, required=False)
    if summary and not _is_object(node):
        lines += [f"Value: {summary}.", ""]
    lines += _entry_list(key, node, definitions, top=True)
    return lines


def _entry_list(path: str, node: Mapping, definitions: Mapping, top: bool = False) -> list[str]:
    """Bullet entries of the keys below ``path``; a choice of kinds (``oneOf`` of objects that
    differ by a ``kind`` constant) becomes one sub-list per kind."""
    node = _resolved(node, definitions)
    lines: list[str] = []
    entries = list(_entries(path, node, definitions))
    for entry_path, entry, required in entries:
        lines += _entry(entry_path, entry, definitions, required)
    if _is_name_map(node) and isinstance(node.get("additionalProperties"), Mapping):
        path, node = f"{path}.{NAME}", _resolved(node["additionalProperties"], definitions)
    kinds = _kinds(node, definitions)
    if kinds:
        common = _common_properties(kinds)
        if common:
            lines += ["", f"Every kind of `{path}` takes:", ""]
            for name in common:
                lines += _entry(f"{path}.{name}", kinds[0][1]["properties"][name], definitions, False)
        for kind, variant in kinds:
            lines += ["", f"### `{path}` of `kind: {kind}`", ""]
            lines += _paragraph(variant.get("description"))
            required = set(variant.get("required", []))
            for name, child in variant.get("properties", {}).items():
                if name in common or name == "kind":
                    continue
                lines += _entry(f"{path}.{name}", child, definitions, name in required)
                lines += _nested(f"{path}.{name}", child, definitions)
    if lines and top:
        lines.append("")
    return lines


def _entries(path: str, node: Mapping, definitions: Mapping) -> Iterator[tuple[str, Mapping, bool]]:
    """Every key below ``path`` in schema order, depth first, with whether it is required."""
    if _is_name_map(node):
        child = node.get("additionalProperties")
        if isinstance(child, Mapping):
            child = _resolved(child, definitions)
            if child.get("description") or _summary(child, definitions, required=False) not in ("", "mapping"):
                yield f"{path}.{NAME}", child, False
            if not _kinds(child, definitions):
                yield from _object_entries(f"{path}.{NAME}", child, definitions)
        return
    yield from _object_entries(path, node, definitions)


def _object_entries(path: str, node: Mapping, definitions: Mapping) -> Iterator[tuple[str, Mapping, bool]]:
    required = set(node.get("required", []))
    for name, child in node.get("properties", {}).items():
        child_path = f"{path}.{name}"
        yield child_path, child, name in required
        if _is_reference(child):
            continue
        resolved = _resolved(child, definitions)
        if resolved.get("properties") or _is_name_map(resolved):
            yield from _entries(child_path, resolved, definitions)
        elif isinstance(resolved.get("items"), Mapping) and resolved["items"].get("properties"):
            yield from _object_entries(f"{child_path}[]", resolved["items"], definitions)


def _nested(path: str, node: Mapping, definitions: Mapping) -> list[str]:
    lines = []
    for entry_path, entry, required in _entries(path, _resolved(node, definitions), definitions):
        lines += _entry(entry_path, entry, definitions, required)
    return lines


def _entry(path: str, node: Mapping, definitions: Mapping, required: bool) -> list[str]:
    summary = _summary(node, definitions, required)
    head = f"- **`{path}`**" + (f" ({summary})" if summary else "")
    # A reference to a shared block links to it rather than repeating its description.
    text = node.get("description") or (None if _is_reference(node) else _resolved(node, definitions).get("description"))
    if not text:
        return [head]
    first, *rest = _text(text).split("\n")
    return [f"{head}: {first}"] + [f"    {line}" if line else "" for line in rest]


def _summary(node: Mapping, definitions: Mapping, required: bool) -> str:
    """What the value is, in a few words: its type or choices, its default, whether required."""
    parts = []
    if "$ref" in node and node["$ref"] != NAME_MAP:
        name = node["$ref"].rsplit("/", 1)[1]
        parts.append(f"a [{_block_title(name)}](#{_slug(_block_title(name))})")
    resolved = _resolved(node, definitions)
    if "const" in resolved:
        parts.append(f"`{_value(resolved['const'])}`")
    elif "enum" in resolved:
        parts.append("one of " + ", ".join(f"`{_value(v)}`" for v in resolved["enum"]))
    elif "oneOf" in resolved and all(("enum" in o or "const" in o) for o in resolved["oneOf"]):
        values = [v for o in resolved["oneOf"] for v in o.get("enum", [o.get("const")])]
        parts.append("one of " + ", ".join(f"`{_value(v)}`" for v in values))
    elif "$ref" not in node:
        kind = _type(resolved)
        if kind:
            parts.append(kind)
    choice = [
        o["required"][0] for o in resolved.get("oneOf", []) if list(o) == ["required"] and len(o["required"]) == 1
    ]
    if choice and len(choice) == len(resolved["oneOf"]):
        parts.append("exactly one of " + ", ".join(f"`{name}`" for name in choice))
    if "default" in resolved and not isinstance(resolved["default"], Mapping):
        parts.append(f"default `{_value(resolved['default'])}`")
    if required:
        parts.append("**required**")
    return ", ".join(parts)


def _type(node: Mapping) -> str:
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(_type({**node, "type": k}) for k in kind)
    if kind == "array":
        items = node.get("items")
        if isinstance(items, Mapping) and ("type" in items or "enum" in items):
            inner = _type(items) if "type" in items else "one of " + ", ".join(f"`{v}`" for v in items["enum"])
            return f"list of {inner}"
        if node.get("prefixItems"):
            return f"list of {len(node['prefixItems'])}"
        return "list"
    if kind == "object" and _is_name_map(node):
        return "mapping of names"
    names = {"string": "text", "integer": "whole number", "number": "number", "boolean": "true/false", "null": "null"}
    if kind == "object":
        return "mapping"
    return names.get(kind, "")


def _kinds(node: Mapping, definitions: Mapping) -> list[tuple[str, Mapping]]:
    """``[(kind, variant)]`` where the node is a choice of objects told apart by ``kind``."""
    variants = node.get("oneOf", [])
    kinds = []
    for variant in variants:
        kind = variant.get("properties", {}).get("kind", {})
        if "const" not in kind:
            return []
        kinds.append((kind["const"], variant))
    return kinds


def _common_properties(kinds: list[tuple[str, Mapping]]) -> list[str]:
    first = kinds[0][1].get("properties", {})
    return [
        name
        for name, child in first.items()
        if name != "kind" and all(variant.get("properties", {}).get(name) == child for _, variant in kinds[1:])
    ]


def _resolved(node: Mapping, definitions: Mapping) -> Mapping:
    """The node with a ``$ref`` to a definition merged in (the node's own keys win)."""
    if not isinstance(node, Mapping) or "$ref" not in node:
        return node
    target = definitions[node["$ref"].rsplit("/", 1)[1]]
    merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return merged


def _is_name_map(node: Mapping) -> bool:
    return (
        node.get("$ref") == NAME_MAP
        or "propertyNames" in node
        and isinstance(node.get("additionalProperties"), Mapping)
    )


def _is_object(node: Mapping) -> bool:
    return node.get("type") == "object" or "properties" in node or _is_name_map(node)


def _is_reference(node: Mapping) -> bool:
    return "$ref" in node and node["$ref"] != NAME_MAP


def _block_title(name: str) -> str:
    return f"`{name}` block"


def _slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _text(description: str) -> str:
    return description.strip()


def _paragraph(description: str | None) -> list[str]:
    return [_text(description), ""] if description else []


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row."""
    out: list[str] = []
    for line in lines:
        if line == "" and out and out[-1] == "":
            continue
        out.append(line)
    return out
