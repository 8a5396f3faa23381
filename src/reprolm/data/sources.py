"""Raw sources: fixtures made locally, datasets downloaded from the hub, the researcher's own
files, or a benchmark's released files converted, to parquet.

A source is a folder ``resources/raw/{source}/`` with one ``{split}.parquet`` per split.
"""

from __future__ import annotations

import codecs
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from reprolm.data.released_ratings import convert_released, released_paths
from reprolm.data.schemas import DataError
from reprolm.data.upstream import load_records, make_fixture, validate_records
from reprolm.io import atomic_path
from reprolm.paths import on_the_hub
from reprolm.pins import fetch_locked_file, pinned_commit
from reprolm.provenance.records import note_read

SPLIT_ORDER = "splits.json"
# The packaged `datasets` builder that reads a file, by the file's extension.
FILE_BUILDERS = {".parquet": "parquet", ".jsonl": "json", ".json": "json", ".csv": "csv"}
NEWLINE = b"\n"
JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
# What `datasets` 4+ raises for a dataset that is a Python loading script (it runs none).
LOADING_SCRIPT_REFUSAL = "Dataset scripts are no longer supported"


def source_file_paths(spec: dict) -> list[str]:
    """Every file a ``files`` or ``released`` source names (none for other sources)."""
    if "released" in spec:
        return released_paths(spec["released"])
    return [path for paths in _split_paths(spec.get("files", {})).values() for path in paths]


def _split_paths(files: dict) -> dict[str, list[str]]:
    return {split: [paths] if isinstance(paths, str) else list(paths) for split, paths in files.items()}


def file_splits(source: str, files: dict) -> dict[str, tuple[str, list[str]]]:
    """Each split's builder and paths, every file checked before any is read: it exists and
    its extension names a format, one format per split."""
    splits = {}
    for split, paths in _split_paths(files).items():
        where = f"sources.{source}.files.{split}"
        builders = set()
        for path in paths:
            suffix = Path(path).suffix.lower()
            if suffix not in FILE_BUILDERS:
                raise ValueError(
                    f"{where}: {path}: unknown file type {suffix or '(no extension)'!r}; known: {sorted(FILE_BUILDERS)}"
                )
            if not Path(path).is_file():
                raise FileNotFoundError(
                    f"{where}: {path}: no such file (paths are relative to the working directory, {Path.cwd()})"
                )
            if Path(path).stat().st_size == 0:
                raise ValueError(f"{where}: {path}: the file is empty")
            builders.add(FILE_BUILDERS[suffix])
        if len(builders) > 1:
            raise ValueError(f"{where}: a split's files must share one format; got {sorted(builders)}")
        splits[split] = (builders.pop(), paths)
    return splits


def fetch_splits(spec: dict) -> dict[str, list[dict]]:
    """The records a source spec names, by split: ``fixture`` options, a ``hub`` dataset, the
    researcher's own ``files``, or a benchmark's ``released`` files (one split, train)."""
    source = spec.get("name", "?")
    if "released" in spec:
        return {"train": convert_released(source, spec)}
    if "fixture" in spec:
        try:
            made = make_fixture(spec["schema"], **dict(spec["fixture"]))
        except ValueError as error:
            raise ValueError(f"sources.{source}.fixture: {error}") from None
        return made if isinstance(made, dict) else {"train": made}
    import datasets  # heavy; only hub and file sources need it

    columns = spec.get("columns", {})
    if "files" in spec:
        # Each split through the packaged builder of its format, under the split name the
        # config gives it (datasets' own split inference knows only train/test/validation).
        read = {}
        for split, (builder, paths) in file_splits(source, spec["files"]).items():
            where = f"sources.{source}.files.{split}"
            for path in paths:
                check_readable(where, path, builder)
            dataset = _load_files(builder, split, paths, where)
            if not len(dataset):
                raise ValueError(f"{where}: {', '.join(paths)}: no rows")
            read[split] = renamed_columns(dataset, columns, f"{where} ({', '.join(paths)})").to_list()
        return read
    hub = spec["hub"]
    splits = hub.get("splits") or [hub.get("split", "train")]
    with tempfile.TemporaryDirectory(prefix="reprolm-files-") as downloads:
        data_files, revision = _pinned_reads(source, hub, Path(downloads))
        try:
            return {
                split: renamed_columns(
                    datasets.load_dataset(
                        hub["path"], hub.get("name"), split=split, revision=revision, data_files=data_files
                    ),
                    columns,
                    f"sources.{source}.hub {hub['path']} ({split})",
                ).to_list()
                for split in splits
            }
        except RuntimeError as error:
            if LOADING_SCRIPT_REFUSAL not in str(error):
                raise
            _refuse_loading_script(source, hub, error)


def _pinned_reads(source: str, hub: Mapping, downloads: Path) -> tuple[dict | None, str | None]:
    """What a hub source reads, pinned and recorded (the step's ``read``): its hub dataset at
    the lock's commit (an unpinned run: the hub's commit now), and each file it names by URL
    fetched into ``downloads`` with its sha256 checked against the lock's (``locked_files``).
    Returns the data files as ``datasets`` reads them and the dataset's revision."""
    revision = hub.get("revision")
    if on_the_hub(hub["path"]):
        revision = pinned_commit("dataset", hub["path"], revision)
        note_read({"kind": "dataset", "repo": hub["path"], "name": hub.get("name"), "revision": revision})
    files = hub.get("data_files")
    if not files:
        return files, revision
    locked = hub.get("locked_files") or {}
    local: dict = {}
    for split, urls in files.items():
        paths = []
        for index, url in enumerate([urls] if isinstance(urls, str) else urls):
            if "://" not in url:
                paths.append(url)
                continue
            target = downloads / split / f"{index}-{Path(url.split('?')[0]).name}"
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = fetch_locked_file(url, target, locked.get(url), f"sources.{source}.hub.data_files.{split}")
            note_read({"kind": "url", "url": url, "sha256": digest})
            paths.append(str(target))
        local[split] = paths
    return local, revision


def _refuse_loading_script(source: str, hub: Mapping, error: RuntimeError) -> None:
    import datasets

    raise ValueError(
        f"sources.{source}.hub.path {hub['path']!r} is a dataset loading script, which datasets "
        f"{datasets.__version__} does not run ({error}). Name its data files instead: "
        "hub: {path: parquet|json|csv, data_files: {split: URL}} (pinned resolve URLs, e.g. of the "
        "hub's parquet export on refs/convert/parquet), or files: {split: path} for local copies"
    ) from None


def _load_files(builder: str, split: str, paths: list[str], where: str):
    """``paths`` read by the packaged ``datasets`` builder; a file it cannot parse (a CSV row
    with more fields than its header) is named with the config key and the reader's own
    words, without the chain of ``datasets``' tracebacks around them."""
    import datasets

    try:
        return datasets.load_dataset(builder, data_files={split: paths}, split=split)
    except datasets.exceptions.DatasetGenerationError as error:
        cause: BaseException = error
        while cause.__cause__ is not None:
            cause = cause.__cause__
        raise ValueError(f"{where}: {', '.join(paths)}: the {builder} reader failed: {cause}") from None


def renamed_columns(dataset, columns: Mapping[str, str], origin: str):
    """A ``datasets.Dataset`` with the schema's field names: ``columns`` maps each field to
    the column holding it (a column already under a mapped field's name gives way)."""
    if not columns:
        return dataset
    for field, column in columns.items():
        if column not in dataset.column_names:
            raise DataError(
                origin,
                0,
                column,
                f"no such column (columns.{field} names it); the columns are {sorted(dataset.column_names)}",
            )
    displaced = [field for field in columns if field in dataset.column_names and field not in columns.values()]
    return dataset.remove_columns(displaced).rename_columns(
        {column: field for field, column in columns.items() if column != field}
    )


def check_readable(where: str, path: str, builder: str) -> None:
    """A file its builder can read, or an error naming it: a parquet file, or UTF-8 text
    that is not empty; a binary or non-UTF-8 file is named with the byte offset and line of
    its first offending byte. Read in blocks, so a large file costs no more memory."""
    if builder == "parquet":
        try:
            pq.ParquetFile(path)
        except pa.ArrowInvalid as error:
            raise ValueError(f"{where}: {path}: not a parquet file ({error})") from None
        return
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset, line, has_text = 0, 1, False
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            nul = block.find(b"\0")
            if nul >= 0:
                raise ValueError(
                    f"{where}: {path}: a binary file, not UTF-8 text (a NUL byte at byte offset {offset + nul}, "
                    f"line {line + block.count(NEWLINE, 0, nul)})"
                )
            # An incomplete character left from the last block starts this one's input.
            pending = decoder.getstate()[0]
            try:
                has_text = bool(decoder.decode(block).strip()) or has_text
            except UnicodeDecodeError as error:
                data = pending + block
                raise ValueError(
                    f"{where}: {path}: not UTF-8 text: byte 0x{data[error.start]:02x} at byte offset "
                    f"{offset - len(pending) + error.start}, line {line + data.count(NEWLINE, 0, error.start)} "
                    "(save the file as UTF-8)"
                ) from None
            offset += len(block)
            line += block.count(NEWLINE)
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise ValueError(
            f"{where}: {path}: not UTF-8 text: it ends inside a character, at byte offset "
            f"{offset - len(decoder.getstate()[0])}, line {line}"
        ) from None
    if not has_text:
        raise ValueError(f"{where}: {path}: the file is empty (whitespace only)")
    if builder == "json":
        check_json(where, path)


def check_json(where: str, path: str) -> None:
    """JSON a ``datasets`` json builder can read, or an error naming the line: a ``.json``
    file one JSON document or JSON lines, a ``.jsonl`` file JSON lines, each non-blank line one
    object. A bad last line without a newline is named as a file cut short (an interrupted
    copy or download). Read line by line, so a large JSON-lines file costs no more memory."""
    if Path(path).suffix.lower() == ".json":
        text = Path(path).read_text(encoding="utf-8")
        try:
            json.loads(text)
            return
        except json.JSONDecodeError as error:
            # Anything but a second document after the first is a broken document.
            if error.msg != "Extra data":
                cut = "; the file ends there: it looks cut short" if error.pos >= len(text.rstrip()) else ""
                raise ValueError(
                    f"{where}: {path}: line {error.lineno}: not valid JSON ({error.msg}: column {error.colno}){cut}"
                ) from None
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                # Only the file's last line can end without a newline.
                cut = (
                    ""
                    if line.endswith("\n")
                    else "; it is the file's last line and ends without a newline: the file looks cut short"
                )
                raise ValueError(
                    f"{where}: {path}: line {number}: not valid JSON ({error.msg}: column {error.colno}){cut}"
                ) from None
            if not isinstance(record, dict):
                raise ValueError(
                    f"{where}: {path}: line {number}: a JSON {JSON_TYPES[type(record)]}, not an object "
                    "(JSON lines hold one record, an object, per line)"
                )


def write_source(spec: dict, output: str | Path) -> dict[str, int]:
    """Validate and write a source's splits as parquet files in a folder; row counts back."""
    splits = fetch_splits(spec)
    for split, records in splits.items():
        validate_records(records, spec["schema"], _records_origin(spec, split, output))
    with atomic_path(output) as tmp:
        tmp.mkdir()
        for split, records in splits.items():
            pq.write_table(pa.Table.from_pylist(records), tmp / f"{split}.parquet")
        # The order splits were listed in, which builders reading every split follow.
        (tmp / SPLIT_ORDER).write_text(json.dumps(list(splits)) + "\n")
    return {split: len(records) for split, records in splits.items()}


def _records_origin(spec: dict, split: str, output: str | Path) -> str:
    """Where a split's rows come from, as a bad row's error names it: the researcher's own
    files (rows counted across them in order), else the file the split is written to."""
    if "files" in spec:
        paths = _split_paths(spec["files"])[split]
        return f"sources.{spec.get('name', '?')}.files.{split} ({', '.join(paths)})"
    if "released" in spec:
        return f"sources.{spec.get('name', '?')}.released, as converted"
    return f"{output}/{split}.parquet"


def read_source(folder: str | Path, schema: str, split: str = "train") -> list[dict]:
    path = Path(folder) / f"{split}.parquet"
    if not path.exists():
        available = sorted(p.stem for p in Path(folder).glob("*.parquet"))
        raise FileNotFoundError(f"{path}: no split {split!r}; available: {available}")
    return load_records(path, schema)


def source_splits(folder: str | Path) -> list[str]:
    """A written source's split names, in the order the source listed them."""
    return json.loads((Path(folder) / SPLIT_ORDER).read_text())


def read_all_splits(folder: str | Path, schema: str) -> list[dict]:
    """Every split's records, in the order the source listed its splits."""
    return [record for split in source_splits(folder) for record in read_source(folder, schema, split)]
