"""The runner: runs every registered check, isolating each one, and builds the report."""

from __future__ import annotations

import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from goalenvs.checker import checks as _checks  # noqa: F401  (registers the checks)
from goalenvs.checker.context import (
    Context,
    EnvCallError,
    EnvHungError,
    EnvTimeoutError,
    SkipCheckError,
)
from goalenvs.checker.registry import CHECKS, Check, Outcome
from goalenvs.checker.report import CheckResult, Report
from goalenvs.checker.vector_probe import declared_mode, is_vector_env, single_env_factory

__all__ = ["GoalEnvCheckError", "assert_goal_env", "check_goal_env"]

# Checks that read what the others left behind (warnings, timeouts): run last.
_LAST = ("gym.warnings", "gym.notes", "api.timeout")


def _run_one(ctx: Context, check: Check) -> CheckResult:
    result = CheckResult(check.id, check.severity, check.title)
    out = Outcome(result)
    start = time.perf_counter()
    try:
        check.func(ctx, out)
    except (SkipCheckError, EnvHungError) as reason:
        result.status, result.note = "skipped", str(reason)
    except EnvTimeoutError as reason:
        result.status = "skipped"
        result.note = f"{reason} (reported under api.timeout)"
    except EnvCallError as error:
        out.fail(str(error), cause=error.cause)
    except Exception as error:
        # The env returned something this check could not read: that is a finding too.
        frame = traceback.extract_tb(error.__traceback__)[-1]
        out.fail(
            f"the check could not read what the env returned: {type(error).__name__}: {error} "
            f"(at {frame.name}, line {frame.lineno})"
        )
    out.finish()
    if result.findings:
        result.status = "failed"
    result.seconds = time.perf_counter() - start
    return result


def check_goal_env(
    env: gym.Env | gym.vector.VectorEnv,
    *,
    steps: int = 200,
    seed: int = 0,
    timeout: float = 10.0,
    factory: Callable[..., Any] | None = None,
    checks: list[str] | None = None,
    env_name: str | None = None,
    single: Callable[[], gym.Env] | None = None,
) -> Report:
    """Checks ``env`` (single or vector, wrapped or not; reset and stepped, not closed)
    and returns a :class:`Report`.

    ``steps`` and ``seed`` set the main rollout; ``timeout`` the seconds an env call may
    take in wall and CPU time (or five times that in wall time); ``factory`` builds
    another env (default: ``gym.make`` of its spec); ``checks`` selects ids; ``single``
    builds the single env a vector env must equal (``vector.single_equal``)."""
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    target = "vector" if is_vector_env(env) else "env"
    applicable = [c for c in CHECKS if target in CHECKS[c].targets]
    selected = applicable if checks is None else list(checks)
    unknown = [c for c in selected if c not in CHECKS]
    if unknown:
        raise ValueError(f"checks={unknown} are not check ids; expected ids from {list(CHECKS)}")
    misplaced = [c for c in selected if c not in applicable]
    if misplaced:
        kind = "a vector env" if target == "vector" else "a single env"
        raise ValueError(
            f"checks={misplaced} do not apply to {kind}; expected ids from {applicable}"
        )

    spec = getattr(env, "spec", None)
    settings: dict[str, object] = {
        "steps": int(steps),
        "seed": int(seed),
        "timeout": float(timeout),
    }
    if target == "vector":
        settings["num_envs"] = int(getattr(env, "num_envs", 0))
        settings["autoreset_mode"] = declared_mode(env)[0].name.lower()
        if single is None:
            single = single_env_factory(env)
    elif factory is None and spec is not None:
        # A registered env can be rebuilt, with another render mode, from its spec.
        def factory(**kwargs: Any) -> gym.Env:
            return gym.make(spec, **kwargs)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    ctx = Context(env, factory, int(steps), int(seed), float(timeout), single)
    results = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for check_id in selected:
                if check_id in _LAST:
                    continue  # these read what the others left behind; run last
                results.append(_run_one(ctx, CHECKS[check_id]))
        for record in caught:
            # Only gymnasium's own warnings (its passive checker wraps every gym.make env)
            # are about the env; library deprecation chatter is not.
            if "gymnasium" in str(record.filename) and issubclass(record.category, UserWarning):
                ctx.gym_warnings.append(("while the checker ran the env", str(record.message)))
        for check_id in _LAST:
            if check_id in selected:
                results.append(_run_one(ctx, CHECKS[check_id]))
    finally:
        ctx.close()
    order = {c: i for i, c in enumerate(CHECKS)}
    results.sort(key=lambda r: order[r.id])
    name = env_name or _env_name(env)
    probe = ctx.peek("goal_probe")
    return Report(
        name,
        results,
        cpu_seconds=time.process_time() - cpu0,
        wall_seconds=time.perf_counter() - wall0,
        settings=settings,
        probe=probe.summary() if probe is not None else None,
        facts=dict(ctx.facts),
    )


def _env_name(env: object) -> str:
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return spec.id
    unwrapped = getattr(env, "unwrapped", env)
    return type(unwrapped).__name__


class GoalEnvCheckError(AssertionError):
    """Raised by :func:`assert_goal_env`; ``report`` holds the full report."""

    def __init__(self, report: Report, message: str) -> None:
        super().__init__(message)
        self.report = report


def assert_goal_env(
    env: gym.Env | gym.vector.VectorEnv, *, strict: bool = False, **kwargs: Any
) -> Report:
    """Asserts that ``env`` passes :func:`check_goal_env`: raises
    :class:`GoalEnvCheckError` listing every error (and warning when ``strict``)."""
    report = check_goal_env(env, **kwargs)
    bad = report.errors + (report.warnings if strict else [])
    if bad:
        lines = "\n".join(f"  {finding}" for finding in bad)
        raise GoalEnvCheckError(report, f"{report.summary()}\n{lines}")
    return report
