"""Config overlays: a config file with a top-level ``extends: PATH`` key is laid over the
config file it names.

Mappings merge key by key; a list or a scalar replaces the base's value; a key set to null
removes the base's key (how a small config leaves out base models, recipes or studies).
The base may extend another file in turn; a cycle is refused. ``PATH`` is looked up in the
working directory first, then beside the extending file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from reprolm.errors import ConfigError
from reprolm.io import read_yaml

EXTENDS = "extends"


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
    """``origin`` and the files its ``extends`` chain names, each laid over the next; the last
    is the file the whole chain is laid on."""
    root = Path.cwd() if root is None else Path(root)
    return [Path(origin), *(path for path, _ in _bases(Path(origin), root))]


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


def _bases(origin: Path, root: Path) -> list[tuple[Path, Mapping]]:
    """The files ``origin``'s ``extends`` chain names, nearest first, with their content."""
    bases, config = [], _read(origin)
    while EXTENDS in config and isinstance(config[EXTENDS], str):
        origin = _locate(config[EXTENDS], origin, root)
        if any(path.resolve() == origin.resolve() for path, _ in bases):
            break
        config = _read(origin)
        bases.append((origin, config))
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


def _resolve(config: Mapping, origin: Path, root: Path, chain: tuple[Path, ...]) -> dict:
    chain = (*chain, origin.resolve())
    if EXTENDS not in config:
        return dict(config)
    extends = config[EXTENDS]
    if not isinstance(extends, str) or not extends:
        raise ConfigError(f"{origin}: {EXTENDS}: expected the path of a config file, got {extends!r}")
    base_path = _locate(extends, origin, root)
    if base_path.resolve() in chain:
        cycle = " -> ".join(str(path) for path in (*chain, base_path.resolve()))
        raise ConfigError(f"{origin}: {EXTENDS}: {extends} is already in the chain of files it extends ({cycle})")
    base = _resolve(_read(base_path), base_path, root, chain)
    overlay = {key: value for key, value in config.items() if key != EXTENDS}
    return _merge(base, overlay, f"{origin}: ", base_path)


def _locate(extends: str, origin: Path, root: Path) -> Path:
    candidates = [Path(extends)] if Path(extends).is_absolute() else [root / extends, origin.parent / extends]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = " or ".join(str(candidate) for candidate in dict.fromkeys(candidates))
    raise ConfigError(f"{origin}: {EXTENDS}: {extends}: no such config file (looked for {looked})")


def _merge(base: Mapping, overlay: Mapping, where: str, base_path: Path) -> dict:
    merged = dict(base)
    for key, value in overlay.items():
        if value is None:
            if key not in merged:
                raise ConfigError(f"{where}{key}: set to null to remove it, but {base_path} has no such key")
            del merged[key]
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value, f"{where}{key}.", base_path)
        else:
            merged[key] = value
    return merged


def _read(path: Path) -> dict:
    config = read_yaml(path)
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise ConfigError(f"{path}: expected a mapping of config keys, got {type(config).__name__}")
    return config
