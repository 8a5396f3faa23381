"""Config overlays: a config file with a top-level ``extends: PATH`` key is laid over the
config file it names; with ``extends: [PATH, ...]`` it is laid over the files it names, each
laid over the one before (how the embedded default is composed of a base and each study's
fragment, and a study's small config of the base and its own).

Mappings merge key by key; a list or a scalar replaces the base's value; a key set to null
removes the base's key. A file named may extend others in turn; a cycle is refused. ``PATH``
is looked up in the working directory first, then beside the extending file, then in the folder
holding the reprolm package (``reprolm/studies/{study}/config.yaml``: a study's fragment).
"""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import yaml

from reprolm.errors import ConfigError
from reprolm.io import read_yaml

EXTENDS = "extends"
# Where a path is looked up last: the folder holding the reprolm package, so that the studies'
# fragments of the embedded default (reprolm/studies/{study}/config.yaml) are found wherever the
# package is (a checkout's src/, an edited copy, a run folder elsewhere).
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def load(path: str | Path, root: str | Path | None = None) -> dict:
    """The config in the YAML file ``path``, resolved (see :func:`resolve`)."""
    return resolve(_read(Path(path)), path, root)


def resolve(config: Mapping, origin: str | Path, root: str | Path | None = None) -> dict:
    """``config`` (read from ``origin``) laid over the chain of files its ``extends`` names;
    ``config`` itself unchanged when it has no ``extends``. ``root``: the working directory
    (default: the current one)."""
    return _resolve(config, Path(origin), Path.cwd() if root is None else Path(root), ())


def overlay_origin(configfiles: Sequence[str | Path]) -> Path:
    """Of several config files merged in order, the one whose ``extends`` the merge keeps:
    the last that has the key (the last file, where none has)."""
    for path in reversed(configfiles):
        if EXTENDS in _read(Path(path)):
            return Path(path)
    return Path(configfiles[-1])


def extends_chain(origin: str | Path, root: str | Path | None = None) -> list[Path]:
    """``origin`` and the files its chain of single ``extends`` names, each laid over the next;
    the last is the file the chain is laid on (a file that extends none, or composes a list of
    files, ends it)."""
    root = Path.cwd() if root is None else Path(root)
    chain = [Path(origin)]
    while True:
        extends = _read(chain[-1]).get(EXTENDS)
        if not isinstance(extends, str) or not extends:
            return chain
        following = _locate(extends, chain[-1], root)
        if any(path.resolve() == following.resolve() for path in chain):
            return chain
        chain.append(following)


# How the keys given on Snakemake's command line are named in an error.
COMMAND_LINE = "--config"


@contextlib.contextmanager
def naming_the_file(
    configfiles: Sequence[str | Path], overrides: Mapping | None = None, root: str | Path | None = None
) -> Iterator[None]:
    """A ConfigError raised inside names the file that set the key it is about (or
    ``--config``): of the config files merged in order, the files their ``extends`` chain
    names, and the command line's ``overrides`` on top, the one whose value the merged config
    holds at that key."""
    try:
        yield
    except ConfigError as error:
        root = Path.cwd() if root is None else Path(root)
        layers = [(COMMAND_LINE, overrides or {})]
        layers += [(path, _read(path)) for path in map(Path, reversed(configfiles))]
        layers += _bases(Path(overlay_origin(configfiles)), root)
        shown = [(_shown(path, root), layer) for path, layer in layers]
        origin = key_origin(error.key, shown) if error.key else None
        if origin is None:
            raise
        raise ConfigError(f"{origin}: {error}") from error


def key_origin(key: Sequence[str], layers: Sequence[tuple[str, Mapping]]) -> str | None:
    """Of config ``layers`` (name, raw mapping), the first laid over the next, the name of the
    one whose value a merge of them holds at ``key``: the first that sets the key, or replaces
    a mapping above it with a value of another kind (a list, a scalar, null); None where no
    layer holds any of it."""
    for name, layer in layers:
        node = layer
        for part in key:
            if not isinstance(node, Mapping):
                return name
            if part not in node:
                break
            node = node[part]
        else:
            return name
    return None


def _bases(origin: Path, root: Path, seen: frozenset = frozenset()) -> list[tuple[Path, Mapping]]:
    """The files ``origin``'s ``extends`` names, directly or in turn, with their content: the
    one whose values win first (of a list, the last file, then the files it extends)."""
    seen = seen | {origin.resolve()}
    extends = _read(origin).get(EXTENDS)
    named = [extends] if isinstance(extends, str) else extends if isinstance(extends, list) else []
    bases = []
    for name in reversed(named):
        if not isinstance(name, str) or not name:
            continue
        path = _locate(name, origin, root)
        if path.resolve() in seen:
            continue
        bases.append((path, _read(path)))
        bases += _bases(path, root, seen)
    return bases


def _shown(path: Path | str, root: Path) -> str:
    """A file's path as an error shows it: relative to the working directory where it is
    inside it."""
    if path == COMMAND_LINE:
        return path
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _extended(config: Mapping, origin: Path) -> list[str]:
    """The files ``config``'s ``extends`` names, in the order they are laid over each other."""
    extends = config[EXTENDS]
    if isinstance(extends, str) and extends:
        return [extends]
    if isinstance(extends, list) and extends and all(isinstance(name, str) and name for name in extends):
        return extends
    raise ConfigError(f"{origin}: {EXTENDS}: expected the path of a config file or a list of them, got {extends!r}")


def _resolve(config: Mapping, origin: Path, root: Path, chain: tuple[Path, ...]) -> dict:
    chain = (*chain, origin.resolve())
    if EXTENDS not in config:
        return dict(config)
    merged: dict = {}
    laid: list[str] = []
    for extends in _extended(config, origin):
        base_path = _locate(extends, origin, root)
        if base_path.resolve() in chain:
            cycle = " -> ".join(str(path) for path in (*chain, base_path.resolve()))
            raise ConfigError(f"{origin}: {EXTENDS}: {extends} is already in the chain of files it extends ({cycle})")
        base = _resolve(_read(base_path), base_path, root, chain)
        merged = _merge(merged, base, f"{base_path}: ", " and ".join(laid)) if laid else base
        laid.append(str(base_path))
    overlay = {key: value for key, value in config.items() if key != EXTENDS}
    return _merge(merged, overlay, f"{origin}: ", " and ".join(laid))


def _locate(extends: str, origin: Path, root: Path) -> Path:
    places = [Path("/")] if Path(extends).is_absolute() else [root, origin.parent, PACKAGE_ROOT]
    candidates = [place / extends for place in places]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = " or ".join(str(candidate) for candidate in dict.fromkeys(candidates))
    meant = next((found for place in places if (found := _near_miss(place, extends))), None)
    hint = f"; did you mean {meant}?" if meant else ""
    raise ConfigError(f"{origin}: {EXTENDS}: {extends}: no such config file (looked for {looked}){hint}")


def _near_miss(place: Path, extends: str) -> str | None:
    """``extends`` with each folder or file name that ``place`` lacks replaced by the closest
    one there (a misspelt study, ``reprolm/studies/rulr/config.yaml``), where that names a file."""
    current, named = place, []
    for part in Path(extends).parts:
        if not (current / part).exists():
            siblings = [entry.name for entry in current.iterdir()] if current.is_dir() else []
            close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.6)
            if not close:
                return None
            part = close[0]
        current, named = current / part, [*named, part]
    return str(Path(*named)) if current.is_file() and str(Path(*named)) != extends else None


def _merge(base: Mapping, overlay: Mapping, where: str, base_files: str) -> dict:
    merged = dict(base)
    for key, value in overlay.items():
        if value is None:
            if key not in merged:
                raise ConfigError(f"{where}{key}: set to null to remove it, but {base_files} has no such key")
            del merged[key]
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value, f"{where}{key}.", base_files)
        else:
            merged[key] = value
    return merged


def _read(path: Path) -> dict:
    try:
        config = read_yaml(path)
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML: {error}") from None
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(config).__name__}")
    return config
