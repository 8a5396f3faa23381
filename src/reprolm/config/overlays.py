"""Config overlays: a config file with a top-level ``extends: PATH`` key is laid over the
config file it names.

Mappings merge key by key; a list or a scalar replaces the base's value; a key set to null
removes the base's key (how a small config leaves out base models, recipes or studies).
The base may extend another file in turn; a cycle is refused. ``PATH`` is looked up in the
working directory first, then beside the extending file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from reprolm.config.errors import ConfigError
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
