"""Every check of ``goalenvs check``, by family; importing this package registers them
all, family by family in the order of :data:`FAMILIES` (the order of the report)."""

from __future__ import annotations

import importlib

from goalenvs.checker.registry import CHECKS

__all__ = ["CHECKS", "FAMILIES"]

# Each module registers its checks in the order they are defined; a module imports only
# modules of families before its own.
FAMILIES = (
    "spaces", "api", "reward", "termination", "success", "episodes", "near_goal", "render",
    "compat", "vector", "gymnasium_checks",
)  # fmt: skip
for _family in FAMILIES:
    importlib.import_module(f"goalenvs.checker.checks.{_family}")
