"""`goalenvs check`: the goal-env conformance checker.

>>> from goalenvs.checker import check_goal_env
>>> report = check_goal_env(gym.make("goalenvs/PointReach-v0"))
>>> report.ok, report.errors, report.warnings
>>> print(report)            # a table; report.to_json() for machines

A vector env (``gym.make_vec(...)``, a native twin, numpy or torch) is detected and gets
the vector checks (``vector.*``); ``load_vector`` builds one from any SPEC form.
In a test suite, ``assert_goal_env(env)`` raises an AssertionError listing every error.
Every check is documented in docs/checks.md by its id.
"""

from __future__ import annotations

from goalenvs.checker.loader import LoadedVector, LoadError, load, load_vector
from goalenvs.checker.registry import CHECKS
from goalenvs.checker.report import CheckResult, Finding, Report
from goalenvs.checker.runner import GoalEnvCheckError, assert_goal_env, check_goal_env

__all__ = [
    "CHECKS",
    "CheckResult",
    "Finding",
    "GoalEnvCheckError",
    "LoadError",
    "LoadedVector",
    "Report",
    "assert_goal_env",
    "check_goal_env",
    "load",
    "load_vector",
]
