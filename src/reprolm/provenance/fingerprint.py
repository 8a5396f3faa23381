"""Fingerprints of the library code a job runs, so that editing ``src/reprolm`` reruns
exactly the jobs whose results could change.

Snakemake's own ``code`` trigger sees a rule's script, not the library it calls. A job's
fingerprint hashes the definitions (functions, classes, module-level names) its script
imports from ``reprolm``, and everything they reference, followed across modules by
reading the source: a function that calls ``length.level_scores`` depends on that function,
not on the whole ``length`` module. Docstrings, comments and formatting are left out, so
editing them reruns nothing.

Registries that dispatch by name (metrics, dataset builders, prompt kinds, study table
writers, upstream schemas: those built as ``Registry(..., per_job=True)``) are not followed as
a whole: the rule names the entries its job uses (the job's metric, builder, prompt kind,
study, the schemas of the sources it reads), so editing one metric reruns that metric's scores
only. Anything the analysis
cannot see (a name built at run time) errs towards rerunning more: a module used as a
value, not through its attributes, counts as wholly used.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import reprolm

PACKAGE = "reprolm"
PACKAGE_DIR = Path(reprolm.__file__).resolve().parent
PREAMBLE = "<module>"  # a module's top-level statements that define no name

Ref = tuple[str, str]  # (module, top-level name)


def module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = PACKAGE_DIR.joinpath(*parts[1:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:] or [ast.Pass()]
    return body


def _defined_names(statement: ast.stmt) -> list[str]:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    targets = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _bound(statement: ast.Import | ast.ImportFrom) -> dict[str, tuple[str, str | None]]:
    """Names a ``reprolm`` import binds: alias -> (module, name or None for a module itself)."""
    bound = {}
    if isinstance(statement, ast.ImportFrom):
        if statement.module and statement.module.split(".")[0] == PACKAGE:
            for alias in statement.names:
                submodule = f"{statement.module}.{alias.name}"
                bound[alias.asname or alias.name] = (
                    (submodule, None) if module_file(submodule) else (statement.module, alias.name)
                )
    else:
        for alias in statement.names:
            if alias.name.split(".")[0] == PACKAGE:
                bound[alias.asname or alias.name] = (alias.name, None) if alias.asname else (PACKAGE, None)
    return bound


# Definitions whose body may open with a docstring (a module's is left out where it is parsed).
_DOCUMENTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _dump(node) -> str:
    """``ast.dump(node)``, the same text, without its indentation machinery (a third of the
    time a dry run spends on fingerprints)."""
    if isinstance(node, ast.AST):
        kind = type(node)
        fields = []
        for name in node._fields:
            try:
                value = getattr(node, name)
            except AttributeError:
                continue
            if value is None and getattr(kind, name, ...) is None:
                continue
            fields.append(f"{name}={_dump(value)}")
        return f"{kind.__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(map(_dump, node))}]"
    return repr(node)


@dataclass
class Statement:
    """A top-level statement, its docstrings left out: the names it uses (with the attribute
    read from each, where it is one) and the ``reprolm`` names it imports, found in one pass."""

    node: ast.stmt
    names: set[tuple[str, str | None]] = field(default_factory=set)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # One walk over the statement (ast.walk's generators cost more than the parse).
        pending = [self.node]
        while pending:
            node = pending.pop()
            kind = type(node)
            if kind is ast.Name:
                self.names.add((node.id, None))
                continue
            if kind is ast.Attribute and type(node.value) is ast.Name:
                self.names.add((node.value.id, node.attr))
                continue
            if kind is ast.Import or kind is ast.ImportFrom:
                self.imports.update(_bound(node))
                continue
            if kind in _DOCUMENTED:
                node.body = _without_docstring(node.body)
            for name in node._fields:
                value = getattr(node, name, None)
                if isinstance(value, list):
                    pending.extend(item for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    pending.append(value)


@dataclass
class ModuleIndex:
    definitions: dict[str, list[Statement]] = field(default_factory=dict)
    preamble: list[Statement] = field(default_factory=list)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)


@cache
def module_index(module: str) -> ModuleIndex:
    path = module_file(module)
    if path is None:
        raise ModuleNotFoundError(f"{module}: not a module of {PACKAGE_DIR}")
    tree = ast.parse(path.read_text(), filename=str(path))
    index = ModuleIndex()
    for node in _without_docstring(tree.body):
        statement = Statement(node)
        # An import anywhere in the module (a function's too) binds its name module-wide.
        index.imports.update(statement.imports)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        names = _defined_names(node)
        if not names:
            index.preamble.append(statement)
        for name in names:
            index.definitions.setdefault(name, []).append(statement)
    return index


def _references(statements: list[Statement], module: str) -> set[Ref]:
    """What ``statements`` use: same-module names, and imported names (``alias.attr``
    resolves to the attribute of an imported module)."""
    index = module_index(module)
    imports = {**index.imports}
    for statement in statements:
        imports.update(statement.imports)
    used: set[Ref] = set()
    for statement in statements:
        for name, attribute in statement.names:
            if name in imports:
                target, imported = imports[name]
                if imported is not None:
                    used.add((target, imported))
                elif attribute is not None:
                    used.add((target, attribute))
                else:
                    used.update((target, n) for n in module_index(target).definitions)
                    used.add((target, PREAMBLE))
            elif name in index.definitions:
                used.add((module, name))
    return used


@cache
def _resolve(ref: Ref) -> Ref | None:
    """A name imported into a module (``from a import f`` in ``b``: ``b.f`` is ``a.f``) or a
    submodule reached as an attribute, followed to where it is defined."""
    module, name = ref
    if name == PREAMBLE or module_file(module) is None:
        return ref if module_file(module) else None
    index = module_index(module)
    if name in index.definitions:
        return ref
    if name in index.imports:
        target, attribute = index.imports[name]
        return _resolve((target, attribute)) if attribute else (target, PREAMBLE)
    if module_file(f"{module}.{name}"):
        return (f"{module}.{name}", PREAMBLE)
    return None


def _is_per_job_registry(statement: ast.stmt) -> bool:
    """``NAME = Registry(..., per_job=True)``: a registry whose jobs add the entry they use."""
    value = getattr(statement, "value", None)
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "Registry"
        and any(
            keyword.arg == "per_job" and isinstance(keyword.value, ast.Constant) and keyword.value.value is True
            for keyword in value.keywords
        )
    )


@cache
def _definition(ref: Ref) -> tuple[str, tuple[Ref, ...]]:
    """A definition's source hash (as parsed) and the definitions it reaches directly.

    Computed once per definition: a dry run asks for the closures of hundreds of jobs,
    which share most of their definitions."""
    module, name = ref
    index = module_index(module)
    statements = index.preamble if name == PREAMBLE else index.definitions[name]
    if name != PREAMBLE and all(_is_per_job_registry(statement.node) for statement in statements):
        return hashlib.sha256(b"").hexdigest(), ()
    source_hash = hashlib.sha256("\n".join(_dump(statement.node) for statement in statements).encode()).hexdigest()
    # Any use of a module runs its top-level statements.
    used = {(module, PREAMBLE)} | {
        resolved for reference in _references(statements, module) if (resolved := _resolve(reference))
    }
    return source_hash, tuple(sorted(used))


def closure(entries: Iterable[Ref]) -> dict[Ref, str]:
    """Every definition the entries reach, with the hash of its source (as parsed)."""
    seen: dict[Ref, str] = {}
    pending = [resolved for entry in entries if (resolved := _resolve(entry))]
    while pending:
        ref = pending.pop()
        if ref not in seen:
            seen[ref], used = _definition(ref)
            pending += used
    return seen


@cache
def script_entries(script: str | Path) -> list[Ref]:
    """The ``reprolm`` names a workflow script imports."""
    tree = ast.parse(Path(script).read_text(), filename=str(script))
    bound = {}
    for node in tree.body:
        bound.update(Statement(node).imports)
    return [(target, name) if name else (target, PREAMBLE) for target, name in bound.values()]


def fingerprint(entries: Iterable[Ref]) -> str:
    reached = closure(entries)
    digest = hashlib.sha256()
    for (module, name), source_hash in sorted(reached.items()):
        digest.update(f"{module}:{name}:{source_hash}\n".encode())
    return digest.hexdigest()


@cache
def job_code(script: str, *plugins: Ref) -> str:
    """The fingerprint of a job: what its script imports, plus the registry entries (the
    job's metric, builder or table writer) it dispatches to."""
    return fingerprint([*script_entries(script), *plugins])


def entry_of(function) -> Ref:
    """A registered function as a reference to its definition."""
    return (function.__module__, function.__name__)


def entry_bound(module: str, value) -> Ref:
    """A registered object as a reference to the module-level statement that binds it."""
    names = [name for name, bound in vars(importlib.import_module(module)).items() if bound is value]
    if not names:
        raise LookupError(f"{value!r} is bound to no module-level name of {module}")
    return (module, names[0])
