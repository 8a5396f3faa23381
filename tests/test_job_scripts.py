"""Every job script (workflow/scripts, the studies' scripts/) imports only names its reprolm
modules define: a script renamed or removed in the library fails here, on the CPU, rather than
in the first cluster job that runs the script (read from the sources, nothing imported)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
SCRIPTS = sorted([*(REPO / "workflow" / "scripts").glob("*.py"), *(SRC / "reprolm" / "studies").glob("*/scripts/*.py")])


def module_source(module: str) -> Path | None:
    path = SRC.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def defined_names(source: Path) -> set[str]:
    """The names a module binds at its top level (functions, classes, assignments, imports),
    and its submodules."""
    names = {child.stem for child in source.parent.glob("*.py")} if source.name == "__init__.py" else set()
    names |= (
        {child.name for child in source.parent.iterdir() if child.is_dir()} if source.name == "__init__.py" else set()
    )
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {target.id for target in targets if isinstance(target, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def test_there_are_job_scripts_to_check():
    assert len(SCRIPTS) > 25


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: str(path.relative_to(REPO)))
def test_a_job_script_imports_only_what_its_modules_define(script):
    missing = []
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reprolm"):
            source = module_source(node.module)
            if source is None:
                missing.append(f"no module {node.module}")
                continue
            names = defined_names(source)
            missing += [f"{node.module}.{alias.name}" for alias in node.names if alias.name not in names]
    assert not missing, f"{script.relative_to(REPO)} imports what the library does not define: {missing}"
