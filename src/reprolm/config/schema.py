"""Config validation against a JSON-Schema, each property's ``default`` filled in where the
config leaves it out (as Snakemake's ``snakemake.utils.validate`` does).

The workflow validates its config here rather than through Snakemake's ``validate``, which
reads the schema file with PyYAML's pure-Python loader: about 0.2 s of every Snakemake
process (each cluster job runs two), where libyaml takes a hundredth of that.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping
from pathlib import Path

from reprolm.data.builder_registry import BUILDERS
from reprolm.errors import ConfigError
from reprolm.io import read_yaml
from reprolm.stages import RULE_STAGES


def validate_config(config: dict, schema_file: str | Path) -> None:
    """``config`` against the schema in ``schema_file`` as the registries complete it
    (:func:`completed`; defaults filled in); the first error names its key."""
    validate_with_defaults(config, completed(read_yaml(schema_file)), "")


def completed(schema: Mapping) -> dict:
    """The workflow's schema with what the registries hold instead of a list kept beside them:
    the names of the dataset builders (``datasets.*.builder``) and a resources block for the
    stage of every registered rule (``stage_resources``), a study's own among them once the
    study is registered (the workflow registers the studies before it validates)."""
    schema = copy.deepcopy(dict(schema))
    schema["properties"]["datasets"]["additionalProperties"]["properties"]["builder"]["enum"] = BUILDERS.names()
    stages = schema["definitions"]["stage_resources"]["properties"]
    for rule in RULE_STAGES:
        if RULE_STAGES[rule].resources:
            stages.setdefault(RULE_STAGES[rule].resources, {"$ref": "#/definitions/resources"})
    return schema


def validate_with_defaults(spec: Mapping, schema: Mapping, name: str) -> None:
    """``spec`` against ``schema``, each property's ``default`` set where ``spec`` leaves it
    out; the first error (in key order) is raised as a ConfigError naming its key under
    ``name`` (the top level where ``name`` is empty)."""
    # Imported here: listing and fingerprinting studies, which import this module, stays cheap.
    import jsonschema

    base = jsonschema.Draft202012Validator
    validate_properties = base.VALIDATORS["properties"]

    def properties(validator, properties, instance, subschema):
        if isinstance(instance, dict):
            for key, node in properties.items():
                if "default" in node:
                    instance.setdefault(key, copy.deepcopy(node["default"]))
        yield from validate_properties(validator, properties, instance, subschema)

    validator = jsonschema.validators.extend(base, {"properties": properties})(schema)
    # At one key, an unknown key is reported before a missing one: a misspelt required key
    # is both, and its spelling is the news.
    errors = sorted(
        validator.iter_errors(spec),
        key=lambda e: ([str(part) for part in e.path], e.validator != "additionalProperties"),
    )
    if errors:
        error = errors[0]
        where = ".".join([part for part in [name, *map(str, error.path)] if part]) or "config"
        if error.validator == "additionalProperties":
            raise ConfigError(f"{where}: {unknown_keys(error)}")
        raise ConfigError(f"{where}: {error.message}")


def unknown_keys(error) -> str:
    """What an ``additionalProperties`` error found, each unknown key with the closest key the
    schema allows there (as registry names are: "did you mean"), or the allowed keys."""
    allowed = sorted(error.schema.get("properties", {}))
    patterns = list(error.schema.get("patternProperties", {}))
    unknown = [key for key in error.instance if key not in allowed and not any(re.search(p, key) for p in patterns)]
    problems = []
    for key in unknown:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else f"the keys allowed here: {allowed}"
        problems.append(f"{key!r} is not a key of this section; {hint}")
    return "; ".join(problems) or error.message
