"""The house's plan: packages in floors whose imports only point down, no import cycle, and nothing at the root of
the package but the programs' entry points and `run`."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "initializers"
#: From the floor up: each package may import only the ones before it.
FLOORS = [
    "common", "store", "process", "adapters", "config", "destination", "cache", "transfer", "sources", "plan", "steps",
    "kubeflow",
]  # fmt: skip
#: The root: the programs' entry points (the two initializers share `cli`), and one run end to end.
ROOT_MODULES = {"__init__", "run", "cli", "dataset", "model", "cache_server"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module of ours `path` imports, at the top or lazily inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("initializers"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("initializers"):
            for alias in node.names:  # `from initializers.x import y`: y may be a module of package x
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found


MODULES = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
GRAPH = {name: _imports(path) & MODULES.keys() - {name} for name, path in MODULES.items()}


def _floor(module: str) -> str:
    """The package a module belongs to (its first name below `initializers`), or the root module's own name."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_the_root_holds_only_entry_points_and_run():
    root = {path.stem for path in PACKAGE.glob("*.py")}
    assert root == ROOT_MODULES
    assert {path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"} == set(FLOORS)


def test_every_package_says_what_it_owns():
    for init in PACKAGE.glob("*/__init__.py"):
        assert ast.get_docstring(ast.parse(init.read_text())), init


def test_packages_import_only_the_floors_below_them():
    wrong = defaultdict(set)
    for module, imported in GRAPH.items():
        floor = _floor(module)
        if floor not in FLOORS:
            continue  # the root may import any floor
        below = {"__init__", *FLOORS[: FLOORS.index(floor) + 1]}  # `__init__`: the package's version
        for target in imported:
            if _floor(target) not in below:
                wrong[module].add(target)
    assert not wrong, dict(wrong)


def test_a_source_is_written_against_the_store_contract_never_the_engine():
    """Sources sit above the engine's floor only so that the run can hand one to the other; a source imports the
    contract (`store`) and never a module of the engine (`transfer`), which runs its files by the contract."""
    reaching = {
        module: sorted(target for target in imported if _floor(target) == "transfer")
        for module, imported in GRAPH.items()
        if _floor(module) == "sources"
    }
    assert not {module: targets for module, targets in reaching.items() if targets}


def _sources_package(module: str) -> str | None:
    """The sub-package of `sources` a module belongs to (`s3`, `http` ...), or None."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "sources" else None


def _plug_ins() -> set[str]:
    """The sub-packages of `sources` that are a store: each one's face defines the opener its plug-in holds."""
    from initializers.sources import STORES

    return {_sources_package(plugin.open.__module__) for plugin in STORES} - {None}


def test_a_plug_in_reaches_another_store_only_through_a_shared_package():
    """What two stores share (the cache reading its table through S3) goes through a package of `sources` that
    registers nothing (`http`, `aws`) and both import, never through one plug-in's modules: a plug-in imports no
    other plug-in's modules, and a shared package imports no plug-in's."""
    plug_ins = _plug_ins()
    packages = {_sources_package(module) for module in MODULES} - {None}
    assert plug_ins and plug_ins < packages, (plug_ins, packages)  # registered sources, and packages they share
    reaching = {
        module: sorted(target for target in imported if _sources_package(target) in plug_ins - {own})
        for module, imported in GRAPH.items()
        if (own := _sources_package(module)) is not None
    }
    assert not {module: targets for module, targets in reaching.items() if targets}


def test_no_module_outside_sources_imports_a_stores_package():
    """The core knows the stores only as the composition root (`initializers.sources`) hands them over: it imports
    what two stores share (`sources.http`), never a store's own package."""
    plug_ins = _plug_ins()
    reaching = {
        module: sorted(target for target in imported if _sources_package(target) in plug_ins)
        for module, imported in GRAPH.items()
        if _floor(module) != "sources"
    }
    assert not {module: targets for module, targets in reaching.items() if targets}


#: Outside `sources/`, where a store's scheme may be written in code: the cache server and the materialisation it
#: serves (`cache/`, the cache:// store's), and Kubeflow's own classes (kubeflow/sdk.py, by their class keywords).
NAMES_A_SCHEME = {"cache_server", "cache"}


def _schemes_named(path: Path, schemes: set[str]) -> list[str]:
    """The strings of `path`'s code, docstrings and the words `human` counts aside, that are a scheme of `schemes` or
    hold a URI of one; a class's keywords aside in kubeflow/sdk.py (Kubeflow's own classes: `kind=DATASET,
    scheme="hf"`)."""
    tree = ast.parse(path.read_text())
    skipped = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }  # fmt: skip
    skipped |= {  # the words of a message, counted (`human.count(n, "file")`), whatever scheme they spell
        id(word)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "human"
        for word in node.args
    }  # fmt: skip
    if path == MODULES["initializers.kubeflow.sdk"]:
        skipped |= {
            id(word.value) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for word in node.keywords
        }
    return [
        f"{path.relative_to(PACKAGE.parents[1])}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
        and any(node.value == scheme or f"{scheme}://" in node.value for scheme in schemes)
    ]  # fmt: skip


def test_no_module_outside_sources_names_a_stores_scheme():
    """A store's scheme is written in its folder and nowhere else in the core: messages, --help and the SDK's classes
    name the schemes the plug-ins declare."""
    from initializers.sources import STORES

    schemes = {plugin.scheme for plugin in STORES}
    named = [
        found
        for module, path in MODULES.items()
        if _floor(module) not in ("sources", *NAMES_A_SCHEME)
        for found in _schemes_named(path, schemes)
    ]
    assert not named


def _libraries(tree: ast.AST) -> set[str]:
    """The top-level names of what `tree` imports (at the top or inside a function), but ours and the standard
    library's."""
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    return {name.split(".")[0] for name in names} - {*sys.stdlib_module_names, "initializers"}


def _store_only_kinds() -> tuple[set[str], set[str]]:
    """The names of the checksum kinds a store declares in its own folder (not the shared ones of `store.hashers`),
    and the libraries the modules declaring them import (google_crc32c)."""
    import importlib
    import pkgutil

    import initializers.sources
    from initializers.store import hashers

    shared = {kind.name for kind in vars(hashers).values() if isinstance(kind, hashers.HashKind)}
    names, libraries = set(), set()
    for module in pkgutil.walk_packages(initializers.sources.__path__, "initializers.sources."):
        declared = {
            kind.name
            for kind in vars(importlib.import_module(module.name)).values()
            if isinstance(kind, hashers.HashKind) and kind.name not in shared
        }
        if declared:
            names |= declared
            libraries |= _libraries(ast.parse(MODULES[module.name].read_text()))
    return names, libraries


def test_the_engine_holds_no_store_specific_checksum_code():
    """The engine verifies files by the checksum kinds their store declares (`Source.checksum_kinds`): it imports no
    store's package nor the libraries a store's kinds are computed with (google_crc32c), and names no kind only a
    store uses."""
    kinds, libraries = _store_only_kinds()
    assert {"crc32", "crc32c", "git-sha1"} <= kinds and "google_crc32c" in libraries, (kinds, libraries)
    for module, path in MODULES.items():
        if _floor(module) != "transfer":
            continue
        tree = ast.parse(path.read_text())
        assert not _libraries(tree) & libraries, module
        assert not {target for target in GRAPH[module] if _floor(target) == "sources"}, module
        named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in kinds}
        assert not named, (module, named)


def test_the_conformance_suite_lists_no_store_by_hand():
    """It runs every store of the composition root, each found by its scheme (`devkit.conformance.fixtures`): it
    names no scheme, no store's conformance class and no store's package."""
    from devkit.conformance import fixtures
    from initializers.sources import STORES

    suite = Path(__file__).with_name("test_conformance.py")
    schemes = {plugin.scheme for plugin in STORES}
    tree = ast.parse(suite.read_text())
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
    modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    stores = {store.__name__ for scheme in schemes for store in fixtures(scheme).values()}
    assert stores and not names & stores
    assert not [
        module for module in modules if module and module.startswith(("devkit.conformance.", "initializers.sources."))
    ]
    assert not _schemes_named(suite, schemes)


def test_no_import_cycle():
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for target in sorted(GRAPH[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(GRAPH):
        visit(module, [])


@pytest.mark.parametrize("floor", FLOORS)
def test_each_floor_imports_alone_and_loads_nothing_above_it(floor: str):
    """Importing every module of a floor in a fresh interpreter loads no module of a floor above it."""
    modules = sorted(name for name in MODULES if _floor(name) == floor)
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('initializers'))))"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    above = set(FLOORS[FLOORS.index(floor) + 1 :]) | (ROOT_MODULES - {"__init__"})
    assert not [name for name in loaded if _floor(name) in above]


#: The most modules of the package one module imports: more says it does more than one thing.
MOST_IMPORTED_MODULES = 14
#: The longest function: longer ones hide steps that deserve names.
MOST_FUNCTION_LINES = 60


def test_no_module_imports_more_than_fourteen_of_the_packages_modules():
    crowded = {module: len(imported) for module, imported in GRAPH.items() if len(imported) > MOST_IMPORTED_MODULES}
    assert not crowded


def test_no_function_is_longer_than_sixty_lines():
    long = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in PACKAGE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MOST_FUNCTION_LINES
    ]
    assert not long
