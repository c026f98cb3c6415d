"""Collection and evaluation: the loop that steps the training envs, and where they run.

One cycle of collection is one loop (:meth:`Collector.collect`)::

    for each of rollout_steps:
        actions = agent.act(obs, explore=True)
        step = envs.step(actions)                # EnvStep: one representation
        keep (obs, step); obs = step.start

and its steps go to the replay buffer and the normalizer afterwards
(:meth:`Collector.store`). Where the envs run is a :class:`Backend`, chosen once:

- :class:`NumpyBackend`: numpy vector envs with same-step autoreset (a goalenvs twin,
  gymnasium's ``SyncVectorEnv`` around any goal env, or :class:`~goalenvs.train.
  env_workers.EnvWorkers` stepping it in worker processes) and the numpy replay buffer;
- :class:`DeviceBackend`: the torch twins on the training device with autoreset
  disabled, and the replay buffer there too: per step the host learns one bool (did an
  episode end?), the successes come to it once per cycle.

A backend turns what the envs return into one :class:`EnvStep` where the values leave
the envs, so the loop is the same for both.

Overlap: with ``overlap`` on, :meth:`Collector.collect_ahead` steps the next cycle in a
background thread with a copy of the policy as it is when the call is made, while the
learner runs the current cycle's updates (one cycle of lag, as asynchronous
actor-learner designs do). Its steps reach the buffer only through :meth:`store`, after
the updates, so sampling never races the writes. The copy explores with the agent's own
numpy generator, which only collection draws from, so a seed gives the same run with
overlap on, whatever the thread timing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from goalenvs.agents.base import Agent
from goalenvs.core import GOAL_KEYS
from goalenvs.core.types import Array, GoalFunction
from goalenvs.her.replay import ReplayBuffer
from goalenvs.train.envs import make_vector_env
from goalenvs.train.machine import eval_env_workers
from goalenvs.train.resume_state import GeneratorSnapshot
from goalenvs.train.timing import PhaseClock

Obs = dict[str, Array]  # a batched goal observation: arrays or tensors by key


class EnvStep(NamedTuple):
    """One vector step of the training envs, as the loop and the replay buffer take it."""

    actions: Array  # the actions taken, in the action space's dtype
    next_obs: Mapping[
        str, Array
    ]  # every sub-env's true next observation (the final one where it ended)
    rewards: Array
    terminated: Array
    truncated: Array
    infos: Mapping[str, Array]  # the info values HER keeps (``info_keys``), of the true next step
    start: Obs  # where the next step starts (a new episode's first observation where one ended)
    ended: Any  # the ended episodes' successes, in the form Backend.successes reads


class Rollout(NamedTuple):
    """One cycle of steps: the observation each step started from, and the step."""

    observations: list[Obs]
    steps: list[EnvStep]


class Backend:
    """Where the envs run: how they are made, what a step gives, and the replay buffer
    that lives beside them. Subclasses set the class attributes and the methods."""

    autoreset: ClassVar[gym.vector.AutoresetMode]  # the training envs' autoreset mode
    buffer_suffix: ClassVar[str]  # the file type of a saved replay buffer
    other_suffix: ClassVar[str]  # the other backend's (a resume warns about it)
    xp: ClassVar[ModuleType]  # the array module of the envs' values: numpy or torch

    def __init__(self, env_id: str, env_kwargs: dict[str, object], device: torch.device) -> None:
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.device = device  # where the agent trains

    def make_envs(
        self, num_envs: int, mode: gym.vector.AutoresetMode, workers: int = 1
    ) -> gym.vector.VectorEnv:
        """``num_envs`` vector envs of the run's env in autoreset ``mode``."""
        raise NotImplementedError

    def step(
        self, envs: gym.vector.VectorEnv, actions: Array, info_keys: tuple[str, ...]
    ) -> EnvStep:
        """Steps ``envs`` with ``actions``; the step as one :class:`EnvStep`."""
        raise NotImplementedError

    def successes(self, steps: list[EnvStep]) -> list[float]:
        """The successes of the episodes that ended in ``steps``, as floats on the host."""
        raise NotImplementedError

    def zeros(self, n: int) -> Array:
        """``n`` float64 zeros where the envs' values live."""
        raise NotImplementedError

    def new_buffer(self, size: int, compute_reward: GoalFunction, **kwargs: Any) -> ReplayBuffer:
        """An empty replay buffer of this backend holding ``size`` transitions; ``kwargs``
        are the buffer's (spaces, HER and priority settings)."""
        raise NotImplementedError

    def load_buffer(
        self, path: Path, compute_reward: GoalFunction, compute_terminated: GoalFunction | None
    ) -> ReplayBuffer:
        """A replay buffer this backend saved."""
        raise NotImplementedError


class NumpyBackend(Backend):
    """Numpy vector envs with same-step autoreset (in the trainer's process or in worker
    processes); the numpy replay buffer."""

    # The step that ends an episode already returns the next episode's first observation;
    # the final one is read from the info.
    autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.SAME_STEP
    buffer_suffix: ClassVar[str] = "npz"
    other_suffix: ClassVar[str] = "pt"
    xp: ClassVar[ModuleType] = np

    def make_envs(
        self, num_envs: int, mode: gym.vector.AutoresetMode, workers: int = 1
    ) -> gym.vector.VectorEnv:
        """The env's native twin, gymnasium's SyncVectorEnv, or ``workers`` processes."""
        return make_vector_env(self.env_id, self.env_kwargs, num_envs, mode, workers=workers)

    def step(
        self, envs: gym.vector.VectorEnv, actions: Array, info_keys: tuple[str, ...]
    ) -> EnvStep:
        """With same-step autoreset the final observations and infos of the episodes that
        ended come from the info; the envs and the buffer get the action space's dtype
        (float64 Boxes are common)."""
        actions = np.asarray(actions).astype(envs.single_action_space.dtype, copy=False)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        done = terminated | truncated
        real_next, infos = _with_final_obs(next_obs, info, done, info_keys)
        ended = [_final(info, "is_success", i) for i in np.flatnonzero(done).tolist()]
        return EnvStep(actions, real_next, rewards, terminated, truncated, infos, next_obs, ended)

    def successes(self, steps: list[EnvStep]) -> list[float]:
        """The successes as floats."""
        return [float(v) for step in steps for v in step.ended]

    def zeros(self, n: int) -> Array:
        """``n`` float64 zeros."""
        return np.zeros(n)

    def new_buffer(self, size: int, compute_reward: GoalFunction, **kwargs: Any) -> ReplayBuffer:
        """An empty numpy replay buffer."""
        from goalenvs.her.buffer import HerReplayBuffer

        return HerReplayBuffer(size, compute_reward=compute_reward, **kwargs)

    def load_buffer(
        self, path: Path, compute_reward: GoalFunction, compute_terminated: GoalFunction | None
    ) -> ReplayBuffer:
        """A numpy replay buffer this backend saved."""
        from goalenvs.her.buffer import HerReplayBuffer

        return HerReplayBuffer.load(path, compute_reward, compute_terminated)


class DeviceBackend(Backend):
    """The torch twins on the training device with autoreset disabled; the replay buffer
    on that device too."""

    # The loop resets finished sub-envs itself: the step's observation is then the final
    # one of every sub-env, one batched tensor, where same-step autoreset hands them out
    # one sub-env at a time.
    autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.DISABLED
    buffer_suffix: ClassVar[str] = "pt"
    other_suffix: ClassVar[str] = "npz"
    xp: ClassVar[ModuleType] = torch

    def make_envs(
        self, num_envs: int, mode: gym.vector.AutoresetMode, workers: int = 1
    ) -> gym.vector.VectorEnv:
        """The env's torch twin on the training device (always in the trainer's process)."""
        return make_vector_env(self.env_id, self.env_kwargs, num_envs, mode, self.device)

    def step(
        self, envs: gym.vector.VectorEnv, actions: Array, info_keys: tuple[str, ...]
    ) -> EnvStep:
        """Autoreset is off: the step's observation is every sub-env's true next (or final)
        one; the loop resets the finished sub-envs itself (one bool comes to the host).
        Successes stay on the device with the mask of the episodes that ended."""
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        done = terminated | truncated
        start = next_obs
        if bool(done.any()):
            fresh, _ = envs.reset(options={"reset_mask": done})
            start = {
                k: torch.where(done.reshape(-1, *(1,) * (v.ndim - 1)), fresh[k], v)
                for k, v in next_obs.items()
            }
        infos = {k: info[k] for k in info_keys}
        ended = (info["is_success"].clone(), done)
        return EnvStep(actions, next_obs, rewards, terminated, truncated, infos, start, ended)

    def successes(self, steps: list[EnvStep]) -> list[float]:
        """The successes of the episodes that ended, in one copy to the host."""
        if not steps:
            return []
        values = torch.cat([step.ended[0] for step in steps])
        ended = torch.cat([step.ended[1] for step in steps])
        return values[ended].float().cpu().tolist()

    def zeros(self, n: int) -> Array:
        """``n`` float64 zeros on the device."""
        return torch.zeros(n, dtype=torch.float64, device=self.device)

    def new_buffer(self, size: int, compute_reward: GoalFunction, **kwargs: Any) -> ReplayBuffer:
        """An empty replay buffer on the device."""
        from goalenvs.her.buffer import DeviceHerReplayBuffer

        return DeviceHerReplayBuffer(
            size, compute_reward=compute_reward, device=self.device, **kwargs
        )

    def load_buffer(
        self, path: Path, compute_reward: GoalFunction, compute_terminated: GoalFunction | None
    ) -> ReplayBuffer:
        """A replay buffer saved on a device, loaded onto this one."""
        from goalenvs.her.buffer import DeviceHerReplayBuffer

        return DeviceHerReplayBuffer.load(
            path, compute_reward, compute_terminated, device=self.device
        )


class Collector:
    """The training and eval envs of a run, the observation collection goes on from, and
    the loops that step them (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        num_envs: int,
        n_eval_episodes: int,
        rollout_steps: int,
        info_keys: tuple[str, ...],
        workers: int = 1,
        overlap: bool = False,
        eval_workers: int | None = None,
    ) -> None:
        self.backend = backend
        self.rollout_steps = rollout_steps
        self.info_keys = info_keys
        self.workers = workers
        # None: as the plan works it out (eval_env_workers)
        self.eval_workers = (
            eval_env_workers(n_eval_episodes, workers) if eval_workers is None else eval_workers
        )
        self.clock = PhaseClock()  # collection charges its env, act and store phases here
        envs = backend.make_envs(num_envs, backend.autoreset, workers)
        # Worker processes keep their own snapshots; in-process envs get the wrapper.
        self.envs: Any = envs if hasattr(envs, "arm") else GeneratorSnapshot(envs)
        self.eval_envs = backend.make_envs(
            n_eval_episodes, gym.vector.AutoresetMode.NEXT_STEP, self.eval_workers
        )
        self.obs: Obs = {}  # where the next step starts
        self.overlap = overlap
        self._ahead = ThreadPoolExecutor(1, thread_name_prefix="collect") if overlap else None
        self._behaviour: Agent | None = None  # the agent copy that collects ahead

    def reset(self, seed: int, generator_states: dict[str, Any] | None = None) -> list[str]:
        """Starts the training envs' episodes: sub-env ``i`` seeded ``seed + i``, or (a
        resume) from saved ``generator_states``, where an episode in progress at the save
        starts anew. Returns the generator names that were not restored."""
        self.obs, _ = self.envs.reset(seed=seed)
        if generator_states is None:
            return []
        missed = self.envs.restore_generators(generator_states)
        self.obs, _ = self.envs.reset()
        return missed

    def collect(self, agent: Agent) -> Rollout:
        """Steps the training envs ``rollout_steps`` times with exploring actions."""
        clock, rollout = self.clock, Rollout([], [])
        for _ in range(self.rollout_steps):
            with clock("act"):
                actions = agent.act(self.obs, explore=True)
            with clock("env"):
                step = self.backend.step(self.envs, actions, self.info_keys)
            rollout.observations.append(self.obs)
            rollout.steps.append(step)
            self.obs = step.start
        return rollout

    def collect_ahead(self, agent: Agent) -> Future[Rollout]:
        """:meth:`collect` in the background with a copy of ``agent``'s policy as it is now
        (needs ``overlap``); the future's result is the rollout."""
        assert self._ahead is not None, "collect_ahead needs a Collector made with overlap=True"
        if self._behaviour is None:
            # An acting copy on the CPU (a GPU learner's queue never delays it): its
            # networks are the policy's alone, and it explores with the agent's own
            # generators, which only collection draws from.
            memo: dict[int, object] = {id(m): None for m in agent.training_modules().values()}
            shared = [
                agent.rng,
                *(g for g in vars(agent).values() if isinstance(g, torch.Generator)),
            ]
            memo.update({id(g): g for g in shared})
            self._behaviour = copy.deepcopy(agent, memo).to("cpu")
        for name, module in agent.policy_modules().items():
            self._behaviour.policy_modules()[name].load_state_dict(module.state_dict())
        return self._ahead.submit(self.collect, self._behaviour)

    def store(self, rollout: Rollout, buffer: ReplayBuffer, agent: Agent) -> list[float]:
        """Adds a rollout's transitions to ``buffer`` and its observations to the agent's
        normalizer; returns the successes of the episodes that ended in it."""
        with self.clock("store"):
            for obs, step in zip(rollout.observations, rollout.steps, strict=True):
                buffer.add(
                    obs,
                    step.next_obs,
                    step.actions,
                    step.rewards,
                    step.terminated,
                    step.truncated,
                    step.infos,
                )
            concatenate = self.backend.xp.concatenate
            agent.normalizer.update(
                {k: concatenate([o[k] for o in rollout.observations]) for k in GOAL_KEYS}
            )
            agent.normalizer.recompute()
            return self.backend.successes(rollout.steps)

    def evaluate(self, agent: Agent, seed: int, limit: int) -> torch.Tensor:
        """Sums of success, return and length over one deterministic episode per eval
        sub-env (at most ``limit`` steps), as a float64 CPU tensor of 3."""
        envs, xp = self.eval_envs, self.backend.xp
        with self.clock("eval"):
            obs, _ = envs.reset(seed=seed)
            n = envs.num_envs
            success, returns, lengths = (self.backend.zeros(n) for _ in range(3))
            done = success > 0.0
            for _ in range(limit):
                actions = agent.act(obs, explore=False)
                if isinstance(actions, np.ndarray):  # numpy envs: the action space's dtype
                    actions = actions.astype(envs.single_action_space.dtype, copy=False)
                obs, rewards, terminated, truncated, info = envs.step(actions)
                active = ~done
                returns += xp.where(active, rewards, 0.0)
                lengths += active
                ended = active & (terminated | truncated)
                success = xp.where(ended, info["is_success"] * 1.0, success)
                done |= ended
                if bool(done.all()):
                    break
            return torch.tensor([float(v.sum()) for v in (success, returns, lengths)]).double()

    def arm(self, steps: int) -> None:
        """Keeps the envs' generator states from before the ``steps``-th step from now (the
        epoch's last), which a checkpoint of the epoch saves."""
        self.envs.arm(steps)

    def generator_states(self) -> dict[str, object]:
        """The envs' generator states a checkpoint saves (see :meth:`arm`)."""
        return self.envs.generator_states()

    def worker_pids(self) -> dict[str, list[int]]:
        """The ids of the processes stepping the training envs (``"envs"``) and the eval
        envs (``"eval"``); empty where they run in the trainer's process."""
        return {
            name: list(envs.pids()) if hasattr(envs, "pids") else []
            for name, envs in (("envs", self.envs), ("eval", self.eval_envs))
        }

    def close(self) -> None:
        """Closes the envs and the background collection thread."""
        if self._ahead is not None:
            self._ahead.shutdown(wait=True)
        self.envs.close()
        self.eval_envs.close()


class NumpyEnvsDeviceReplay(NumpyBackend):
    """Numpy vector envs, as :class:`NumpyBackend` steps them, and the replay buffer on the
    training device, as :class:`DeviceBackend` keeps it: each step's arrays are copied there
    when they are stored, and batches are sampled there."""

    buffer_suffix: ClassVar[str] = DeviceBackend.buffer_suffix
    other_suffix: ClassVar[str] = DeviceBackend.other_suffix
    new_buffer = DeviceBackend.new_buffer
    load_buffer = DeviceBackend.load_buffer


def make_backend(
    on_device: bool,
    env_id: str,
    env_kwargs: dict[str, object],
    device: torch.device,
    replay_on_device: bool = False,
) -> Backend:
    """Where the run's envs run, on ``device`` (torch twins) or on numpy, and where the
    replay buffer lives (always beside torch twins; on ``device`` with numpy envs when
    ``replay_on_device``)."""
    if on_device:
        return DeviceBackend(env_id, env_kwargs, device)
    cls = NumpyEnvsDeviceReplay if replay_on_device else NumpyBackend
    return cls(env_id, env_kwargs, device)


def _with_final_obs(
    next_obs: dict[str, np.ndarray], info: dict[str, Any], done: np.ndarray, keys: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The true next observations and info values of a step: with gymnasium's same-step
    autoreset, a finished sub-env's ``next_obs`` is already the next episode's first, and
    its last observation and info sit in ``info["final_obs"]`` / ``info["final_info"]``."""
    infos = {k: np.asarray(info[k]) for k in keys}
    if not done.any():
        return next_obs, infos
    real_next = {k: v.copy() for k, v in next_obs.items()}
    infos = {k: v.copy() for k, v in infos.items()}
    for i in np.flatnonzero(done).tolist():
        final_obs = info["final_obs"][i]
        for key in real_next:
            real_next[key][i] = final_obs[key]
        for key in infos:
            infos[key][i] = _final(info, key, i)
    return real_next, infos


def _final(info: dict[str, Any], key: str, i: int) -> object:
    """Entry ``key`` of sub-env ``i``'s final info (same-step autoreset)."""
    final = info["final_info"]
    if isinstance(final, dict):  # SyncVectorEnv: a dict of per-env arrays
        return final[key][i]
    return final[i][key]
