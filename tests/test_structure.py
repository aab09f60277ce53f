"""The product's shape: small modules, no dependence on the tests, no import cycle.

The product packages are the ones pyproject.toml ships (`tool.setuptools.packages.find`).

- No product module is over 400 lines, except the known offenders in `TOLERATED_LONG_MODULES`
  (and each of those must still be long: a split module leaves the list).
- Every product module imports from a copy of the product packages alone (no tests/ on the
  path), in a fresh interpreter; modules whose optional heavy dependency (an extra of
  pyproject.toml, such as vllm) is not installed are skipped, each with its reason. The
  alembic scripts run through a migration of a fresh SQLite database from that copy.
- No import cycle among product modules: every import, at module level (including
  `TYPE_CHECKING` blocks) and the lazy ones inside functions alike, read with `ast`. A lazy
  import hides a cycle from the interpreter, not from the design. The known cycles in
  `TOLERATED_CYCLES` are excepted (and each must still be one).
- bench/ uses the product only: none of its scripts imports a module of tests/ or puts a
  tests/ directory on `sys.path`.
- Click stays in the CLI: no product module outside the CLI modules (a module named `cli`
  or `*_cli`, a module inside a package named `cli`, the top-level `cli` and `clikit`
  packages) imports click, a CLI module, or clikit; lazy imports included.
- `clikit` imports nothing of the project (as `storage`), lazy imports included.

Each check is also run on a small synthetic tree that breaks it, so that it can fail.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MAX_LINES = 400

# Known offenders; empty this list as they are split.
TOLERATED_LONG_MODULES: frozenset[str] = frozenset()
# Known import cycles, each as its set of modules; empty this list as they are broken. The
# evals task modules are being rewritten into one task package, which ends this one.
TOLERATED_CYCLES: tuple[frozenset[str], ...] = ()
# An alembic script: it runs a migration when imported; the migration check runs it instead.
NOT_IMPORTABLE = frozenset({"migrations.env"})


def product_packages() -> list[str]:
    patterns = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").rstrip(".") for pattern in patterns})


def optional_dependencies() -> frozenset[str]:
    """Import names of the extras' requirements (not the test extra): skippable when absent."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    names = {
        re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        for extra, requirements in extras.items()
        if extra != "test"
        for requirement in requirements
    }
    return frozenset(name.replace("-", "_") for name in names - {"weact"})


def module_files(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> source file, for every .py file under the packages."""
    modules = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


# -- size --------------------------------------------------------------------------------


def long_modules(root: Path, packages: Iterable[str]) -> dict[str, int]:
    """Path (relative, with /) -> line count, for modules over MAX_LINES."""
    counts = {
        path.relative_to(root).as_posix(): len(path.read_text().splitlines())
        for path in module_files(root, packages).values()
    }
    return {path: n for path, n in counts.items() if n > MAX_LINES}


def test_no_product_module_is_over_400_lines() -> None:
    offenders = {
        path: n
        for path, n in long_modules(ROOT, product_packages()).items()
        if path not in TOLERATED_LONG_MODULES
    }
    assert not offenders, f"split these by concept (at most {MAX_LINES} lines): {offenders}"


def test_every_tolerated_module_is_still_over_400_lines() -> None:
    long = long_modules(ROOT, product_packages())
    stale = sorted(TOLERATED_LONG_MODULES - set(long))
    assert not stale, f"split or gone: remove from TOLERATED_LONG_MODULES: {stale}"


def test_the_size_check_finds_a_long_module(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "short.py").write_text("x = 1\n" * MAX_LINES)
    (tmp_path / "pkg" / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert long_modules(tmp_path, ["pkg"]) == {"pkg/long.py": MAX_LINES + 1}


# -- imports without the tests -----------------------------------------------------------

IMPORT_EVERY_MODULE = r"""
import importlib, json, sys
root, modules, out, database = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, root)
results = {}
for name in modules:
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        results[name] = {"missing": exc.name, "error": f"{type(exc).__name__}: {exc}"}
    except Exception as exc:
        results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        results[name] = {"file": getattr(module, "__file__", None) or list(module.__path__)[0]}
if database:
    try:
        from registry.db.migrate import upgrade
        upgrade(database)
        import migrations
        results["<alembic upgrade>"] = {"file": migrations.__file__}
    except Exception as exc:
        results["<alembic upgrade>"] = {"error": f"{type(exc).__name__}: {exc}"}
with open(out, "w") as f:
    json.dump(results, f)
"""


def import_in_isolation(
    copy: Path, modules: Iterable[str], database_url: str = ""
) -> dict[str, dict[str, Any]]:
    """Import `modules` in a fresh interpreter whose only project path is `copy`.

    `-I` keeps the environment's PYTHONPATH, the user site and the working directory off the
    path; the editable install's finder comes after the path, so `copy` wins, which each
    result's file shows. Returns name -> {"file"} or {"error", "missing"?}.
    """
    out = copy / "import-results.json"
    argv = [sys.executable, "-I", "-c", IMPORT_EVERY_MODULE, str(copy), json.dumps(list(modules))]
    done = subprocess.run(
        [*argv, str(out), database_url],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def copy_product(target: Path) -> Path:
    for package in product_packages():
        shutil.copytree(ROOT / package, target / package, ignore=shutil.ignore_patterns("__py*"))
    return target


PRODUCT_MODULES = sorted(set(module_files(ROOT, product_packages())) - NOT_IMPORTABLE)


@pytest.fixture(scope="module")
def isolated_imports(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Mapping[str, Any]]:
    copy = copy_product(tmp_path_factory.mktemp("product"))
    assert not (copy / "tests").exists()
    database = f"sqlite:///{copy / 'probe.db'}"
    return copy, import_in_isolation(copy, PRODUCT_MODULES, database)


def check_outcome(name: str, outcome: Mapping[str, Any], copy: Path) -> None:
    missing = (outcome.get("missing") or "").split(".")[0]
    if "file" in outcome:
        assert Path(outcome["file"]).is_relative_to(copy), f"{name} came from {outcome['file']}"
    elif missing in optional_dependencies():
        pytest.skip(f"{name}: optional dependency {missing!r} is not installed")
    else:
        pytest.fail(f"{name} does not import without tests/: {outcome['error']}")


@pytest.mark.parametrize("name", [*PRODUCT_MODULES, "<alembic upgrade>"])
def test_product_module_imports_without_the_tests(
    name: str, isolated_imports: tuple[Path, Mapping[str, Any]]
) -> None:
    copy, results = isolated_imports
    check_outcome(name, results[name], copy)


def test_the_isolation_cannot_see_the_tests(tmp_path: Path) -> None:
    (tmp_path / "needs_tests").mkdir()
    (tmp_path / "needs_tests" / "__init__.py").write_text("from support.engines import call\n")
    (tmp_path / "needs_conftest.py").write_text("import conftest\n")
    results = import_in_isolation(tmp_path, ["needs_tests", "needs_conftest"])
    for name in ("needs_tests", "needs_conftest"):
        with pytest.raises(pytest.fail.Exception, match="does not import without tests/"):
            check_outcome(name, results[name], tmp_path)


def test_a_missing_optional_dependency_is_a_skip(tmp_path: Path) -> None:
    (tmp_path / "gpu.py").write_text("import vllm.not_installed_here\n")
    (tmp_path / "base.py").write_text("import no_such_base_dependency\n")
    results = import_in_isolation(tmp_path, ["gpu", "base"])
    with pytest.raises(pytest.skip.Exception, match="optional dependency 'vllm'"):
        check_outcome("gpu", results["gpu"], tmp_path)
    with pytest.raises(pytest.fail.Exception, match="no_such_base_dependency"):
        check_outcome("base", results["base"], tmp_path)


# -- import cycles -----------------------------------------------------------------------


def module_imports(name: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """The known modules `name` imports anywhere in its source (function bodies included)."""
    return {target for target in every_import(name, path, known) if target in known}


def _known_prefix(dotted: str, known: Mapping[str, Path]) -> str:
    parts = dotted.split(".")
    while parts and ".".join(parts) not in known:
        parts.pop()
    return ".".join(parts)


def import_cycles(root: Path, packages: Iterable[str]) -> list[list[str]]:
    """One cycle (a -> ... -> a) per strongly connected group of modules."""
    known = module_files(root, packages)
    graph = {name: module_imports(name, path, known) for name, path in known.items()}
    cycles = []
    for group in strongly_connected(graph):
        start = min(group)
        cycles.append(_cycle_through(start, graph, group))
    return cycles


def strongly_connected(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Groups of two or more modules that reach each other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            child = next(edges, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def _cycle_through(start: str, graph: Mapping[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path start -> ... -> start inside `group` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in {sorted(group)}")


def test_no_import_cycle_among_product_modules() -> None:
    cycles = [c for c in import_cycles(ROOT, product_packages()) if set(c) not in TOLERATED_CYCLES]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_every_tolerated_cycle_is_still_a_cycle() -> None:
    groups = {frozenset(c) for c in import_cycles(ROOT, product_packages())}
    stale = [sorted(group) for group in TOLERATED_CYCLES if group not in groups]
    assert not stale, f"broken or changed: remove from TOLERATED_CYCLES: {stale}"


def test_the_cycle_check_reports_a_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    type_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import C\n"
    (pkg / "sub" / "b.py").write_text(type_only)
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text("import pkg.a\n")  # into the cycle, not part of it
    assert import_cycles(tmp_path, ["pkg"]) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]
    (pkg / "c.py").write_text("import json\n")
    assert import_cycles(tmp_path, ["pkg"]) == []


def test_the_cycle_check_reads_lazy_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def later():\n    from . import a\n")
    assert import_cycles(tmp_path, ["pkg"]) == [["pkg.a", "pkg.b", "pkg.a"]]
    (pkg / "b.py").write_text("class Late:\n    async def run(self):\n        import pkg.a\n")
    assert import_cycles(tmp_path, ["pkg"]) == [["pkg.a", "pkg.b", "pkg.a"]]
    (pkg / "b.py").write_text("def later():\n    import json\n")
    assert import_cycles(tmp_path, ["pkg"]) == []


def test_the_api_knows_nothing_of_the_web_pages() -> None:
    """registry.app joins them; below it, the pages may use the API, never the reverse."""
    known = module_files(ROOT, product_packages())
    upward = {
        name: sorted(t for t in module_imports(name, path, known) if t.startswith("registry.web"))
        for name, path in known.items()
        if name.startswith("registry.api")
    }
    assert not {name: found for name, found in upward.items() if found}


# -- bench/ uses the product only ----------------------------------------------------------


def names_in_tests(root: Path) -> set[str]:
    """Every name a module of tests/ can be imported by (tests/ and its subdirectories are
    put on `sys.path` by conftest), less the names bench/ or the product also define."""
    tests = root / "tests"
    names = {"tests"}
    for path in tests.rglob("*"):
        if path.suffix == ".py" and path.name != "__init__.py":
            names.add(path.stem)
        elif path.is_dir() and (path / "__init__.py").exists():
            names.add(path.name)
    own = {path.stem for path in (root / "bench").glob("*.py")}
    return names - own - set(product_packages())


def bench_reaches_into_tests(root: Path) -> dict[str, list[str]]:
    """bench/ script -> what it takes from tests/: imports (lazy ones too) of a module that
    lives there, and string constants naming the tests/ directory (a `sys.path` entry)."""
    forbidden = names_in_tests(root)
    found: dict[str, list[str]] = {}
    for path in sorted((root / "bench").glob("*.py")):
        offences = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                names = []
            offences += [f"import {n}" for n in names if n.split(".")[0] in forbidden]
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value == "tests" or node.value.startswith("tests/"):
                    offences.append(f"path {node.value!r}")
        if offences:
            found[path.name] = sorted(offences)
    return found


def test_bench_imports_no_tests_module() -> None:
    found = bench_reaches_into_tests(ROOT)
    assert not found, f"bench/ must use the product only (or its own modules): {found}"


def test_the_bench_check_finds_an_import_from_tests(tmp_path: Path) -> None:
    (tmp_path / "tests" / "support").mkdir(parents=True)
    (tmp_path / "tests" / "support" / "__init__.py").write_text("")
    (tmp_path / "tests" / "registry").mkdir()
    (tmp_path / "tests" / "registry" / "factories.py").write_text("")
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "helpers.py").write_text("")
    (tmp_path / "bench" / "clean.py").write_text("import helpers\nfrom storage import x\n")
    (tmp_path / "bench" / "dirty.py").write_text(
        "import sys\nsys.path.insert(0, str(ROOT / 'tests'))\n"
        "from support.fleet import Seeded\n"
        "def later():\n    from factories import write_adapter\n"
    )
    assert bench_reaches_into_tests(tmp_path) == {
        "dirty.py": ["import factories", "import support.fleet", "path 'tests'"]
    }


def test_the_support_package_is_not_shipped() -> None:
    patterns = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    for name in ("support", "support.engines", "tests", "tests.support", "conftest"):
        assert not any(fnmatch.fnmatch(name, pattern) for pattern in patterns), name
    setuptools = pytest.importorskip("setuptools")
    shipped = setuptools.find_packages(str(ROOT), include=patterns)
    assert sorted({p.split(".")[0] for p in shipped}) == product_packages()


# -- the CLI stays at the edge -----------------------------------------------------------

CLI_PACKAGES = frozenset({"cli", "clikit"})
"""Top-level packages that are all CLI: the `weact` dispatcher, and the shared CLI kit."""
KIT = "clikit"

# Known library modules that still reach into a CLI; empty this list as they are fixed.
TOLERATED_CLI_IMPORTS: frozenset[tuple[str, str]] = frozenset()


def is_cli_module(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in CLI_PACKAGES or "cli" in parts[1:] or parts[-1].endswith("_cli")


def every_import(name: str, path: Path, known: Mapping[str, Path]) -> set[str]:
    """Everything `name` imports, lazily or not: a known module where the name is one (or
    lies inside one), else the dotted name as written (`click`, `click.testing`)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.add(submodule if submodule in known else base)
    return {_known_prefix(target, known) or target for target in targets} - {name}


def cli_imports(root: Path, packages: Iterable[str]) -> set[tuple[str, str]]:
    """(module, what it imports) for each library module that imports click, clikit or a
    CLI module."""
    known = module_files(root, packages)
    found = set()
    for name, path in known.items():
        if is_cli_module(name):
            continue
        for target in every_import(name, path, known):
            if target.split(".")[0] == "click" or (target in known and is_cli_module(target)):
                found.add((name, target))
    return found


def kit_imports(root: Path, packages: Iterable[str]) -> set[tuple[str, str]]:
    """(module, project module) for each import of the project from inside clikit."""
    known = module_files(root, packages)
    return {
        (name, target)
        for name, path in known.items()
        if name.split(".")[0] == KIT
        for target in every_import(name, path, known)
        if target in known and target.split(".")[0] != KIT
    }


def test_no_library_module_imports_click_or_a_cli() -> None:
    found = cli_imports(ROOT, product_packages()) - TOLERATED_CLI_IMPORTS
    listed = "; ".join(f"{name} imports {target}" for name, target in sorted(found))
    assert not found, f"report progress through a callback, raise a typed error: {listed}"


def test_every_tolerated_cli_import_is_still_there() -> None:
    stale = sorted(TOLERATED_CLI_IMPORTS - cli_imports(ROOT, product_packages()))
    assert not stale, f"fixed: remove from TOLERATED_CLI_IMPORTS: {stale}"


def test_clikit_imports_nothing_of_the_project() -> None:
    assert KIT in product_packages()
    found = kit_imports(ROOT, product_packages())
    assert not found, f"clikit must stand alone: {sorted(found)}"


def test_the_cli_checks_find_a_library_module_that_reaches_into_a_cli(tmp_path: Path) -> None:
    for package in ("pkg", "pkg/cli", "cli", "clikit"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    files = {
        "pkg/cli/group.py": "import click\nfrom clikit import errors\n",  # a CLI package
        "pkg/cli.py": "import click\n",
        "pkg/run_cli.py": "import click\nfrom pkg.cli import group\n",
        "pkg/lib.py": "import json\nfrom . import engine\n",  # clean
        "pkg/engine.py": "def f():\n    from click import BadParameter\n",
        "pkg/sync.py": "from clikit.progress import steps\n",
        "pkg/merge.py": "if TYPE_CHECKING:\n    import pkg.run_cli\n",
        "pkg/assemble.py": "from .cli import group\n",
        "clikit/errors.py": "import click\nimport json\n",  # clean
        "clikit/progress.py": "import click\nfrom . import errors\n",  # clean
        "clikit/options.py": "def f():\n    from pkg import lib\n",
        "cli/main.py": "import click\nfrom pkg.cli import group\nfrom pkg import lib\n",
    }
    for relative, text in files.items():
        (tmp_path / relative).write_text(text)
    packages = ["pkg", "cli", "clikit"]
    assert cli_imports(tmp_path, packages) == {
        ("pkg.engine", "click"),
        ("pkg.sync", "clikit.progress"),
        ("pkg.merge", "pkg.run_cli"),
        ("pkg.assemble", "pkg.cli.group"),
    }
    assert kit_imports(tmp_path, packages) == {("clikit.options", "pkg.lib")}
