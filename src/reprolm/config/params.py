"""Params in the form Snakemake compares."""

from __future__ import annotations

from collections.abc import Mapping


def canonical(value):
    """``value`` with every mapping's keys sorted, recursively.

    Snakemake compares params by their text, so a reordered config file would otherwise
    rerun jobs whose settings did not change.
    """
    if isinstance(value, Mapping):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, (list, tuple)):
        return [canonical(item) for item in value]
    return value
