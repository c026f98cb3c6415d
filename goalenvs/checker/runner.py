"""The check registry and the runner that isolates every check and every env call.

Every call into the env (reset, step, compute_reward, render, a buffer fill) runs on one
persistent worker thread and is waited for with a timeout. A call that does not return
in time is recorded, the env is abandoned (the hung thread is a daemon and is left
behind), and the remaining checks that need the env are skipped, so a run always ends
with its report. One thread serves every call because some renderers (OpenGL, SDL)
bind their context to the thread that created it.
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from goalenvs.checker.report import SEVERITIES, CheckResult, Finding, Report

# Checks that read what the others left behind (warnings, timeouts): run last.
_LAST = ("gym.warnings", "gym.notes", "api.timeout")

# At most this many findings are kept per check; the rest are counted.
MAX_FINDINGS = 20


class SkipCheckError(Exception):
    """Raised by a check that does not apply to this env; the message says why."""


class EnvTimeoutError(Exception):
    """An env call did not return within the timeout."""


class EnvHungError(Exception):
    """An earlier env call hung; the env can no longer be called."""


class EnvCallError(Exception):
    """An env call raised; ``call`` describes the call and ``error`` is the exception."""

    def __init__(self, call: str, error: BaseException) -> None:
        self.call = call
        self.error = error
        super().__init__(f"{call} raised {type(error).__name__}: {error}")


@dataclass(frozen=True)
class Check:
    """A registered check: stable id, severity, one-line title and the function."""

    id: str
    severity: str
    title: str
    func: Callable[[Context, Outcome], None]


CHECKS: dict[str, Check] = {}


def register(check_id: str, severity: str, title: str) -> Callable:
    """Decorator that registers ``func(ctx, out)`` as check ``check_id``."""
    if severity not in SEVERITIES:
        raise ValueError(f"severity={severity!r} is not valid; expected one of {SEVERITIES}")

    def decorate(func: Callable[[Context, Outcome], None]) -> Callable:
        if check_id in CHECKS:
            raise ValueError(f"check id {check_id!r} is registered twice")
        CHECKS[check_id] = Check(check_id, severity, title, func)
        return func

    return decorate


class Outcome:
    """What a running check writes to: its findings."""

    def __init__(self, result: CheckResult) -> None:
        self._result = result
        self._dropped = 0

    def fail(self, message: str, where: str | None = None) -> None:
        """Records one finding with its evidence."""
        r = self._result
        if len(r.findings) < MAX_FINDINGS:
            r.findings.append(Finding(r.id, r.severity, r.title, message, where))
        else:
            self._dropped += 1

    @property
    def failed(self) -> bool:
        """Whether this check has recorded a finding."""
        return bool(self._result.findings)

    def finish(self) -> None:
        if self._dropped:
            r = self._result
            r.findings.append(
                Finding(r.id, r.severity, r.title, f"... and {self._dropped} more like these")
            )


class _Worker:
    """One daemon thread that runs env calls; a caller waits at most ``timeout`` seconds."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name="goalenvs-check-env", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args, kwargs, box, done = job
            try:
                box.append((True, fn(*args, **kwargs)))
            except BaseException as error:  # the env's exception is data for the caller
                box.append((False, error))
            done.set()

    def run(self, fn: Callable, args: tuple, kwargs: dict, timeout: float) -> Any:
        box: list = []
        done = threading.Event()
        self._jobs.put((fn, args, kwargs, box, done))
        if not done.wait(timeout):
            raise EnvTimeoutError(f"did not return within {timeout:g} s")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._jobs.put(None)


class Context:
    """What every check sees: the env, the settings, guarded env calls and a cache.

    ``factory(**kwargs)`` builds a fresh env of the same spec (used for render modes);
    it is None when only an env object was given.
    """

    def __init__(
        self,
        env: gym.Env,
        factory: Callable[..., gym.Env] | None,
        steps: int,
        seed: int,
        timeout: float,
    ) -> None:
        self.env = env
        self.factory = factory
        self.steps = steps
        self.seed = seed
        self.timeout = timeout
        self.rng = np.random.default_rng(seed)
        self.timeouts: list[str] = []
        self.hung: str | None = None
        # (source, message) of the warnings gymnasium emitted about this env
        self.gym_warnings: list[tuple[str, str]] = []
        self._worker = _Worker()
        self._cache: dict[str, Any] = {}
        self._cache_errors: dict[str, BaseException] = {}

    def call(self, description: str, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn`` on the worker thread with the timeout.

        Raises :class:`EnvCallError` when it raises, :class:`EnvTimeoutError` when it hangs
        (recorded for the ``api.timeout`` check), :class:`EnvHungError` once anything hung.
        """
        return self.call_with_limit(self.timeout, description, fn, *args, **kwargs)

    def call_with_limit(
        self, limit: float, description: str, fn: Callable, *args: Any, **kwargs: Any
    ) -> Any:
        """:meth:`call` with its own time limit (for calls that run many env steps)."""
        if self.hung is not None:
            raise EnvHungError(f"the env hung earlier in {self.hung}; not called again")
        try:
            return self._worker.run(fn, args, kwargs, limit)
        except EnvTimeoutError as error:
            self.hung = description
            self.timeouts.append(f"{description} {error}")
            raise EnvTimeoutError(f"{description} {error}") from None
        except Exception as error:
            raise EnvCallError(description, error) from error

    def goal_method(self, name: str) -> Callable | None:
        """The env's goal method ``name`` found through its wrappers, or None."""
        getter = getattr(self.env, "get_wrapper_attr", None)
        try:
            method = getter(name) if getter is not None else getattr(self.env, name)
        except AttributeError:
            return None
        return method if callable(method) else None

    def cached(self, key: str, build: Callable[[Context], Any]) -> Any:
        """``build(self)`` computed once; its exception, if any, is re-raised each time."""
        if key in self._cache_errors:
            raise self._cache_errors[key]
        if key not in self._cache:
            try:
                self._cache[key] = build(self)
            except BaseException as error:
                self._cache_errors[key] = error
                raise
        return self._cache[key]

    def close(self) -> None:
        self._worker.close()


def _run_one(ctx: Context, check: Check) -> CheckResult:
    result = CheckResult(check.id, check.severity, check.title)
    out = Outcome(result)
    start = time.perf_counter()
    try:
        check.func(ctx, out)
    except SkipCheckError as reason:
        result.status, result.note = "skipped", str(reason)
    except EnvHungError as reason:
        result.status, result.note = "skipped", str(reason)
    except EnvTimeoutError as reason:
        result.status = "skipped"
        result.note = f"{reason} (reported under api.timeout)"
    except EnvCallError as error:
        out.fail(str(error))
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
    env: gym.Env,
    *,
    steps: int = 200,
    seed: int = 0,
    timeout: float = 10.0,
    factory: Callable[..., gym.Env] | None = None,
    checks: list[str] | None = None,
    env_name: str | None = None,
) -> Report:
    """Checks ``env`` against the goal-env contract and returns a :class:`Report`.

    Args:
        env: the env to check, wrapped or not (goal methods are read with
            ``env.get_wrapper_attr``). It is reset and stepped; it is not closed.
        steps: env steps of the main random-action rollout (later checks replay part of it).
        seed: seeds the rollouts, the action space and the checker's own random draws.
        timeout: seconds one env call may take before it is a finding and the env is
            abandoned.
        factory: builds a fresh env with extra keyword arguments (``render_mode=...``);
            by default ``gym.make(env.spec, ...)`` when the env has a spec, else only the
            env's own render mode is checked.
        checks: ids of the checks to run (default: all).
        env_name: the name shown in the report.
    """
    from goalenvs.checker import checks as _checks  # noqa: F401  (registers the checks)

    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    if not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    selected = list(CHECKS) if checks is None else list(checks)
    unknown = [c for c in selected if c not in CHECKS]
    if unknown:
        raise ValueError(f"checks={unknown} are not check ids; expected ids from {list(CHECKS)}")

    spec = getattr(env, "spec", None)
    if factory is None and spec is not None:
        # A registered env can be rebuilt, with another render mode, from its spec.
        def factory(**kwargs: Any) -> gym.Env:
            return gym.make(spec, **kwargs)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    ctx = Context(env, factory, int(steps), int(seed), float(timeout))
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
    return Report(
        name,
        results,
        cpu_seconds=time.process_time() - cpu0,
        wall_seconds=time.perf_counter() - wall0,
        settings={"steps": int(steps), "seed": int(seed), "timeout": float(timeout)},
    )


def _env_name(env: Any) -> str:
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


def assert_goal_env(env: gym.Env, *, strict: bool = False, **kwargs: Any) -> Report:
    """Asserts that ``env`` passes :func:`check_goal_env` (for users' own test suites).

    Raises :class:`GoalEnvCheckError` (an AssertionError) listing every error, and every
    warning too when ``strict``. Returns the report when the env passes.
    """
    report = check_goal_env(env, **kwargs)
    bad = report.errors + (report.warnings if strict else [])
    if bad:
        lines = "\n".join(f"  {finding}" for finding in bad)
        raise GoalEnvCheckError(report, f"{report.summary()}\n{lines}")
    return report
