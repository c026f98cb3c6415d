"""The context every check runs in: the env, guarded env calls and a cache.

Every env call runs on one persistent worker thread (renderers bind their context to a
thread) with a timeout; an env that hangs is abandoned and the checks that need it skip."""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np


class SkipCheckError(Exception):
    """Raised by a check that does not apply to this env; the message says why."""


class EnvTimeoutError(Exception):
    """An env call did not return within the timeout."""


class EnvHungError(Exception):
    """An earlier env call hung; the env can no longer be called."""


class EnvCallError(Exception):
    """An env call raised; ``call`` describes it, ``error`` is the exception, ``origin``
    where the env raised it and ``cause`` both (the report prints a shared cause once)."""

    def __init__(self, call: str, error: BaseException) -> None:
        self.call = call
        self.error = error
        self.origin = error_origin(error)
        self.cause = f"{type(error).__name__}: {error}" + (
            f" (at {self.origin})" if self.origin else ""
        )
        super().__init__(f"{call} raised {self.cause}")


_CHECKER_DIR = os.path.dirname(os.path.abspath(__file__))


def uses_mujoco(env: object) -> bool:
    """Whether ``env`` is, or holds as an attribute (PointMaze's ``point_env``), one of
    gymnasium's MuJoCo envs (they keep a ``mujoco_renderer``): one OpenGL context family,
    and envs a deep copy cannot copy."""
    unwrapped = getattr(env, "unwrapped", env)
    parts = [unwrapped, *getattr(unwrapped, "__dict__", {}).values()]
    return any(hasattr(part, "mujoco_renderer") for part in parts)


def find_method(env: object, name: str) -> Callable | None:
    """``env``'s callable ``name``, found through its wrappers (``get_wrapper_attr``), or None."""
    getter = getattr(env, "get_wrapper_attr", None)
    try:
        method = getter(name) if getter is not None else getattr(env, name)
    except AttributeError:
        return None
    return method if callable(method) else None


def error_origin(error: BaseException) -> str | None:
    """``file:line, in function`` of the innermost frame of ``error`` outside the checker."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(f.filename).startswith(_CHECKER_DIR)
    ]
    if not frames:
        return None
    frame = frames[-1]
    path = frame.filename
    with contextlib.suppress(ValueError):  # another drive on Windows
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else path
    return f"{path}:{frame.lineno}, in {frame.name}"


# A call times out past its limit in both wall and process CPU time (a busy loop), or past
# WALL_FACTOR times it in wall time alone (a sleep, a lock): load alone never times out.
WALL_FACTOR = 5.0
CLOCKS = (time.perf_counter, time.process_time)  # (wall, CPU): the tests pass fake ones


def timed_out(wall: float, cpu: float, limit: float) -> bool:
    """Whether a call that has run ``wall`` seconds, the process using ``cpu`` seconds of
    CPU time meanwhile, is past its time ``limit``."""
    return wall >= limit and (cpu >= limit or wall >= WALL_FACTOR * limit)


class Worker:
    """One daemon thread that runs env calls; a caller waits until :func:`timed_out`."""

    def __init__(self, clocks: tuple[Callable[[], float], Callable[[], float]] = CLOCKS) -> None:
        self._clocks = clocks
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

    def run(self, fn: Callable, args: tuple, kwargs: dict, timeout: float) -> object:
        """``fn(*args, **kwargs)`` on the thread; :class:`EnvTimeoutError` once timed out."""
        box: list = []
        done = threading.Event()
        self._jobs.put((fn, args, kwargs, box, done))
        wall, cpu = self._clocks
        wall0, cpu0 = wall(), cpu()
        while not done.wait(min(timeout, 0.1)):
            if timed_out(wall() - wall0, cpu() - cpu0, timeout):
                raise EnvTimeoutError(f"did not return within {timeout:g} s")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def close(self) -> None:
        self._jobs.put(None)


class Context:
    """What every check sees: the env, the settings, guarded env calls and a cache;
    ``factory(**kwargs)`` builds a fresh env (None when unknown), ``single_factory()`` one
    single env of a vector env's kind."""

    def __init__(
        self,
        env: gym.Env | gym.vector.VectorEnv,
        factory: Callable[..., Any] | None,
        steps: int,
        seed: int,
        timeout: float,
        single_factory: Callable[[], gym.Env] | None = None,
    ) -> None:
        self.env: Any = env
        self.factory = factory
        self.single_factory = single_factory
        self.steps = steps
        self.seed = seed
        self.timeout = timeout
        self.rng = np.random.default_rng(seed)
        self.timeouts: list[str] = []
        self.hung: str | None = None
        # (source, message) of the warnings gymnasium emitted about this env
        self.gym_warnings: list[tuple[str, str]] = []
        self._worker = Worker()
        self._cache: dict[str, object] = {}
        self._cache_errors: dict[str, BaseException] = {}
        # what checks measured about the env (an undeclared episode length): in the report
        self.facts: dict[str, object] = {}

    def call(self, description: str, fn: Callable, *args: Any, **kwargs: object) -> Any:
        """Runs ``fn`` on the worker thread with the timeout: :class:`EnvCallError` when it
        raises, :class:`EnvTimeoutError` when it hangs, :class:`EnvHungError` once anything hung."""
        return self.call_with_limit(self.timeout, description, fn, *args, **kwargs)

    def call_with_limit(
        self, limit: float, description: str, fn: Callable, *args: Any, **kwargs: object
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
        return find_method(self.env, name)

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

    def peek(self, key: str) -> Any:
        """The cached value of ``key`` if it was computed, else None (never builds it)."""
        return self._cache.get(key)

    def close(self) -> None:
        """Stops the worker thread."""
        self._worker.close()
