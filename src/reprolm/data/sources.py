"""Raw sources: fixtures made locally, or datasets downloaded from the hub, to parquet.

A source is a folder ``resources/raw/{source}/`` with one ``{split}.parquet`` per split.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.data.upstream import load_records, make_fixture, validate_records
from reprolm.io import atomic_path

SPLIT_ORDER = "splits.json"


def fetch_splits(spec: dict) -> dict[str, list[dict]]:
    """The records a source spec names, by split: ``fixture`` options or a ``hub`` dataset."""
    if "fixture" in spec:
        try:
            made = make_fixture(spec["schema"], **dict(spec["fixture"]))
        except ValueError as error:
            raise ValueError(f"sources.{spec.get('name', '?')}.fixture: {error}") from None
        return made if isinstance(made, dict) else {"train": made}
    hub = spec["hub"]
    import datasets  # heavy; only hub sources need it

    splits = hub.get("splits") or [hub.get("split", "train")]
    return {
        split: datasets.load_dataset(
            hub["path"], hub.get("name"), split=split, revision=hub.get("revision"),
            data_files=hub.get("data_files"),
        ).to_list()
        for split in splits
    }


def write_source(spec: dict, output: str | Path) -> dict[str, int]:
    """Validate and write a source's splits as parquet files in a folder; row counts back."""
    splits = fetch_splits(spec)
    for split, records in splits.items():
        validate_records(records, spec["schema"], f"{output}/{split}.parquet")
    with atomic_path(output) as tmp:
        tmp.mkdir()
        for split, records in splits.items():
            pq.write_table(pa.Table.from_pylist(records), tmp / f"{split}.parquet")
        # The order splits were listed in, which builders reading every split follow.
        (tmp / SPLIT_ORDER).write_text(json.dumps(list(splits)) + "\n")
    return {split: len(records) for split, records in splits.items()}


def read_source(folder: str | Path, schema: str, split: str = "train") -> list[dict]:
    path = Path(folder) / f"{split}.parquet"
    if not path.exists():
        available = sorted(p.stem for p in Path(folder).glob("*.parquet"))
        raise FileNotFoundError(f"{path}: no split {split!r}; available: {available}")
    return load_records(path, schema)


def read_all_splits(folder: str | Path, schema: str) -> list[dict]:
    """Every split's records, in the order the source listed its splits."""
    order = json.loads((Path(folder) / SPLIT_ORDER).read_text())
    return [record for split in order for record in read_source(folder, schema, split)]
