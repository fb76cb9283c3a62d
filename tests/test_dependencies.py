"""Every third-party module the package imports comes from a distribution it declares.

A plain `pip install geosched` installs the runtime dependencies of pyproject.toml and nothing else, so an
import satisfied only by a transitive or a test dependency (click came with moto's Flask) works in the
development venv and fails for a user. The check reads the imports from the source (AST), finds which installed
distribution provides each module from the distributions' file lists (importlib.metadata), and compares with
what pyproject.toml declares. A module of an optional extra (issue 23 item 7: aws, gcp, kubernetes, probes,
plots, metrics; `all` is all of them) may only be imported where a missing install becomes
`MissingExtra(<that extra>, ...)`: one line naming the extra, exit 1. That is either a guard around the import, or
geosched.core.extras.EXTRA_OF_MODULE naming the extra for the module's top-level name (the CLI maps the
ModuleNotFoundError through it): the check holds per extra, so the message names an extra that really brings it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from geosched.core.extras import EXTRA_OF_MODULE, PURPOSE

ROOT = Path(__file__).parent.parent
PACKAGE = ROOT / "geosched"
# Extras a user may install; `dev` is the test environment, never a runtime one; `all` only names the others.
USER_EXTRAS_EXCLUDED = {"dev", "all"}


@dataclass(frozen=True)
class Import:
    module: str  # dotted name, as precise as the statement says (`from a.b import c` -> a.b.c)
    where: str  # path:line
    guard: str | None  # the extra named by an enclosing `except ImportError: raise MissingExtra(extra, ...)`
    type_only: bool  # under `if TYPE_CHECKING:`


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = {_norm(Requirement(r).name) for r in project["dependencies"]}
    extras = {extra: {_norm(Requirement(r).name) for r in reqs}
              for extra, reqs in project["optional-dependencies"].items() if extra not in USER_EXTRAS_EXCLUDED}
    return runtime, extras


@cache
def _providers() -> dict[str, frozenset[str]]:
    """Dotted module name -> the installed distributions whose files define it (or a package above it)."""
    found: dict[str, set[str]] = defaultdict(set)
    for dist in metadata.distributions():
        name = _norm(dist.metadata["Name"])
        for file in dist.files or ():
            parts = file.parts
            if not parts or parts[0] in ("..", "") or ".dist-info" in parts[0] or ".data" in parts[0]:
                continue
            stem = parts[-1].split(".")[0]
            if not (parts[-1].endswith(".py") or parts[-1].endswith(".so") or parts[-1].endswith(".pyi")):
                continue
            dotted = [*parts[:-1]] + ([] if stem == "__init__" else [stem])
            found[".".join(dotted)].add(name)
    return {module: frozenset(names) for module, names in found.items()}


def provided_by(module: str) -> frozenset[str]:
    """The distributions behind the longest known prefix of `module` (namespace packages such as `google` are
    split between distributions, so `google.auth` and `google.api_core` resolve separately)."""
    providers = _providers()
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        hit = providers.get(".".join(parts[:n]))
        if hit:
            return hit
    return frozenset()


def _guard(try_node: ast.Try) -> str | None:
    for handler in try_node.handlers:
        names = {n.id for n in ast.walk(handler.type) if isinstance(n, ast.Name)} if handler.type else set()
        if not names & {"ImportError", "ModuleNotFoundError"}:
            continue
        for node in ast.walk(handler):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and isinstance(node.exc.func, ast.Name) and node.exc.func.id == "MissingExtra"
                    and node.exc.args and isinstance(node.exc.args[0], ast.Constant)):
                return str(node.exc.args[0].value)
    return None


def imports(path: Path, root: Path = ROOT) -> Iterator[Import]:
    rel = path.relative_to(root)

    def visit(node: ast.AST, guard: str | None, type_only: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(alias.name, f"{rel}:{node.lineno}", guard, type_only)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                yield Import(f"{node.module}.{alias.name}", f"{rel}:{node.lineno}", guard, type_only)
        for child in ast.iter_child_nodes(node):
            inner_guard = guard
            if isinstance(node, ast.Try) and child in node.body:
                inner_guard = _guard(node) or guard
            inner_type_only = type_only or (isinstance(node, ast.If) and child in node.body
                                            and "TYPE_CHECKING" in ast.unparse(node.test))
            yield from visit(child, inner_guard, inner_type_only)

    yield from visit(ast.parse(path.read_text(), str(path)), None, False)


def third_party_imports() -> list[Import]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for imp in imports(path):
            top = imp.module.split(".")[0]
            # geosched_emulators: the demo's doubles, a distribution of this repository the demo checks for
            # before it imports it (test_only_the_demo_imports_the_emulators).
            if top in sys.stdlib_module_names or top in ("geosched", "__future__", "geosched_emulators") \
                    or imp.type_only:
                continue
            out.append(imp)
    return out


def test_only_the_demo_imports_the_emulators() -> None:
    # The product wheel ships no test double (issue 25 item 4); the demo's provisioning stage is the one user of
    # them, behind geosched.demo.provisioning.emulators_missing (one line naming what to install).
    users = {imp.where.split(":")[0] for path in sorted(PACKAGE.rglob("*.py")) for imp in imports(path)
             if imp.module.split(".")[0] == "geosched_emulators"}
    assert users == {"geosched/demo/clouds.py"}


def test_every_import_comes_from_a_declared_distribution() -> None:
    runtime, extras = _declared()
    problems = []
    for imp in third_party_imports():
        dists = provided_by(imp.module)
        if not dists:
            problems.append(f"{imp.where}: {imp.module}: no installed distribution provides it")
        elif dists & runtime or (imp.guard is not None and dists & extras.get(imp.guard, set())):
            continue
        elif dists & extras.get(EXTRA_OF_MODULE.get(imp.module.split(".")[0], ""), set()):
            continue  # the CLI names this extra when the module is missing (geosched.core.extras)
        else:
            owner = sorted(dists)
            hint = next((f" (extra {e!r}: name it in geosched.core.extras.EXTRA_OF_MODULE, or guard it with "
                         f"`except ImportError: raise MissingExtra({e!r}, ...)`)"
                         for e, names in extras.items() if dists & names), "")
            problems.append(f"{imp.where}: {imp.module} comes from {owner}, not a runtime dependency{hint}")
    assert not problems, "\n".join(problems)


def test_every_declared_runtime_dependency_is_imported() -> None:
    # The runtime image installs exactly these: one nothing imports is weight the scheduler image carries.
    runtime, _ = _declared()
    used = set().union(*(provided_by(imp.module) for imp in third_party_imports()))
    assert runtime - used == set()


def test_every_declared_extra_dependency_is_imported() -> None:
    # Each extra brings only what its own commands import: a distribution nothing imports is weight on a light
    # install.
    _, extras = _declared()
    used = set().union(*(provided_by(imp.module) for imp in third_party_imports()))
    unused = {extra: sorted(names - used) for extra, names in extras.items() if names - used}
    assert unused == {}


def test_the_module_table_names_declared_extras_and_all_holds_every_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    assert set(EXTRA_OF_MODULE.values()) <= set(declared)
    assert set(PURPOSE) == set(EXTRA_OF_MODULE.values())
    # `all` is every extra a user runs geosched with; `dev` (the test command) pulls all of them and the doubles.
    everything = {e for e in declared if e not in USER_EXTRAS_EXCLUDED}
    assert declared["all"] == [f"geosched[{','.join(sorted(everything, key=list(declared).index))}]"]
    assert any(r.startswith("geosched[") and "all" in r for r in declared["dev"])
    # The core itself holds no SDK: none of the table's modules comes from a core dependency.
    runtime, _ = _declared()
    for module in EXTRA_OF_MODULE:
        assert not provided_by(module) & runtime, module


def test_the_check_sees_what_it_is_meant_to_see(tmp_path: Path) -> None:
    # The walk and the lookup, on a module written for it: an undeclared import (click), a guarded extra, a
    # type-only import, a namespace package split between distributions.
    source = tmp_path / "mod.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nimport click\nfrom google.cloud import compute_v1\n"
        "if TYPE_CHECKING:\n    import mypy\n"
        "def f():\n    try:\n        import prometheus_client\n"
        "    except ImportError:\n        raise MissingExtra('metrics', 'prometheus_client') from None\n")
    found = {i.module: i for i in imports(source, tmp_path)}
    assert found["click"].guard is None and not found["click"].type_only
    assert found["mypy"].type_only
    assert found["prometheus_client"].guard == "metrics"
    assert provided_by("google.cloud.compute_v1") == {"google-cloud-compute"}
    assert provided_by("google.auth.credentials") == {"google-auth"}
    assert "click" in provided_by("click.exceptions")
    assert provided_by("prometheus_client.core") & _declared()[1]["metrics"]


def test_a_missing_extra_is_one_line_exit_1() -> None:
    # prometheus_client hidden from the import system: what an install without the `metrics` extra sees.
    code = ("import sys\n"
            "class Hide:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'prometheus_client' or name.startswith('prometheus_client.'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "from geosched.core.errors import GeoschedError\n"
            "from geosched.kube.multikueue.metrics import Metrics\n"
            "try:\n"
            "    Metrics().serve(0)\n"
            "except GeoschedError as exc:\n"
            "    print(exc)\n"
            "    sys.exit(exc.exit_code)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 1, run.stderr
    assert run.stdout.strip().splitlines() == ["prometheus_client (for --metrics-port) is not installed; it comes "
                                               "with the 'metrics' extra: pip install 'geosched[metrics]'"]


EMULATORS = ROOT / "emulators"


def test_the_emulators_import_only_what_their_own_distribution_declares() -> None:
    # geosched-emulators is its own distribution (issue 25 item 4): moto and the google libraries its doubles
    # stand in front of are its dependencies, and it needs nothing of geosched.
    project = tomllib.loads((EMULATORS / "pyproject.toml").read_text())["project"]
    declared = {_norm(Requirement(r).name) for r in project["dependencies"]}
    problems = []
    for path in sorted((EMULATORS / "geosched_emulators").rglob("*.py")):
        for imp in imports(path, EMULATORS):
            top = imp.module.split(".")[0]
            if top in sys.stdlib_module_names or top in ("__future__", "geosched_emulators") or imp.type_only:
                continue
            dists = provided_by(imp.module)
            if not dists & declared:
                problems.append(f"{imp.where}: {imp.module} comes from {sorted(dists)}, not declared")
    assert not problems, "\n".join(problems)
