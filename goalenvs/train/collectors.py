"""Collection and evaluation: the loop that steps the training envs, and where they run.

One cycle of collection is one loop (:meth:`Collector.collect`)::

    for each of rollout_steps:
        actions = agent.act(obs, explore=True)
        step = envs.step(actions)                # EnvStep: one representation
        keep (obs, step); obs = step.start

and its steps go to the replay buffer and the normalizer afterwards
(:meth:`Collector.store`). Where the envs run is a :class:`Backend`, chosen once: numpy
vector envs with same-step autoreset (a goalenvs twin, gymnasium's ``SyncVectorEnv``, or
:class:`~goalenvs.train.env_workers.EnvWorkers` processes), or (:class:`DeviceBackend`)
the torch twins on the training device with autoreset disabled, where per step the host
learns one bool (did an episode end?). Either turns what the envs return into one
:class:`EnvStep`, so the loop is the same for both.

Overlap: :meth:`Collector.collect_ahead` steps the next cycle in a background thread with
a copy of the policy while the learner runs this cycle's updates (one cycle of lag). Its
steps reach the buffer only through :meth:`Collector.store`, after the updates, and the
copy explores with the agent's own generator, so a seed gives the same run whatever the
thread timing."""

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
    # every sub-env's true next observation (the final one where it ended)
    next_obs: Mapping[str, Array]
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
    """Where the envs run (numpy vector envs, see the module docstring) and the replay
    buffer beside them: the numpy one in host memory, or (``replay_on_device``) the torch
    one on the training ``device``, each step's arrays copied there as they are stored."""

    # The step that ends an episode already returns the next episode's first observation;
    # the final one is read from the info.
    autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.SAME_STEP
    xp: ClassVar[ModuleType] = np  # the array module of the envs' values

    def __init__(
        self,
        env_id: str,
        env_kwargs: dict[str, object],
        device: torch.device,
        replay_on_device: bool = False,
    ) -> None:
        self.env_id, self.env_kwargs = env_id, env_kwargs
        self.device = device  # where the agent trains
        self.replay_on_device = replay_on_device
        self.buffer_suffix = "pt" if replay_on_device else "npz"  # a saved buffer's file type

    def make_envs(
        self, num_envs: int, mode: gym.vector.AutoresetMode, workers: int = 1
    ) -> gym.vector.VectorEnv:
        """``num_envs`` vector envs in autoreset ``mode``: the env's native twin,
        gymnasium's SyncVectorEnv, or ``workers`` processes."""
        return make_vector_env(self.env_id, self.env_kwargs, num_envs, mode, workers=workers)

    def step(
        self, envs: gym.vector.VectorEnv, actions: Array, info_keys: tuple[str, ...]
    ) -> EnvStep:
        """Steps ``envs`` with ``actions`` (cast to the action space's dtype: float64 Boxes
        are common); the final observations and infos of the episodes that ended come
        from the info."""
        actions = np.asarray(actions).astype(envs.single_action_space.dtype, copy=False)
        next_obs, rewards, terminated, truncated, info = envs.step(actions)
        done = terminated | truncated
        real_next, infos = _with_final_obs(next_obs, info, done, info_keys)
        ended = [_final(info, "is_success", i) for i in np.flatnonzero(done).tolist()]
        return EnvStep(actions, real_next, rewards, terminated, truncated, infos, next_obs, ended)

    def successes(self, steps: list[EnvStep]) -> list[float]:
        """The successes of the episodes that ended in ``steps``, as floats on the host."""
        return [float(v) for step in steps for v in step.ended]

    def zeros(self, n: int) -> Array:
        """``n`` float64 zeros where the envs' values live."""
        return np.zeros(n)

    def new_buffer(self, size: int, compute_reward: GoalFunction, **kwargs: Any) -> ReplayBuffer:
        """An empty replay buffer holding ``size`` transitions; ``kwargs`` are the
        buffer's (spaces, HER and priority settings)."""
        return self._buffer_class()(size, compute_reward=compute_reward, **self._on(), **kwargs)

    def load_buffer(
        self, path: Path, compute_reward: GoalFunction, compute_terminated: GoalFunction | None
    ) -> ReplayBuffer:
        """A replay buffer this backend saved (a device one loaded onto this device)."""
        return self._buffer_class().load(path, compute_reward, compute_terminated, **self._on())

    def _buffer_class(self) -> Any:
        from goalenvs.her.buffer import DeviceHerReplayBuffer, HerReplayBuffer

        return DeviceHerReplayBuffer if self.replay_on_device else HerReplayBuffer

    def _on(self) -> dict[str, torch.device]:
        return {"device": self.device} if self.replay_on_device else {}


class DeviceBackend(Backend):
    """The torch twins on the training device with autoreset disabled, and the replay
    buffer there too."""

    # The loop resets finished sub-envs itself: the step's observation is then the final
    # one of every sub-env, one batched tensor, where same-step autoreset hands them out
    # one sub-env at a time.
    autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.DISABLED
    xp: ClassVar[ModuleType] = torch

    def __init__(self, env_id: str, env_kwargs: dict[str, object], device: torch.device) -> None:
        super().__init__(env_id, env_kwargs, device, replay_on_device=True)

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


class Collector:
    """The training and eval envs of a run and the loops that step them."""

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
        self.eval_workers = eval_workers or eval_env_workers(n_eval_episodes, workers)
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
        resume) from saved ``generator_states``; returns the names not restored."""
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
        (needs ``overlap``)."""
        assert self._ahead is not None, "collect_ahead needs a Collector made with overlap=True"
        if self._behaviour is None:
            # An acting copy on the CPU (a GPU learner's queue never delays it): its
            # networks are the policy's alone, and it explores with the agent's own
            # generators, which only collection draws from.
            memo: dict[int, object] = {id(m): None for m in agent.training_modules().values()}
            torch_generators = [g for g in vars(agent).values() if isinstance(g, torch.Generator)]
            memo.update({id(g): g for g in (agent.rng, *torch_generators)})
            self._behaviour = copy.deepcopy(agent, memo).to("cpu")
        for name, module in agent.policy_modules().items():
            self._behaviour.policy_modules()[name].load_state_dict(module.state_dict())
        return self._ahead.submit(self.collect, self._behaviour)

    def store(self, rollout: Rollout, buffer: ReplayBuffer, agent: Agent) -> list[float]:
        """Adds a rollout's transitions to ``buffer`` and its observations to the agent's
        normalizer; returns the successes of the episodes that ended in it."""
        with self.clock("store"):
            for obs, s in zip(rollout.observations, rollout.steps, strict=True):
                buffer.add(
                    obs, s.next_obs, s.actions, s.rewards, s.terminated, s.truncated, s.infos
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

    def worker_pids(self) -> dict[str, list[int]]:
        """The ids of the processes stepping the training (``"envs"``) and eval envs."""
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


def _with_final_obs(
    next_obs: dict[str, np.ndarray], info: dict[str, Any], done: np.ndarray, keys: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The true next observations and info values of a same-step autoreset step: a finished
    sub-env's last ones sit in ``info["final_obs"]`` / ``info["final_info"]``."""
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
    final = info["final_info"]  # SyncVectorEnv's: a dict of per-env arrays
    return final[key][i] if isinstance(final, dict) else final[i][key]
