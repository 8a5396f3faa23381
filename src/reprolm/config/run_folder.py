"""One run per folder: the config a folder's results were made with is recorded in
``results/run_config.yaml``, and a run of another config there is refused before its first job.

Outputs are named by study, dataset, base and recipe (``results/tables/{study}``, the
leaderboard, ``results/datasets/{name}``), not by config: a second config run in the same
folder would replace the first one's results under the same names. A run is named by its base
config, the file its config files are laid on: the end of the ``extends`` chain (a file that
composes a list of files is its own base), else the first file given (Snakemake merges the
others over it); ``config/config.yaml`` for the embedded default. An overlay of that file,
``--config`` or an edit of the file is a change of the run (Snakemake reruns what it touched);
another base config, ``config/paper.yaml`` where the
default ran, runs in a folder of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import yaml

from reprolm.config.overlays import extends_chain, overlay_origin
from reprolm.errors import ConfigError
from reprolm.io import atomic_path, read_yaml

RECORD = Path("results") / "run_config.yaml"
DEFAULT_CONFIG = Path("config") / "config.yaml"
HEADER = (
    "# Written by the workflow: the config this folder's results were made with. A run of another\n"
    "# base config here is refused (reprolm.config.run_folder; docs/configuration.md).\n"
)


def run_files(configfiles: Sequence[str | Path], root: Path) -> list[str]:
    """The config files of a run as given, then the files the ``extends`` chain adds, each
    as a run's record shows it (relative to the working directory where inside it)."""
    files = _files(configfiles, root)
    chain = extends_chain(overlay_origin(files), root)[1:]
    return list(dict.fromkeys(_shown(path, root) for path in [*files, *chain]))


def base_config(configfiles: Sequence[str | Path], root: Path) -> str:
    """The file a run's config files are laid on (see the module's description)."""
    files = _files(configfiles, root)
    chain = extends_chain(overlay_origin(files), root)
    return _shown(chain[-1] if len(chain) > 1 else files[0], root)


def other_run(configfiles: Sequence[str | Path], root: str | Path | None = None) -> str | None:
    """Why a run of ``configfiles`` may not run in the folder ``root`` (default: the working
    directory): the folder holds the run of another base config; None where it holds none, or
    this one's."""
    root = Path.cwd() if root is None else Path(root)
    recorded = _recorded(root)
    if recorded is None:
        return None
    base = base_config(configfiles, root)
    if _same_file(recorded, base, root):
        return None
    return (
        f"{RECORD}: this folder holds the results of {recorded}, which a run of {base} would replace "
        f"under the same names: run it in a folder of its own (`snakemake --directory DIR --configfile "
        f"{base}` with config/ copied to DIR; docs/configuration.md, One run per folder), or make it an "
        f"overlay (`extends: {recorded}`) to change this run"
    )


def refuse_other_run(configfiles: Sequence[str | Path], root: str | Path | None = None) -> None:
    """Raises the :func:`other_run` refusal, if any."""
    refusal = other_run(configfiles, root)
    if refusal is not None:
        raise ConfigError(refusal)


def record_run(configfiles: Sequence[str | Path], root: str | Path | None = None) -> None:
    """Records the base config and the config files of a run about to start in ``root``;
    the file is left as it is where it says the same already."""
    root = Path.cwd() if root is None else Path(root)
    content = HEADER + yaml.safe_dump(
        {"config": base_config(configfiles, root), "files": run_files(configfiles, root)}, sort_keys=False
    )
    target = root / RECORD
    if target.is_file() and target.read_text() == content:
        return
    with atomic_path(target) as tmp:
        tmp.write_text(content)


def _files(configfiles: Sequence[str | Path], root: Path) -> list[Path]:
    """The config files as Snakemake gives them (relative ones from ``root``), or the default."""
    return [root / path for path in map(Path, configfiles)] or [root / DEFAULT_CONFIG]


def _recorded(root: Path) -> str | None:
    path = root / RECORD
    if not path.is_file():
        return None
    record = read_yaml(path)
    if not isinstance(record, dict) or not isinstance(record.get("config"), str):
        raise ConfigError(f"{path}: expected `config: FILE`, the config this folder's results were made with")
    return record["config"]


def _same_file(recorded: str, base: str, root: Path) -> bool:
    return (root / recorded).resolve() == (root / base).resolve()


def _shown(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())
