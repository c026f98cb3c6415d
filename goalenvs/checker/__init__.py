"""`goalenvs check`: the goal-env conformance checker (every check id is in docs/checks.md).

>>> from goalenvs.checker import check_goal_env
>>> report = check_goal_env(gym.make("goalenvs/PointReach-v0"))
>>> report.ok, report.errors, report.warnings  # print(report): a table; report.to_json()

A vector env gets the ``vector.*`` checks; ``assert_goal_env(env)`` is for test suites."""

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
