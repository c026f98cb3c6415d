"""The training envs in worker processes.

An env without a native vector twin (MuJoCo's Fetch, panda-gym, a user's env) steps one
sub-env at a time in Python. :class:`EnvWorkers` spreads its sub-envs over ``workers``
processes through gymnasium's ``AsyncVectorEnv`` with shared memory: worker ``w`` holds
sub-envs ``w * k .. w * k + k - 1`` as one :class:`EnvGroup` (a ``SyncVectorEnv`` of its
share, seen as one env). The main process sees what a ``SyncVectorEnv`` of all of them
gives; sub-env ``i`` is seeded ``seed + i`` either way, so a seed draws the same episodes
with one worker or many.

Workers start with ``forkserver`` (``spawn`` where there is none): a fork of a process
that runs torch threads can deadlock. A worker whose env raises, or that dies, stops the
run with an :class:`EnvWorkerError` naming it, and every worker process is reaped."""

from __future__ import annotations

import multiprocessing
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

from goalenvs import envspec
from goalenvs.train.resume_state import GeneratorSnapshot

_T = TypeVar("_T")  # what a call run on the worker pool returns


class EnvWorkerError(RuntimeError):
    """A worker process stepping training envs failed (its env raised, or it died)."""


def worker_problem(env_id: str, env_kwargs: dict[str, object]) -> str | None:
    """Why worker processes cannot build ``env_id``'s envs with ``env_kwargs`` (None when
    they can): an entry point a fresh process cannot import, or kwargs that cannot be
    pickled."""
    try:
        source = worker_source(env_id)
    except ValueError as exc:
        return str(exc)
    try:
        pickle.dumps((source, env_kwargs))
    except Exception as exc:  # pickling raises many kinds (PicklingError, TypeError, ...)
        return (
            f"{env_id} with env_kwargs {sorted(env_kwargs)} cannot be sent to an env worker "
            f"process ({type(exc).__name__}: {exc})"
        )
    return None


# --------------------------------------------------------------------------- workers


class _GroupInfo:
    """A group's vector info, carried whole through ``AsyncVectorEnv`` (which would
    otherwise batch each of its arrays once more)."""

    __slots__ = ("info",)

    def __init__(self, info: dict[str, object]) -> None:
        self.info = info


def _make_env(source: str | gym.envs.registration.EnvSpec, env_kwargs: dict[str, Any]) -> gym.Env:
    """One env, in a worker process: from its spec, or from its env id's text."""
    if isinstance(source, str):
        return envspec.make(source, **env_kwargs)
    return gym.make(source, **env_kwargs)


def worker_source(env_id: str) -> str | gym.envs.registration.EnvSpec:
    """What a worker process builds ``env_id``'s envs from: its gymnasium spec when a
    fresh process can import the entry point, else the id's text when it names its own
    import (``module:Name``, ``file.py:Name``); a ValueError when neither."""
    spec = envspec.env_spec(env_id)
    entry = spec.entry_point
    if isinstance(entry, str) or _importable(entry):
        return spec
    if ":" in env_id:
        return env_id
    name = getattr(entry, "__qualname__", repr(entry))
    module = getattr(entry, "__module__", None)
    raise ValueError(
        f"{env_id} is registered in this process with entry point {module}.{name}, which an "
        "env worker process cannot import; register it with an import path "
        "(entry_point='module:Class')"
    )


def _importable(entry: object) -> bool:
    """Whether a fresh process finds ``entry`` by its module and name (what pickle sends)."""
    module = getattr(entry, "__module__", None)
    qualname = getattr(entry, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname:
        return False
    if module == "__main__" or module.startswith(envspec.USER_MODULE_PREFIX):
        return False
    found: object = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found is entry


class EnvGroup(gym.Env):
    """``count`` sub-envs of one worker process, from index ``first`` of the run's envs:
    a ``SyncVectorEnv`` in autoreset ``mode`` seen as one env (its info wrapped whole)."""

    def __init__(
        self,
        source: str | gym.envs.registration.EnvSpec,
        env_kwargs: dict[str, object],
        first: int,
        count: int,
        mode: gym.vector.AutoresetMode,
    ) -> None:
        self.first = first
        # Ctrl-C and a scheduler's SIGTERM reach every process: the trainer alone decides
        # when to stop and closes the workers, so they ignore both.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_IGN)
        envs = gym.vector.SyncVectorEnv(
            [partial(_make_env, source, env_kwargs)] * count, autoreset_mode=mode
        )
        self.envs = GeneratorSnapshot(envs)
        self.observation_space = envs.observation_space
        self.action_space = envs.action_space

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Resets every sub-env of the group."""
        obs, info = self.envs.reset(seed=seed, options=options)
        return obs, {"group": _GroupInfo(info)}

    def step(self, action: object) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Steps every sub-env of the group; rewards and flags are arrays, one per sub-env."""
        obs, rewards, terminated, truncated, info = self.envs.step(action)
        return obs, rewards, terminated, truncated, {"group": _GroupInfo(info)}

    def arm(self, steps: int) -> None:
        """:meth:`GeneratorSnapshot.arm` of the group's envs."""
        self.envs.arm(steps)

    def generator_states(self) -> dict[str, object]:
        """The group's generator states under the run's sub-env indices."""
        states = self.envs.generator_states().items()
        return {_renumber(name, self.first): state for name, state in states}

    def restore_generators(self, states: dict[str, object]) -> list[str]:
        """Restores the group's share of ``states``; returns its names that did not match."""
        mine = {}
        for name, state in states.items():
            local = _renumber(name, -self.first)
            if 0 <= _index(local) < self.envs.num_envs:
                mine[local] = state
        return [_renumber(n, self.first) for n in self.envs.restore_generators(mine)]

    def close(self) -> None:
        """Closes the group's envs."""
        self.envs.close()


def _index(name: str) -> int:
    """The sub-env index of a generator name ``envs[i]...`` (-1 for any other name)."""
    return int(name[5 : name.index("]")]) if name.startswith("envs[") else -1


def _renumber(name: str, offset: int) -> str:
    """``envs[i]...`` as ``envs[i + offset]...`` (names of other generators unchanged)."""
    index = _index(name)
    return name if index < 0 else f"envs[{index + offset}]{name[name.index(']') + 1 :]}"


class EnvWorkers(gym.vector.VectorEnv):
    """``num_envs`` sub-envs of ``env_id`` stepped by ``workers`` processes (see the module
    docstring); what it returns is what a ``SyncVectorEnv`` of them returns."""

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, object],
        num_envs: int,
        workers: int,
        mode: gym.vector.AutoresetMode,
    ) -> None:
        if num_envs % workers:
            raise ValueError(f"workers={workers} must divide num_envs={num_envs}")
        problem = worker_problem(env_id, env_kwargs)
        if problem is not None:
            raise ValueError(f"{problem}; train it in the trainer's process with --env-workers 1")
        source = worker_source(env_id)
        self.env_id, self.workers, self.num_envs = env_id, workers, num_envs
        self.group_size = num_envs // workers
        methods = multiprocessing.get_all_start_methods()
        context = "forkserver" if "forkserver" in methods else "spawn"
        group = partial(EnvGroup, source, dict(env_kwargs), count=self.group_size, mode=mode)
        # Sub-envs autoreset inside their group; the group itself never ends.
        self.pool = gym.vector.AsyncVectorEnv(
            [partial(group, first=w * self.group_size) for w in range(workers)],
            shared_memory=True,
            context=context,
            autoreset_mode=gym.vector.AutoresetMode.DISABLED,
        )
        self.metadata = {**self.pool.metadata, "autoreset_mode": gym.vector.AutoresetMode(mode)}
        self.render_mode = None
        probe = _make_env(source, env_kwargs)  # the spaces of one sub-env
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        probe.close()
        batch = gym.vector.utils.batch_space
        self.observation_space = batch(self.single_observation_space, num_envs)
        self.action_space = batch(self.single_action_space, num_envs)

    def pids(self) -> list[int]:
        """The worker processes' ids, worker 0 first (what their memory is read by)."""
        return [int(process.pid) for process in self.pool.processes if process.pid is not None]

    def reset(
        self, *, seed: int | Sequence[int] | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Resets every sub-env; ``seed`` seeds sub-env ``i`` with ``seed + i``."""
        if isinstance(seed, int | np.integer):
            seeds: list[int | None] = [int(seed) + w * self.group_size for w in range(self.workers)]
        elif seed is None:
            seeds = [None] * self.workers
        else:
            raise ValueError(f"seed must be an int or None for env workers, got {seed!r}")
        obs, info = self._guarded(lambda: self.pool.reset(seed=seeds, options=options))
        return self._flat(obs), self._merged(info)

    def step(
        self, actions: Any
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Steps every sub-env (each worker its share, all at once)."""
        actions = np.asarray(actions).reshape(self.workers, self.group_size, *np.shape(actions)[1:])
        obs, rewards, terminated, truncated, info = self._guarded(lambda: self.pool.step(actions))
        return (
            self._flat(obs),
            rewards.reshape(self.num_envs),
            terminated.reshape(self.num_envs),
            truncated.reshape(self.num_envs),
            self._merged(info),
        )

    def arm(self, steps: int) -> None:
        """:meth:`GeneratorSnapshot.arm` in every worker."""
        self._guarded(lambda: self.pool.call("arm", steps))

    def generator_states(self) -> dict[str, object]:
        """Every sub-env's generator states, named as a ``SyncVectorEnv`` of them names them."""
        states: dict[str, object] = {}
        for part in self._guarded(lambda: self.pool.call("generator_states")):
            states.update(part)
        return states

    def restore_generators(self, states: dict[str, object]) -> list[str]:
        """Sets every worker's generators back to ``states``; returns the names not matched."""
        missed = {name for name in states if not 0 <= _index(name) < self.num_envs}
        for part in self._guarded(lambda: self.pool.call("restore_generators", states)):
            missed.update(part)
        return sorted(missed)

    def close_extras(self, **kwargs: object) -> None:
        """Stops the worker processes (all of them reaped, also after a failure)."""
        if not self.pool.closed:
            try:
                self.pool.close()
            except (EOFError, OSError, BrokenPipeError):
                self._abort()

    # ---- the main process's side of the pipes

    def _guarded(self, call: Callable[[], _T]) -> _T:
        """Runs ``call`` on the pool; a worker that raised or died is an
        :class:`EnvWorkerError` once every worker is stopped."""
        try:
            return call()
        except (EOFError, OSError, BrokenPipeError):
            dead = self._dead_workers()
            self._abort()
            raise EnvWorkerError(
                f"an env worker of {self.env_id} died: {dead or 'its pipe closed'}; the run "
                "stops here (its last committed epoch can be resumed)"
            ) from None
        except Exception as exc:
            self._abort()
            raise EnvWorkerError(
                f"an env of {self.env_id} raised {type(exc).__name__} in an env worker: {exc} "
                "(its traceback is logged above); the run stops here (its last committed "
                "epoch can be resumed)"
            ) from exc

    def _dead_workers(self) -> str:
        """Which workers have exited, and how (a signal by its name)."""
        dead = []
        for w, process in enumerate(self.pool.processes):
            process.join(timeout=1.0)
            code = process.exitcode
            if code is None:
                continue
            first = w * self.group_size
            where = f"worker {w} (sub-envs {first}-{first + self.group_size - 1})"
            if code < 0:
                dead.append(f"{where} was killed by {signal.Signals(-code).name}")
            else:
                dead.append(f"{where} exited with code {code}")
        return "; ".join(dead)

    def _abort(self) -> None:
        """Terminates and reaps every worker process; the pool is closed after it."""
        for process in self.pool.processes:
            if process.is_alive():
                process.terminate()
        for process in self.pool.processes:
            process.join(timeout=5.0)
            if process.is_alive():
                process.kill()
                process.join()
        for pipe in self.pool.parent_pipes:
            if pipe is not None:
                pipe.close()
        self.pool.closed = True

    def _flat(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Observations ``(workers, k, ...)`` as ``(num_envs, ...)``."""
        return {key: value.reshape(self.num_envs, *value.shape[2:]) for key, value in obs.items()}

    def _merged(self, info: dict[str, Any]) -> dict[str, object]:
        """The groups' vector infos as one, as a ``SyncVectorEnv`` of every sub-env gives."""
        return _merge_infos([packed.info for packed in info["group"]], self.group_size)


def _merge_infos(infos: list[dict[str, object]], size: int) -> dict[str, object]:
    """Per-group vector infos (each over ``size`` sub-envs) as one: an entry a group lacks
    is zero (None for objects) there, and its ``_key`` mask False."""
    total = size * len(infos)
    merged: dict[str, object] = {}
    for key in dict.fromkeys(key for info in infos for key in info):
        values = [info.get(key) for info in infos]
        if any(isinstance(value, dict) for value in values):
            merged[key] = _merge_infos([v if isinstance(v, dict) else {} for v in values], size)
            continue
        present = [(group, np.asarray(v)) for group, v in enumerate(values) if v is not None]
        first = present[0][1]
        shape = (total, *first.shape[1:])
        # an object entry a group lacks is None there (np.empty's objects), any other zero
        array = np.empty(shape, object) if first.dtype == object else np.zeros(shape, first.dtype)
        for group, value in present:
            array[group * size : (group + 1) * size] = value
        merged[key] = array
    return merged
