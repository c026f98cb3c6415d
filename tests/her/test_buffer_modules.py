"""The modules of goalenvs.her are cut by responsibility: no two of them import each
other, and they import in an order (no cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

HER = Path(__file__).resolve().parents[2] / "goalenvs" / "her"


def her_imports(path: Path) -> set[str]:
    """The modules of goalenvs.her that ``path`` imports (at any level of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "goalenvs.her":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("goalenvs.her."):
                found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("goalenvs.her."):
                    found.add(alias.name.split(".")[2])
    return found


def test_no_two_modules_of_her_import_each_other() -> None:
    modules = {path.stem: her_imports(path) for path in HER.glob("*.py")}
    assert {"buffer", "buffer_file", "buffer_state", "sb3"} <= modules.keys()
    pairs = sorted(
        (a, b) for a in modules for b in modules[a] if a < b and a in modules.get(b, set())
    )
    assert pairs == []
    # And no longer cycle either: every module can be imported after those it imports.
    done: set[str] = set()
    while len(done) < len(modules):
        ready = {m for m, deps in modules.items() if m not in done and deps - {m} <= done}
        assert ready, f"a cycle among {sorted(set(modules) - done)}"
        done |= ready
