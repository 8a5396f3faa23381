"""Each rule's conda environment (``--software-deployment-method conda``) installs what the
rule's code imports, at the versions the project requires.

A rule's job runs its ``script:`` in the environment its ``conda:`` file describes. The scripts
are thin; the imports are in reprolm, and the heavy libraries are imported lazily inside
functions. So the test reads the code the script can run (``CodeReach``) and collects the
third-party modules it imports. Static, no environment is built: a few seconds.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import sysconfig
from functools import cache
from importlib.metadata import distributions as distributions_installed
from importlib.metadata import packages_distributions
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
RULES = ROOT / "workflow" / "rules"
RULE_START = re.compile(r"^([ \t]*)(?:rule|checkpoint)\b ?(\w*):[ \t]*$")
# "reprolm.studies.expo.tables:write_expo_tables": code reprolm imports by name at run time.
MODULE_REFERENCE = re.compile(r"^(reprolm(?:\.\w+)+)(?::(\w+))?$")
# What libraries import for the names reprolm hands them, beyond their own requirements.
LIBRARY_IMPORTS = {
    # transformers places a model by a device map through accelerate.
    ("reprolm.models.loading", "device_map"): {"accelerate"},
    # pandas renders markdown tables through tabulate.
    ("reprolm.io", "write_table"): {"tabulate"},
    # lm-eval's "hf" model class (its [hf] extra).
    ("reprolm.score.lm_eval_bridge", "language_model"): {"torch", "transformers", "accelerate"},
    # A suite run with `backend: vllm` hands lm-eval the "vllm" model class (its [vllm] extra).
    ("reprolm.score.suites", "run_suite"): {"vllm"},
}


def module_path(name: str) -> Path | None:
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def is_reprolm(name: str | None) -> bool:
    return name is not None and (name == "reprolm" or name.startswith("reprolm."))


class Module:
    """One source file: its top-level definitions, what runs on import, and what its imports bind."""

    def __init__(self, name: str, path: Path):
        self.name = name
        self.package = "" if name == "__main__" else name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        self.definitions: dict[str, list[ast.AST]] = {}
        self.on_import: list[ast.AST] = []
        self.decorated: list[tuple[str, ast.expr]] = []
        self.bindings: dict[str, tuple[str, str | None]] = {}
        for statement in self._executed(tree.body):
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.definitions.setdefault(statement.name, []).append(statement)
                self.decorated += [(statement.name, decorator) for decorator in statement.decorator_list]
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)) and statement.value is not None:
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for name in (node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)):
                    self.definitions.setdefault(name, []).append(statement.value)
                # A value that calls something runs on import; a table of names only when used.
                if any(isinstance(node, ast.Call) for node in ast.walk(statement.value)):
                    self.on_import.append(statement.value)
            else:
                self.on_import.append(statement)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    bound = alias.asname or alias.name.partition(".")[0]
                    self.bindings[bound] = (alias.name if alias.asname else bound, None)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    self.bindings[alias.asname or alias.name] = (self.absolute(node), alias.name)

    def _executed(self, statements):
        for statement in statements:
            # Neither type-checking imports nor a module's command-line entry run on import.
            if isinstance(statement, ast.If) and re.search(
                r"TYPE_CHECKING|__name__ == .__main__.", ast.unparse(statement.test)
            ):
                continue
            if isinstance(statement, (ast.If, ast.Try, ast.With)):
                yield from self._executed(ast.iter_child_nodes(statement))
            elif isinstance(statement, ast.stmt):
                yield statement

    def absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module
        parts = self.package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1])
        return f"{base}.{node.module}" if node.module else base


class CodeReach:
    """The reprolm code a script can run, and the third-party modules that code imports.

    A module's import-time code runs when it is imported; a function or class when reachable
    code names it (directly, through an import or re-export, or as a "module:function" string);
    a method when its class is reachable and reachable code reads an attribute of that name
    (dunder methods always); a function registered by a decorator (``@BACKENDS.register``)
    when its registry is used. Imports inside reachable functions count.
    """

    def __init__(self, script: Path):
        self.modules: dict[str, Module] = {}
        self.reached: set[tuple[str, str | None]] = set()
        self.imports: dict[str, set[str]] = {}
        self.registered: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self.attributes: set[str] = set()
        self.methods_waiting: dict[str, list[tuple[Module, ast.AST]]] = {}
        main = self.modules["__main__"] = Module("__main__", script)
        self.scan(main, main.on_import + [node for nodes in main.definitions.values() for node in nodes])

    def module(self, name: str) -> Module | None:
        if name not in self.modules:
            path = module_path(name)
            if path is None:
                return None
            module = self.modules[name] = Module(name, path)
            for defined, decorator in module.decorated:
                registry = self.definition(module, self.root_name(decorator))
                if registry is not None:
                    self.registered.setdefault(registry, []).append((name, defined))
        return self.modules[name]

    @staticmethod
    def root_name(expression: ast.expr) -> str | None:
        while isinstance(expression, (ast.Call, ast.Attribute)):
            expression = expression.func if isinstance(expression, ast.Call) else expression.value
        return expression.id if isinstance(expression, ast.Name) else None

    def definition(self, module: Module, name: str | None) -> tuple[str, str] | None:
        """Where reprolm defines what ``name`` is in ``module``, following re-exports."""
        while name is not None and name not in module.definitions:
            source, attribute = module.bindings.get(name, (None, None))
            if not is_reprolm(source) or attribute is None or module_path(f"{source}.{attribute}"):
                return None
            module, name = self.module(source), attribute
            if module is None:
                return None
        return None if name is None else (module.name, name)

    def import_module(self, name: str) -> None:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):
            package = ".".join(parts[:end])
            module = self.module(package)
            if module is None:
                return
            if (package, None) not in self.reached:
                self.reached.add((package, None))
                self.scan(module, module.on_import)

    def use(self, module_name: str, name: str) -> None:
        """Reachable code names ``name`` of module ``module_name``."""
        self.import_module(module_name)
        if module_path(f"{module_name}.{name}"):
            self.import_module(f"{module_name}.{name}")
            return
        module = self.module(module_name)
        target = module and self.definition(module, name)
        if target is None or target in self.reached:
            return
        self.reached.add(target)
        self.import_module(target[0])
        self.scan(self.modules[target[0]], self.modules[target[0]].definitions[target[1]])
        for registered in self.registered.get(target, []):
            self.use(*registered)

    def scan(self, module: Module, units) -> None:
        for unit in units:
            if isinstance(unit, ast.ClassDef):
                self.scan_class(module, unit)
                continue
            for node in self.nodes(unit):
                self.visit(module, node)

    def scan_class(self, module: Module, cls: ast.ClassDef) -> None:
        for node in [*cls.bases, *cls.keywords]:
            self.scan(module, [node])
        for statement in cls.body:
            is_method = isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef))
            if not is_method or re.fullmatch(r"__\w+__", statement.name) or statement.name in self.attributes:
                self.scan(module, [statement])
            else:
                self.methods_waiting.setdefault(statement.name, []).append((module, statement))

    @staticmethod
    def nodes(unit: ast.AST):
        """Every node of ``unit`` but its own decorators, which only register it."""
        decorators = getattr(unit, "decorator_list", [])
        stack = [child for child in ast.iter_child_nodes(unit) if child not in decorators]
        yield unit
        while stack:
            node = stack.pop()
            yield node
            stack.extend(ast.iter_child_nodes(node))

    def visit(self, module: Module, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.imported(module, alias.name)
        elif isinstance(node, ast.ImportFrom):
            source = module.absolute(node)
            self.imported(module, source)
            for alias in node.names if is_reprolm(source) else []:
                if module_path(f"{source}.{alias.name}"):
                    self.import_module(f"{source}.{alias.name}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            self.load(module, node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            self.load_attribute(module, node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            reference = MODULE_REFERENCE.match(node.value)
            if reference and module_path(reference.group(1)):
                self.import_module(reference.group(1))
                if reference.group(2):
                    self.use(reference.group(1), reference.group(2))

    def imported(self, module: Module, name: str) -> None:
        top = name.partition(".")[0]
        if top == "reprolm":
            self.import_module(name)
        elif top not in sys.stdlib_module_names and top != "__future__":
            self.imports.setdefault(top, set()).add(module.name)

    def load(self, module: Module, name: str) -> None:
        if name in module.definitions:
            self.use(module.name, name)
            return
        source, attribute = module.bindings.get(name, (None, None))
        if is_reprolm(source) and attribute:
            self.use(source, attribute)

    def load_attribute(self, module: Module, node: ast.Attribute) -> None:
        if node.attr not in self.attributes:
            self.attributes.add(node.attr)
            for method_module, method in self.methods_waiting.pop(node.attr, []):
                self.scan(method_module, [method])
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        source, attribute = module.bindings.get(node.id, (None, None)) if isinstance(node, ast.Name) else (None, None)
        current = f"{source}.{attribute}" if attribute else source
        if not is_reprolm(current) or not module_path(current):
            return
        for name in reversed(chain):
            if not module_path(f"{current}.{name}"):
                self.use(current, name)
                return
            current = f"{current}.{name}"
            self.import_module(current)

    def third_party(self) -> dict[str, set[str]]:
        """Top-level module -> the reprolm modules (or ``__main__``, the script) importing it."""
        found = {top: set(where) for top, where in self.imports.items()}
        for (module, function), tops in LIBRARY_IMPORTS.items():
            if (module, function) in self.reached:
                for top in tops:
                    found.setdefault(top, set()).add(f"{module}.{function} (through the library)")
        return found


# A study's rules file (outside workflow/) names the workflow's envs and scripts by absolute
# path: os.path.join(ENVS, "train.yaml").
WORKFLOW_FOLDER = re.compile(r'^os\.path\.join\((ENVS|SCRIPTS), "([^"]+)"\)$')


def rule_file(value: str, rules_file: Path) -> Path:
    """The file a ``conda:`` or ``script:`` directive names: a relative path is the rules
    file's folder's (a study's own scripts beside its rules.smk)."""
    joined = WORKFLOW_FOLDER.match(value.strip())
    if joined:
        return ROOT / "workflow" / joined[1].lower() / joined[2]
    return (rules_file.parent / value.strip('"')).resolve()


def rules() -> dict[str, dict[str, Path]]:
    """Rule -> its ``conda`` and ``script`` files. A rule is named by ``rule X:`` or by its
    ``name:`` directive (rules written in a loop), prefixed by its file."""
    found = {}
    for smk in sorted(RULES.glob("*.smk")) + sorted((SRC / "reprolm" / "studies").glob("*/rules.smk")):
        lines = smk.read_text().splitlines()
        for start, line in enumerate(lines):
            opening = RULE_START.match(line)
            if not opening:
                continue
            indent = len(opening.group(1))
            end = next(
                (
                    i
                    for i in range(start + 1, len(lines))
                    if lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) <= indent
                ),
                len(lines),
            )
            body = "\n".join(lines[start + 1 : end])
            directives = dict(re.findall(r"^[ \t]+(conda|script|name):\n[ \t]+(.+)$", body, re.MULTILINE))
            name = opening.group(2) or directives.pop("name", f"line {start + 1}")
            # A study's rules by its folder's name (studies/flr/rules.smk: flr).
            where = smk.parent.name if smk.name == "rules.smk" else smk.stem
            found[f"{where}.{name}"] = {
                directive: rule_file(value, smk) for directive, value in directives.items() if directive != "name"
            }
    return found


def env_requirements(env_file: Path) -> dict[str, Requirement]:
    """Distribution name -> requirement for an environment's conda and pip dependencies."""
    entries = []
    for dependency in yaml.safe_load(env_file.read_text())["dependencies"]:
        if isinstance(dependency, str):
            # conda's "python=3.11" is pip's "python==3.11"
            entries.append(re.sub(r"^([\w.-]+)=(?!=)", r"\1==", dependency))
        else:
            # "-e ../..": reprolm itself
            entries += [entry for entry in dependency.get("pip", []) if not entry.startswith("-")]
    return {canonicalize_name(requirement.name): requirement for requirement in map(Requirement, entries)}


def requirements_file(path: Path) -> dict[str, Requirement]:
    found = {}
    for line in path.read_text().splitlines():
        line = line.partition("#")[0].strip()
        if line and not line.startswith("-"):
            requirement = Requirement(line)
            found[canonicalize_name(requirement.name)] = requirement
    return found


@cache
def distributions_of_modules() -> dict[str, list[str]]:
    return packages_distributions()


@cache
def script_imports(script: Path) -> dict[str, set[str]]:
    return CodeReach(script).third_party()


def distributions(top_module: str) -> set[str]:
    """The distributions that can provide ``top_module``: the installed ones that do, or the
    module's own name (vllm is not installed on CPU machines)."""
    return {canonicalize_name(name) for name in distributions_of_modules().get(top_module, [top_module])}


RULES_WITH_SCRIPTS = {name: files for name, files in rules().items() if "script" in files}
BASE = requirements_file(ROOT / "requirements" / "base.txt")
GPU_SET = requirements_file(ROOT / "requirements" / "gpu-constraints.txt")


def test_every_rule_runs_its_script_in_a_conda_env():
    assert len(RULES_WITH_SCRIPTS) >= 20, sorted(RULES_WITH_SCRIPTS)
    without_env = sorted(name for name, files in RULES_WITH_SCRIPTS.items() if "conda" not in files)
    assert not without_env, f"rules with a script but no conda: env file: {without_env}"
    missing = sorted(
        {str(path) for files in RULES_WITH_SCRIPTS.values() for path in files.values() if not path.is_file()}
    )
    assert not missing, f"named by rules but not there: {missing}"


@pytest.mark.parametrize("rule", sorted(RULES_WITH_SCRIPTS))
def test_env_installs_what_the_rule_imports(rule):
    files = RULES_WITH_SCRIPTS[rule]
    listed = set(env_requirements(files["conda"]))
    imports = script_imports(files["script"])
    missing = {top: sorted(where) for top, where in imports.items() if not distributions(top) & listed}
    assert not missing, (
        f"rule {rule}: {files['conda'].relative_to(ROOT)} lacks what {files['script'].name} "
        f"imports (module: imported by): {missing}"
    )


def test_requirements_list_what_the_rules_import():
    """requirements/base.txt (with gpu.txt on GPU machines) installs what any rule imports;
    torch is the Makefile's, installed first as the machine's build."""
    listed = set(BASE) | set(requirements_file(ROOT / "requirements" / "gpu.txt")) | {"torch"}
    missing = {}
    for files in RULES_WITH_SCRIPTS.values():
        for top, where in script_imports(files["script"]).items():
            if not distributions(top) & listed:
                missing.setdefault(top, set()).update(where)
    assert not missing, f"not in requirements/base.txt or gpu.txt (module: imported by): {missing}"


ENV_FILES = sorted({files["conda"] for files in RULES_WITH_SCRIPTS.values() if "conda" in files})


@pytest.mark.parametrize("env_file", ENV_FILES, ids=lambda path: path.name)
def test_env_pins_agree_with_requirements(env_file):
    """A package of the GPU set is pinned at the set's version (the environments are what
    cluster jobs run); any other package that requirements/base.txt constrains carries
    base.txt's specifier, and base.txt's extras."""
    for name, requirement in env_requirements(env_file).items():
        if name in GPU_SET:
            assert requirement.specifier == GPU_SET[name].specifier, (
                f"{env_file.name}: {requirement}, requirements/gpu-constraints.txt: {GPU_SET[name]}"
            )
        elif name in BASE and BASE[name].specifier:
            assert requirement.specifier == BASE[name].specifier, (
                f"{env_file.name}: {requirement}, base.txt: {BASE[name]}"
            )
        if name in BASE:
            assert set(BASE[name].extras) <= set(requirement.extras), (
                f"{env_file.name}: {requirement}, base.txt: {BASE[name]}"
            )


def pinned_version(requirement: Requirement) -> Version:
    (version,) = [Version(spec.version) for spec in requirement.specifier if spec.operator == "=="]
    return version


def test_gpu_set_satisfies_base_requirements():
    assert set(GPU_SET) >= {"torch", "transformers", "vllm", "trl", "deepspeed", "lm-eval", "accelerate", "peft"}
    for name, pinned in GPU_SET.items():
        if name in BASE:
            assert BASE[name].specifier.contains(pinned_version(pinned), prereleases=True), (
                f"gpu-constraints.txt: {pinned}, base.txt: {BASE[name]}"
            )


def test_transformers_4_is_excluded():
    """reprolm's recipes rely on transformers 5 (a float warmup_steps is a ratio there; 4.x
    reads it as a step count, almost no warm-up)."""
    assert not BASE["transformers"].specifier.contains("4.57.6")
    assert pinned_version(GPU_SET["transformers"]).major == 5


# The install sets, every package pinned (requirements/lock.sh): what `make setup` (CPU) and
# `make setup-gpu` (GPU clusters) install.
CPU_LOCK = requirements_file(ROOT / "requirements" / "cpu-lock.txt")
GPU_LOCK = requirements_file(ROOT / "requirements" / "gpu-lock.txt")


def public_version(requirement: Requirement) -> Version:
    """The pinned version without its local build label (torch 2.13.0+cpu is 2.13.0)."""
    return Version(pinned_version(requirement).public)


def test_cpu_and_gpu_sets_install_one_version_of_each_package():
    """What the tests run on is what a cluster gets: the SLURM plugin, Snakemake, transformers
    and every other package of the CPU set at the GPU set's version (torch differs in its build
    only)."""
    assert set(CPU_LOCK) >= {"snakemake", "snakemake-executor-plugin-slurm", "torch", "transformers", "numpy"}
    only_cpu = sorted(set(CPU_LOCK) - set(GPU_LOCK))
    assert not only_cpu, f"in requirements/cpu-lock.txt but not gpu-lock.txt: {only_cpu}"
    differing = {
        name: (str(CPU_LOCK[name].specifier), str(GPU_LOCK[name].specifier))
        for name in CPU_LOCK
        if public_version(CPU_LOCK[name]) != public_version(GPU_LOCK[name])
    }
    assert not differing, f"(cpu-lock.txt, gpu-lock.txt) versions differ: {differing}"


@pytest.mark.parametrize(
    "lock, required, constraints",
    [
        ("cpu-lock.txt", ["base.txt", "dev.txt"], ["cpu-constraints.txt"]),
        ("gpu-lock.txt", ["base.txt", "gpu.txt", "dev.txt"], ["gpu-constraints.txt"]),
    ],
)
def test_lock_satisfies_its_requirements(lock, required, constraints):
    """A requirement or constraint added or changed without `bash requirements/lock.sh` is caught
    here (a constraint binds only a package the set installs)."""
    locked = requirements_file(ROOT / "requirements" / lock)
    for name in required + constraints:
        for key, requirement in requirements_file(ROOT / "requirements" / name).items():
            if key not in locked:
                assert name in constraints, (
                    f"requirements/{name}: {requirement} is not in requirements/{lock}: run bash requirements/lock.sh"
                )
                continue
            version = pinned_version(locked[key])
            assert requirement.specifier.contains(version, prereleases=True), (
                f"requirements/{name}: {requirement}, requirements/{lock}: {version}: run bash requirements/lock.sh"
            )


def test_installed_environment_is_the_cpu_lock():
    """The environment the tests run in holds the CPU lock's versions (a venv from before a lock
    change is reinstalled by `make setup`). Read from the environment's own site-packages:
    once anything imports pkg_resources (alpaca_eval does), setuptools' vendored copies of
    packaging, platformdirs and more-itertools are on sys.path too, at other versions."""
    site_packages = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist.version for dist in distributions_installed(path=site_packages)
    }
    differing = {
        name: (installed.get(name), str(requirement.specifier))
        for name, requirement in CPU_LOCK.items()
        if installed.get(name) is None or Version(installed[name]) != pinned_version(requirement)
    }
    assert not differing, f"(installed, requirements/cpu-lock.txt): {differing}; run make setup"


def test_the_environment_breaks_no_requirement_but_the_overridden_ones():
    """The CPU lock installed with requirements/overrides.txt: pip finds every package's
    requirements met, except the overridden package's (the SLURM plugin's numpy>=2.4.5), and
    the check `make setup-gpu` runs says so."""
    report = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True).stdout
    assert "snakemake-executor-plugin-slurm 2.8.0 has requirement numpy" in report, report
    checked = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pip-check.sh"), sys.executable], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_pip_check_fails_on_any_other_broken_requirement(tmp_path):
    """scripts/pip-check.sh passes the overridden package's own floor (numpy) and nothing else:
    run on a stand-in interpreter that prints a report of both, it fails naming the other."""
    report = (
        "snakemake-executor-plugin-slurm 2.8.0 has requirement numpy>=2.4.5, but you have numpy 2.3.5.\n"
        "trl 0.30.0 has requirement transformers>=5.20, but you have transformers 5.19.0.\n"
    )
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nprintf '{report}'\nexit 1\n")
    python.chmod(0o755)
    checked = subprocess.run(
        ["bash", str(ROOT / "scripts" / "pip-check.sh"), str(python)], capture_output=True, text=True
    )
    assert checked.returncode == 1
    assert checked.stdout.strip() == "trl 0.30.0 has requirement transformers>=5.20, but you have transformers 5.19.0."


class ResourcesStandIn(dict):
    """A Snakemake job's resources as the SLURM plugin reads them (`.get` and attributes)."""

    __getattr__ = dict.__getitem__


def test_the_profile_asks_for_one_task_on_a_gpu_job():
    """The SLURM plugin 2.6.1 (what pip resolves beside vLLM) adds --ntasks-per-gpu=1 to a GPU job
    unless tasks_per_gpu is 0: a 4-GPU finetune with 32 threads would ask for 4 tasks of 32 CPUs
    each. The installed plugin (the locked 2.8.0) builds the sbatch line from the profile's
    default-resources."""
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command

    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    # A stand-in for the Snakemake job: what the plugin reads of one.
    job = SimpleNamespace(resources=ResourcesStandIn(profile["default-resources"], gpu=4), threads=32)
    params = dict(run_uuid="job", slurm_logfile="job.log", comment_str="finetune", account="", partition="", workdir="")
    sbatch = get_submit_command(job, params)
    assert "--cpus-per-task=32" in sbatch, sbatch
    assert "--ntasks" not in sbatch, sbatch
