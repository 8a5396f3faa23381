"""The embedded default configuration (config/config.yaml) and names the workflow tests derive from it."""

from __future__ import annotations

import json
from pathlib import Path

from reprolm.config import overlays
from reprolm.length import TargetSet
from workflow_helpers import REPO

DEFAULT = overlays.load(REPO / "config" / "config.yaml", REPO)
MODELS = [f"{b}/{r}" for b in DEFAULT["ruler"]["bases"] for r in DEFAULT["ruler"]["recipes"]]
TARGETS = TargetSet.from_config(DEFAULT["length_targets"])
EXPO = DEFAULT["expo"]
EXPO_MODELS = [(b, r) for b in EXPO["bases"] for r in EXPO["recipes"]]
FLR = DEFAULT["flr"]
GEM = DEFAULT["gem"]
GEM_LABELS = [GEM["labels"][recipe] for recipe in GEM["recipes"]]


def read_json(work: Path, path: str) -> dict:
    return json.loads((work / path).read_text())
