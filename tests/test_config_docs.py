"""The documentation: the configuration keys page is the schema's descriptions, and the
site builds strictly (no broken link, no page left out of the navigation)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reprolm.cli import main
from reprolm.config_docs import KEYS_PAGE, SCHEMA_FILE, keys_page, load_schema

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_keys_page_is_what_the_schema_makes():
    committed = (REPO / KEYS_PAGE).read_text()
    made = keys_page(load_schema(REPO / SCHEMA_FILE))
    assert committed == made, (
        f"{KEYS_PAGE} is not the schema's current descriptions: run `reprolm config-docs` and commit the page"
    )


def test_every_top_level_key_and_shared_block_is_described():
    schema = load_schema(REPO / SCHEMA_FILE)
    bare = [key for key, node in schema["properties"].items() if not node.get("description")]
    bare += [f"definitions.{name}" for name, node in schema["definitions"].items() if not node.get("description")]
    assert bare == ["definitions.name_map"]


TINY_SCHEMA = {
    "definitions": {
        "name_map": {"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
        "limits": {
            "description": "Limits of one stage.",
            "type": "object",
            "properties": {"runtime": {"type": "integer", "description": "minutes"}},
        },
    },
    "properties": {
        "seed": {"type": "integer", "description": "The seed."},
        "pools": {
            "description": "Named pools.",
            "$ref": "#/definitions/name_map",
            "additionalProperties": {
                "type": "object",
                "required": ["size"],
                "oneOf": [{"required": ["size"]}, {"required": ["file"]}],
                "properties": {
                    "size": {"type": "integer", "default": 4, "description": "how many"},
                    "file": {"type": "string"},
                    "limits": {"$ref": "#/definitions/limits"},
                    "steps": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"name": {"enum": ["a", "b"]}}},
                    },
                },
            },
        },
        "graders": {
            "$ref": "#/definitions/name_map",
            "description": "Graders of two kinds.",
            "additionalProperties": {
                "oneOf": [
                    {
                        "description": "A local model.",
                        "required": ["model"],
                        "properties": {
                            "kind": {"const": "local"},
                            "model": {"type": "string"},
                            "as_of": {"type": "string"},
                        },
                    },
                    {
                        "required": ["url"],
                        "properties": {
                            "kind": {"const": "remote"},
                            "url": {"type": "string"},
                            "as_of": {"type": "string"},
                        },
                    },
                ]
            },
        },
    },
}


def test_the_page_lists_nested_named_and_per_kind_keys_with_what_they_take():
    page = keys_page(TINY_SCHEMA, "schema.yaml")
    lines = page.splitlines()
    assert "## `seed`" in lines and "Value: whole number." in lines
    assert "- **`pools.{name}`** (mapping, exactly one of `size`, `file`)" in lines
    assert "- **`pools.{name}.size`** (whole number, default `4`, **required**): how many" in lines
    assert "- **`pools.{name}.limits`** (a [`limits` block](#limits-block))" in lines
    assert "- **`pools.{name}.steps[].name`** (one of `a`, `b`)" in lines
    # Keys every kind takes are listed once; each kind's own under its heading.
    assert lines.count("- **`graders.{name}.as_of`** (text)") == 1
    local = lines.index("### `graders.{name}` of `kind: local`")
    remote = lines.index("### `graders.{name}` of `kind: remote`")
    assert lines[local + 2] == "A local model."
    assert local < lines.index("- **`graders.{name}.model`** (text, **required**)") < remote
    assert remote < lines.index("- **`graders.{name}.url`** (text, **required**)")
    shared = lines.index("### `limits` block")
    assert lines[shared + 2 : shared + 5] == [
        "Limits of one stage.",
        "",
        "- **`limits.runtime`** (whole number): minutes",
    ]


def test_config_docs_writes_the_page(tmp_path, capsys):
    output = tmp_path / "keys.md"
    assert main(["config-docs", "--schema", str(REPO / SCHEMA_FILE), "--output", str(output)]) == 0
    assert output.read_text() == keys_page(load_schema(REPO / SCHEMA_FILE), REPO / SCHEMA_FILE)
    assert capsys.readouterr().out.strip() == str(output)


def test_the_documentation_site_builds_strictly(tmp_path):
    """mkdocs --strict fails on a link to a missing page or anchor-less file and on a page the
    navigation leaves out; copied first so the build never writes into the checkout."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    if mkdocs is None:
        pytest.fail("mkdocs is not installed in this environment (requirements/dev.txt)")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "configuration-keys" / "index.html").exists()
