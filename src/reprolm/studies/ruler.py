"""Ruler: length control with Meta Length Tokens (STUDIES.md, seed 000)."""

from __future__ import annotations

from collections.abc import Mapping

from reprolm.config.errors import ConfigError
from reprolm.studies.base import Study, register_study


class Ruler(Study):
    name = "ruler"
    tables = "reprolm.aggregate.length_tables:write_ruler_tables"

    def check_section(self, config: Mapping) -> None:
        # The windows themselves are checked with the rest of the config.
        if "length_targets" not in config:
            raise ConfigError("the ruler study needs length_targets ('paper' or a list)")

    def settings(self, config: Mapping) -> dict:
        return {"length_targets": config["length_targets"]}


register_study(Ruler())
