"""The package layout (docs/layout.md): no goalenvs modules that import each other, no
private name used outside its module, every name imported from the module that defines it
(or from a package's public face), and every name the README and docs/layout.md show
importable.

The import rules read the source (every import statement, wherever it stands in the
module), so they hold for code no test runs.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.test_docs import DOCS, python_blocks

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "goalenvs"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


@dataclass(frozen=True)
class Import:
    """One name (or one whole module, ``name`` None) that a file imports from goalenvs."""

    where: str  # file:line of the statement
    module: str  # the goalenvs module it imports, or imports the name from
    name: str | None


def _ours(module: str | None) -> bool:
    return module is not None and (module == "goalenvs" or module.startswith("goalenvs."))


def _absolute(node: ast.ImportFrom, package: str) -> str | None:
    """The module a ``from ... import`` names; a relative one is resolved in ``package``."""
    if not node.level:
        return node.module
    parts = package.split(".")
    parts = parts[: len(parts) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def goalenvs_imports(tree: ast.AST, label: str, package: str = "") -> list[Import]:
    """Every goalenvs import of a parsed file (``label``: its name in messages), at module
    level, inside functions and under ``if TYPE_CHECKING`` alike: an import for the type
    checker is still a dependency, and a cycle through it is still one cycle."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [
                Import(f"{label}:{node.lineno}", alias.name, None)
                for alias in node.names
                if _ours(alias.name)
            ]
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, package)
            if source is None or not _ours(source):
                continue
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in MODULES:
                    found.append(Import(f"{label}:{node.lineno}", submodule, None))
                else:
                    found.append(Import(f"{label}:{node.lineno}", source, alias.name))
    return found


def _label(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _package_of(module: str) -> str:
    """The package a module's relative imports start from."""
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        for imported in graph.get(stack.pop(), ()):
            if imported not in seen:
                seen.add(imported)
                stack.append(imported)
    return seen


def import_cycles(imports: dict[str, list[Import]]) -> list[set[str]]:
    """The groups of modules (the keys of ``imports``) that reach each other through their
    imports."""
    graph = {
        importer: {i.module for i in found if i.module in imports and i.module != importer}
        for importer, found in imports.items()
    }
    reach = {module: _reachable(graph, module) for module in graph}
    cycles: list[set[str]] = []
    for module in sorted(graph):
        if module in reach[module] and not any(module in cycle for cycle in cycles):
            cycles.append({other for other in reach[module] if module in reach[other]})
    return cycles


def test_no_two_goalenvs_modules_import_each_other():
    imports = {
        module: goalenvs_imports(_tree(path), _label(path), _package_of(module))
        for module, path in MODULES.items()
    }
    described = []
    for cycle in import_cycles(imports):
        lines = sorted(
            {
                f"{i.where} imports {i.module}"
                for module in cycle
                for i in imports[module]
                if i.module in cycle and i.module != module
            }
        )
        described.append(f"{' <-> '.join(sorted(cycle))}:\n  " + "\n  ".join(lines))
    assert not described, (
        "modules that import each other are one module, or a missing third one:\n"
        + "\n".join(described)
    )


def test_the_cycle_finder_follows_imports_in_functions_and_under_type_checking():
    sources = {
        "goalenvs.a": "from goalenvs.b import B\n",
        "goalenvs.b": "def f():\n    import goalenvs.c\n",
        "goalenvs.c": "if TYPE_CHECKING:\n    from goalenvs.a import A\n",
        "goalenvs.d": "from goalenvs.a import A\n",
    }
    imports = {name: goalenvs_imports(ast.parse(code), name) for name, code in sources.items()}
    assert imports["goalenvs.c"] == [Import("goalenvs.c:2", "goalenvs.a", "A")]
    assert import_cycles(imports) == [{"goalenvs.a", "goalenvs.b", "goalenvs.c"}]


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_attribute_reads(tree: ast.AST, package: str = "") -> list[tuple[int, str, str]]:
    """``(line, module, name)`` for each ``x.name`` the file reads where ``x`` is a goalenvs
    module it imported (``import goalenvs.core.io as io``, ``from goalenvs import envspec``;
    ``import goalenvs.x`` binds ``goalenvs``)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ours(alias.name):
                    bound[alias.asname or "goalenvs"] = alias.name if alias.asname else "goalenvs"
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(node, package)
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
    reads = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            head, _, rest = (_dotted(node.value) or "").partition(".")
            if head in bound:
                module = ".".join(filter(None, [bound[head], rest]))
                if module in MODULES:
                    reads.append((node.lineno, module, node.attr))
    return reads


def private_names_used(tree: ast.AST, module: str, package: str) -> set[str]:
    """``module.name`` of each private name the file ``module`` takes from another goalenvs
    module: imported (``from goalenvs.x import _y``) or read through it (``x._y``)."""
    imported = [(i.module, i.name) for i in goalenvs_imports(tree, module, package)]
    read = [(owner, name) for _, owner, name in module_attribute_reads(tree, package)]
    return {
        f"{owner}.{name}"
        for owner, name in imported + read
        if name is not None and _private(name) and owner != module
    }


def test_no_goalenvs_module_uses_a_private_name_of_another():
    found = sorted(
        (module, name)
        for module, path in MODULES.items()
        for name in private_names_used(_tree(path), module, _package_of(module))
    )
    assert not found, (
        "a name another module uses is public: drop its underscore (and document it), "
        f"or keep its use inside its module: {found}"
    )


def test_the_private_name_finder_sees_imports_and_module_attributes():
    code = (
        "import goalenvs.core.io as io\n"
        "import goalenvs.core.backend\n"
        "from goalenvs.core import validate, GoalEnv\n"
        "from goalenvs.train.display import _Display\n"
        "def f(x):\n"
        "    return io._TMP_SUFFIX, goalenvs.core.backend._torch, validate._x, x._y, io.__name__\n"
        "    return GoalEnv._private_method, _Display._own\n"
    )
    found = private_names_used(ast.parse(code), "goalenvs.play.screen", "goalenvs.play")
    assert found == {
        "goalenvs.core.io._TMP_SUFFIX",
        "goalenvs.core.backend._torch",
        "goalenvs.core.validate._x",
        "goalenvs.train.display._Display",
    }


# --------------------------------------------------------------------------- one path per name


def all_sources() -> list[tuple[str, ast.AST, str]]:
    """``(label, parsed source, package)`` of every Python file of the repository and
    every ```python block of the docs (``package``: where relative imports start)."""
    sources = [(_label(path), _tree(path), _package_of(m)) for m, path in MODULES.items()]
    for folder in ("tests", "benchmarks", "examples", "docs"):
        sources += [(_label(p), _tree(p), "") for p in sorted((ROOT / folder).rglob("*.py"))]
    for doc in DOCS:
        for number, body in enumerate(python_blocks(doc.read_text()), 1):
            sources.append((f"{_label(doc)} python block {number}", ast.parse(body), ""))
    return sources


def _top_level_names(path: Path) -> set[str]:
    """The names a module binds itself (definitions and assignments, not imports)."""
    names: set[str] = set()
    statements = list(_tree(path).body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try)):
            statements += [*node.body, *node.orelse]
            statements += [s for h in getattr(node, "handlers", []) for s in h.body]
    return names


@cache
def _defines(module: str, name: str) -> bool:
    """Whether ``module`` binds ``name`` itself or, a package, names it in ``__all__`` (its
    public face)."""
    if name in _top_level_names(MODULES[module]):
        return True
    return MODULES[module].name == "__init__.py" and name in getattr(
        importlib.import_module(module), "__all__", ()
    )


def test_every_import_names_the_module_that_defines_the_name():
    wrong = []
    for i in [i for label, tree, pkg in all_sources() for i in goalenvs_imports(tree, label, pkg)]:
        if i.module not in MODULES:
            wrong.append(f"{i.where}: {i.module} is not a goalenvs module")
        elif i.name not in (None, "*") and not _defines(i.module, i.name):
            wrong.append(f"{i.where}: {i.module} does not define {i.name}")
    # Inside the package a module's names are read from their own module too; tests and
    # benchmarks may reach through one to patch the name where it is used.
    for module_name, path in MODULES.items():
        label, tree, package = _label(path), _tree(path), _package_of(module_name)
        for line, module, name in module_attribute_reads(tree, package):
            dunder = name.startswith("__") and name.endswith("__")
            if not (dunder or f"{module}.{name}" in MODULES or _defines(module, name)):
                wrong.append(f"{label}:{line}: {module} does not define {name}")
    assert not wrong, "import each name from the module that defines it:\n" + "\n".join(wrong)


PACKAGES = sorted(m for m, path in MODULES.items() if path.name == "__init__.py")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_package_exports_exists(package):
    module = importlib.import_module(package)
    missing = [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it does not hold: {missing}"


def test_importing_the_registry_the_buffers_and_the_loop_loads_no_torch():
    code = (
        "import sys, goalenvs.agents.registry, goalenvs.her, goalenvs.train; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- the public API

PUBLIC_DOCS = [ROOT / "README.md", ROOT / "docs" / "layout.md"]
DOTTED = re.compile(r"\bgoalenvs(?:\.[A-Za-z_]\w*)+")


def shown_names() -> list[tuple[str, str]]:
    """``(doc, dotted name)`` of each goalenvs name README.md and docs/layout.md show: the
    imports of their Python blocks and every ``goalenvs.x.y`` they write."""
    shown = []
    for doc in PUBLIC_DOCS:
        text, label = doc.read_text(), _label(doc)
        for body in python_blocks(text):
            for i in goalenvs_imports(ast.parse(body), label):
                shown.append((label, i.module if i.name is None else f"{i.module}.{i.name}"))
        shown += [(label, name) for name in DOTTED.findall(text)]
    return sorted(set(shown))


def resolve(dotted: str) -> object:
    """The object a dotted name names: its longest importable module, then attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module = ".".join(parts[:split])
        if module in MODULES:
            value: object = importlib.import_module(module)
            for attribute in parts[split:]:
                value = getattr(value, attribute)
            return value
    raise ModuleNotFoundError(f"no goalenvs module in {dotted!r}")


@pytest.mark.parametrize(("doc", "dotted"), shown_names())
def test_every_name_the_readme_and_layout_show_imports(doc, dotted):
    try:
        resolve(dotted)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not _ours(exc.name):
            pytest.skip(f"{dotted} needs {exc.name}, which is not installed")
        raise AssertionError(f"{doc} shows {dotted}, which does not import: {exc}") from exc
    except AttributeError as exc:
        raise AssertionError(f"{doc} shows {dotted}, which does not exist: {exc}") from exc


# The classes README.md and docs/layout.md name in `code`, by the module each lives in.
SHOWN_CLASSES = {
    "goalenvs.agents.base": ["Agent"],
    "goalenvs.agents.config": ["TrainConfig"],
    "goalenvs.core.contract": ["GoalEnv"],
    "goalenvs.core.vector": ["GoalVectorEnv"],
    "goalenvs.her.buffer": ["HerReplayBuffer", "DeviceHerReplayBuffer"],
    "goalenvs.her.common": ["HerBatch"],
    "goalenvs.her.settings": ["BufferSettings"],
    "goalenvs.train.collectors": ["Backend", "Collector"],
    "goalenvs.train.plan": ["EnvFacts", "RunPlan"],
    "goalenvs.train.run_folder": ["Counters", "Restored", "RunFolder"],
    "goalenvs.train.trainer": ["Trainer"],
}


def test_every_class_the_readme_and_layout_name_is_listed_and_imports():
    named = {
        name
        for doc in PUBLIC_DOCS
        for name in re.findall(r"`([A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)`", doc.read_text())
    }
    listed = [(module, name) for module, names in SHOWN_CLASSES.items() for name in names]
    assert named == {name for _, name in listed}, "list each class the docs name in SHOWN_CLASSES"
    for module, name in listed:
        assert isinstance(resolve(f"{module}.{name}"), type), name


def layout_rooms() -> list[tuple[str, list[str], str]]:
    """``(row, its room folders, a name)`` for each backticked identifier in a room's row
    of docs/layout.md's table."""
    rows = []
    for line in (ROOT / "docs" / "layout.md").read_text().splitlines():
        cells = line.split("|")
        if len(cells) != 4 or "`" not in cells[1]:
            continue
        folders = re.findall(r"`(\w+)/`", cells[1])
        names = [n for n in re.findall(r"`([^`]+)`", cells[2]) if n.isidentifier()]
        if folders:
            rows += [(cells[1].strip(), folders, name) for name in names]
    return rows


@pytest.mark.parametrize(("row", "folders", "name"), layout_rooms())
def test_layout_names_modules_and_names_its_rooms_hold(row, folders, name):
    """A name in a room's row of the table is one of that room's modules, or a name one of
    them defines."""
    rooms = [PACKAGE / folder for folder in folders]
    modules = [p for room in rooms for p in (room / f"{name}.py", room / name / "__init__.py")]
    if any(p.is_file() for p in modules):
        return
    defined = set().union(*(_top_level_names(p) for room in rooms for p in room.rglob("*.py")))
    assert name in defined, f"docs/layout.md's row {row} names `{name}`, which it does not hold"


def test_the_docs_names_and_the_layout_table_are_read():
    """The tables the two parametrized tests above run over are not empty by mistake."""
    names = {name for _, name in shown_names()}
    assert {"goalenvs.her.HerReplayBuffer", "goalenvs.checker.check_goal_env"} <= names
    rows = {(folders[0], name) for _, folders, name in layout_rooms()}
    assert {("core", "contract"), ("play", "screen"), ("her", "BufferSettings")} <= rows
