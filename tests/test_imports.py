"""The package's import graph, read from its source (no module is imported): its floors
(:data:`FLOORS`) import only downward, in import statements and in strings that name a
module (lazy ``"module:object"`` entries); no cycle among reprolm's modules, imports inside
functions counted; a reprolm module imported inside a
function only where importing it loads a heavy library (torch, pandas, ...), so that what
imports the function's module stays light; and the config lookups the workflow reads while
it parses load none of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
# The package's floors, lowest first, each a set of reprolm's top-level modules and packages
# (docs/development.md: "Floors"): a module imports from its own floor and those below, never
# from above, so that each floor can be read, tested and replaced without the ones above it.
FLOORS = [
    # ground: what every floor uses and that knows no stage
    {
        "errors",
        "registry",
        "paths",
        "io",
        "stats",
        "length",
        "stopping",
        "progress",
        "oserrors",
        "stages",
        "forkserver",
        "pins",
        "gpu_check",
        "hub_token",
    },
    {"provenance"},
    {"data"},
    {"models"},
    # the stages
    {"train", "generate", "merge", "score"},
    {"aggregate"},
    {"config"},
    {"studies"},
    # the tools: what checks, plans, rehearses and runs a config
    {"checks", "config_docs", "dag_jobs", "need", "plan", "rehearse", "run_summary", "impact", "lock", "cli"},
]
# Upward references still in the source, each with why; one that no longer occurs fails the
# test, so that the list only shrinks.
DOWNLOADS = (
    "issue 49's downloads: an lm-eval task's datasets are fetched (data.hub_assets) through the "
    "lm-eval bridge, and a hub source's check of a hub id is config.hub_ids'; their place is "
    "beside the lm-eval bridge and on the ground floor (reprolm.pins)"
)
KNOWN_UPWARD = {
    ("reprolm.data.hub_assets", "reprolm.score"): DOWNLOADS,
}
# A reprolm module named in a string: ``"reprolm.score.metrics"``, ``"reprolm.studies.x:f"``.
MODULE_IN_STRING = re.compile(r"\breprolm\.([a-z_]+)")
# Libraries a module may import lazily, and the modules that load them with it: each takes
# from a tenth of a second (numpy) to many seconds (torch), or runs only on a GPU (vllm).
HEAVY_LIBRARIES = {
    "alpaca_eval",
    "bitsandbytes",
    "datasets",
    "deepspeed",
    "lm_eval",
    "matplotlib",
    "numpy",
    "pandas",
    "peft",
    "pyarrow",
    "scipy",
    "sentence_transformers",
    "statsmodels",
    "torch",
    "transformers",
    "trl",
    "vllm",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _targets(node: ast.Import | ast.ImportFrom, modules: set[str]) -> list[str]:
    """The module names an import statement loads (``from a import b``: ``a.b`` where it is a
    module, else ``a``); relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        raise AssertionError(f"relative import of {node.module!r}: the package imports absolutely")
    base = node.module or ""
    return [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]


class _Imports(ast.NodeVisitor):
    """(target, line, inside a function) of each import statement, ``if TYPE_CHECKING``
    blocks left out."""

    def __init__(self):
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self._depth = 0

    def visit_FunctionDef(self, node):
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node):
        if isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return
        self.generic_visit(node)

    def visit_Import(self, node):
        self.found.append((node, self._depth > 0))

    visit_ImportFrom = visit_Import


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]], dict[str, list]]:
    """(top-level edges, all edges, third-party top-level imports, function-level reprolm
    imports as (target, line)) by module. Importing ``a.b.c`` runs the packages ``a.b`` and
    ``a`` first: an edge to each, but for the importer's own packages."""
    files = {_module_name(path): path for path in (SRC / "reprolm").rglob("*.py")}
    modules = set(files)
    top: dict[str, set[str]] = {name: set() for name in files}
    every: dict[str, set[str]] = {name: set() for name in files}
    libraries: dict[str, set[str]] = {name: set() for name in files}
    lazy: dict[str, list] = {name: [] for name in files}
    for name, path in files.items():
        collector = _Imports()
        collector.visit(ast.parse(path.read_text(), str(path)))
        own_packages = {name.rsplit(".", depth)[0] for depth in range(1, name.count(".") + 1)}
        for node, in_function in collector.found:
            for target in _targets(node, modules):
                if not target.startswith("reprolm"):
                    if not in_function:
                        libraries[name].add(target.split(".")[0])
                    continue
                while target not in modules:
                    target = target.rsplit(".", 1)[0]
                loaded = {target} | {
                    target.rsplit(".", depth)[0] for depth in range(1, target.count(".") + 1)
                } - own_packages - {name}
                every[name] |= loaded
                if in_function:
                    lazy[name].append((target, node.lineno))
                else:
                    top[name] |= loaded
    return top, every, libraries, lazy


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for successor in sorted(edges[node]):
            if state.get(successor) == 1:
                return path[path.index(successor) :] + [successor]
            if successor not in state:
                found = visit(successor)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def heavy_modules(top: dict[str, set[str]], libraries: dict[str, set[str]]) -> dict[str, set[str]]:
    """The heavy libraries importing each module loads, through its top-level imports."""
    loads: dict[str, set[str]] = {}

    def of(name: str, seen: frozenset = frozenset()) -> set[str]:
        if name not in loads:
            found = libraries[name] & HEAVY_LIBRARIES
            for target in top[name] - seen - {name}:
                found |= of(target, seen | {name})
            loads[name] = found
        return loads[name]

    for name in top:
        of(name)
    return loads


def test_the_finder_names_a_cycle_and_the_graph_sees_imports_inside_functions():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    top, every, libraries, lazy = import_graph()
    # Known edges, one of each sort: a top-level import, one inside a function and the
    # package a submodule's import runs.
    assert "reprolm.config.lookups" in top["reprolm.config.references"]
    assert ("reprolm.models.loading", 1) in {(target, 1) for target, _ in lazy["reprolm.train.finetune"]}
    assert "reprolm.studies" in top["reprolm.checks"]
    assert "torch" in libraries["reprolm.train.losses"]


def floor_of(module: str) -> int:
    """The floor of a reprolm module (by its top-level module or package)."""
    if module == "reprolm":
        return 0
    unit = module.split(".")[1]
    found = [index for index, floor in enumerate(FLOORS) if unit in floor]
    assert found, f"{module}: {unit!r} is on no floor of FLOORS (place it there, and in docs/development.md)"
    return found[0]


def _code_strings(tree: ast.Module) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def string_references() -> dict[str, set[str]]:
    """The reprolm packages and modules (``reprolm.<top>``) each module names in a string
    that is code (a docstring is not; nor a name that is no module, a logger's)."""
    paths = list((SRC / "reprolm").rglob("*.py"))
    units = {_module_name(path).split(".")[1] for path in paths if "." in _module_name(path)}
    named: dict[str, set[str]] = {}
    for path in paths:
        tree = ast.parse(path.read_text(), str(path))
        for node in _code_strings(tree):
            for unit in set(MODULE_IN_STRING.findall(node.value)) & units:
                named.setdefault(_module_name(path), set()).add(f"reprolm.{unit}")
    return named


def upward(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    """(module, package above it) of every edge that runs up the floors; a package's own
    ``reprolm`` root is no edge."""
    return {
        (name, "reprolm." + target.split(".")[1])
        for name, targets in edges.items()
        for target in targets
        if target != "reprolm" and floor_of(target) > floor_of(name)
    }


def test_every_module_is_on_one_floor_and_the_floor_test_sees_an_upward_import():
    _, every, _, _ = import_graph()
    for name in every:
        floor_of(name)
    assert [sum(unit in floor for floor in FLOORS) for unit in set().union(*FLOORS)] == [1] * len(set().union(*FLOORS))
    # A module of the data floor importing a stage, and a ground module naming a study in a
    # lazy entry, are caught; a study importing a stage is not.
    edges = {"reprolm.data.x": {"reprolm.score.flr"}, "reprolm.studies.y": {"reprolm.score.flr", "reprolm"}}
    assert upward(edges) == {("reprolm.data.x", "reprolm.score")}
    tree = ast.parse(
        '"""Names reprolm.studies in a docstring."""\nENTRY = "reprolm.studies.ruler.builders:build_tlg"\n'
    )
    assert [node.value for node in _code_strings(tree)] == ["reprolm.studies.ruler.builders:build_tlg"]


def test_no_module_imports_from_a_floor_above_its_own():
    _, every, _, _ = import_graph()
    found = upward(every) - set(KNOWN_UPWARD)
    assert not found, "upward imports:\n" + "\n".join(f"{a} imports {b}" for a, b in sorted(found))
    stale = set(KNOWN_UPWARD) - upward(every) - upward(string_references())
    assert not stale, f"no longer upward, drop from KNOWN_UPWARD: {sorted(stale)}"


def test_no_module_names_a_module_of_a_floor_above_its_own_in_a_string():
    named = upward(string_references())
    found = named - set(KNOWN_UPWARD)
    assert not found, "upward references in strings:\n" + "\n".join(f"{a} names {b}" for a, b in sorted(found))


def test_no_import_cycle_among_the_packages_modules():
    _, every, _, _ = import_graph()
    cycle = find_cycle(every)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_statistics_are_a_leaf_and_only_the_tables_and_studies_import_the_tables():
    """The interval type and the bootstrap (reprolm.stats) import no other reprolm module, so
    scoring and writing use them without reaching up to the tables (reprolm.aggregate)."""
    _, every, _, _ = import_graph()
    statistics = {name for name in every if name.split(".")[:2] == ["reprolm", "stats"]}
    assert {"reprolm.stats.estimate", "reprolm.stats.bootstrap"} <= statistics
    assert not {name: every[name] - statistics for name in statistics if every[name] - statistics}
    above = sorted(
        f"{name} imports {target}"
        for name, targets in every.items()
        if not name.startswith(("reprolm.aggregate", "reprolm.studies"))
        for target in targets
        if target.split(".")[:2] == ["reprolm", "aggregate"]
    )
    assert not above, "\n".join(above)


def test_a_module_is_imported_inside_a_function_only_where_it_loads_a_heavy_library():
    top, _, libraries, lazy = import_graph()
    loads = heavy_modules(top, libraries)
    light = sorted(
        f"{name}:{line} imports {target} (which loads no heavy library) inside a function"
        for name, imports in lazy.items()
        for target, line in imports
        if not loads[target]
    )
    assert not light, "\n".join(light)


def test_the_config_lookups_load_no_heavy_library():
    top, _, libraries, _ = import_graph()
    assert heavy_modules(top, libraries)["reprolm.config.lookups"] == set()
