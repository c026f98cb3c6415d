"""Every check of ``goalenvs check``, by family; importing this package registers them
all, and :data:`FAMILIES` sets the order of the report."""

from __future__ import annotations

from goalenvs.checker.checks.api import *  # noqa: F403
from goalenvs.checker.checks.compat import *  # noqa: F403
from goalenvs.checker.checks.episodes import *  # noqa: F403
from goalenvs.checker.checks.gymnasium_checks import *  # noqa: F403
from goalenvs.checker.checks.near_goal import *  # noqa: F403
from goalenvs.checker.checks.render import *  # noqa: F403
from goalenvs.checker.checks.reward import *  # noqa: F403
from goalenvs.checker.checks.spaces import *  # noqa: F403
from goalenvs.checker.checks.success import *  # noqa: F403
from goalenvs.checker.checks.termination import *  # noqa: F403
from goalenvs.checker.checks.vector import *  # noqa: F403
from goalenvs.checker.registry import CHECKS

__all__ = ["CHECKS", "FAMILIES"]

# The report order: family by family (each family keeps its own order of definition),
# whatever order the imports above ran in.
FAMILIES = (
    "spaces", "api", "reward", "termination", "success", "episodes", "near_goal", "render",
    "compat", "vector", "gymnasium_checks",
)  # fmt: skip


def _family_rank(check_id: str) -> int:
    module = CHECKS[check_id].func.__module__.rsplit(".", 1)[-1]
    if module not in FAMILIES:
        raise ValueError(f"check {check_id!r} lives in module {module!r}, not in FAMILIES")
    return FAMILIES.index(module)


_ordered = sorted(CHECKS, key=_family_rank)  # stable: a family keeps its own order
_by_id = dict(CHECKS)
CHECKS.clear()
CHECKS.update((check_id, _by_id[check_id]) for check_id in _ordered)
