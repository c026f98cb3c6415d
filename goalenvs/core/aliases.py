"""Old module paths kept importable as aliases of the modules that replaced them.

An alias is the same module object under a second name (so monkeypatching either patches
both), not a file: with no file left at the old path, git sees each move as a rename and
carries edits made to the old file over to the new one. Imports nothing else from goalenvs.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

# Every alias registered so far: old module path -> the path of the module it names.
_ALIASES: dict[str, str] = {}


class _AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (the same object in sys.modules)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a throwaway module; exec_module replaces it in sys.modules

    def exec_module(self, module: ModuleType) -> None:
        # The import system returns whatever sys.modules holds under the name after
        # exec_module, so the old name resolves to the new module itself.
        sys.modules[module.__name__] = importlib.import_module(_ALIASES[module.__name__])


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths registered with :func:`alias_modules` (and nothing else)."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in _ALIASES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader())


def alias_modules(moved: Mapping[str, str]) -> None:
    """Makes each old module path of ``moved`` (old path -> new path) import as the module
    at its new path, loaded on first import of either name."""
    _ALIASES.update(moved)
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
