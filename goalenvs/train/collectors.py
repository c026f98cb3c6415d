"""Collection and evaluation, one class per place the envs run.

:class:`NumpyCollector` drives numpy vector envs (a goalenvs twin, or gymnasium's
SyncVectorEnv around any goal env) with same-step autoreset, and fills the numpy
:class:`~goalenvs.her.buffer.HerReplayBuffer`. :class:`DeviceCollector` drives the torch
twins on the training device with autoreset disabled, and fills the
:class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer` there: per step the host learns
one bool (did an episode end?), the successes and eval sums come to it once per cycle or
epoch. The trainer picks one in its constructor (:func:`make_collector`) and never asks
again where the envs run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from goalenvs.core import GOAL_KEYS
from goalenvs.train.envs import make_vector_env
from goalenvs.train.timing import PhaseClock

Obs = dict[str, Any]  # a batched goal observation: arrays or tensors by key
Info = dict[str, Any]  # a vector env step's info


class Collector:
    """Where the envs run: building them, collecting, evaluating, and the replay buffer
    that lives beside them. Subclasses set the class attributes and the methods."""

    train_autoreset: ClassVar[gym.vector.AutoresetMode]  # the training envs' autoreset mode
    buffer_suffix: ClassVar[str]  # the file type of a saved replay buffer
    other_suffix: ClassVar[str]  # the other backend's (a resume warns about it)

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], device: torch.device) -> None:
        self.env_id = env_id
        self.env_kwargs = env_kwargs
        self.device = device  # where the agent trains
        self.clock = PhaseClock()  # collection charges its env, act and store phases here

    def env_device(self) -> torch.device | None:
        """The device the envs run on; None for numpy."""
        raise NotImplementedError

    def make_envs(self, num_envs: int, mode: gym.vector.AutoresetMode) -> gym.vector.VectorEnv:
        """``num_envs`` vector envs of the run's env in autoreset ``mode``."""
        return make_vector_env(self.env_id, self.env_kwargs, num_envs, mode, self.env_device())

    def prepare(self, agent: Any) -> None:
        """Readies ``agent`` for this backend (nothing by default)."""

    def new_buffer(self, size: int, compute_reward: Any, **kwargs: Any) -> Any:
        """An empty replay buffer of this backend holding ``size`` transitions; ``kwargs``
        are the buffer's (spaces, HER and priority settings)."""
        raise NotImplementedError

    def load_buffer(self, path: Path, compute_reward: Any, compute_terminated: Any) -> Any:
        """A replay buffer this backend saved."""
        raise NotImplementedError

    def td_errors(self, td_errors: torch.Tensor) -> Any:
        """TD errors in the form this backend's buffer takes as priorities."""
        raise NotImplementedError

    def collect(
        self,
        agent: Any,
        buffer: Any,
        envs: gym.vector.VectorEnv,
        obs: dict[str, Any],
        steps: int,
        info_keys: tuple[str, ...],
        stats: dict[str, list],
    ) -> dict[str, Any]:
        """Steps ``envs`` ``steps`` times with exploring actions, stores every transition
        in ``buffer`` and the finished episodes' successes in ``stats``, updates the
        normalizer; returns the last observation."""
        seen, successes, clock = [], [], self.clock
        for _ in range(steps):
            with clock("act"):
                actions = self.env_actions(agent.act(obs, explore=True), envs)
            with clock("env"):
                next_obs, rewards, terminated, truncated, info = envs.step(actions)
            done = terminated | truncated
            with clock("store"):
                successes.append(self.ended_successes(info, done))
                real_next, infos = self.true_next(next_obs, info, done, info_keys)
                buffer.add(obs, real_next, actions, rewards, terminated, truncated, infos)
            seen.append(obs)
            obs = self.next_start(envs, next_obs, done)
        with clock("store"):
            agent.normalizer.update({k: self.concat([o[k] for o in seen]) for k in GOAL_KEYS})
            agent.normalizer.recompute()
        stats["success"].extend(self.success_values(successes))
        return obs

    def evaluate(
        self, agent: Any, envs: gym.vector.VectorEnv, obs: dict[str, Any], limit: int
    ) -> torch.Tensor:
        """Sums of success, return and length over one deterministic episode per sub-env
        (at most ``limit`` steps), as a float64 CPU tensor of 3."""
        xp, n = self.xp, envs.num_envs
        success, returns, lengths = self.zeros(n), self.zeros(n), self.zeros(n)
        done = success > 0.0
        for _ in range(limit):
            actions = self.env_actions(agent.act(obs, False), envs)
            obs, rewards, terminated, truncated, info = envs.step(actions)
            active = ~done
            returns += xp.where(active, rewards, 0.0)
            lengths += active
            ended = active & (terminated | truncated)
            success = xp.where(ended, self.as_float(info["is_success"]), success)
            done |= ended
            if bool(done.all()):
                break
        return self.host_sums([success, returns, lengths])

    # ---- what differs between backends

    xp: ClassVar[Any]  # the array module of the envs' arrays: numpy or torch

    def zeros(self, n: int) -> Any:
        """``n`` float64 zeros where the envs' arrays live."""
        raise NotImplementedError

    def as_float(self, values: Any) -> Any:
        """``values`` (bools or numbers of one step) as float64 where they live."""
        raise NotImplementedError

    def concat(self, arrays: list[Any]) -> Any:
        """Arrays of several steps, one after the other."""
        return self.xp.concatenate(arrays)

    def host_sums(self, arrays: list[Any]) -> torch.Tensor:
        """The sum of each array, as a float64 CPU tensor."""
        raise NotImplementedError

    def success_values(self, successes: list[Any]) -> list[float]:
        """The successes :meth:`ended_successes` gathered, as floats on the host."""
        raise NotImplementedError

    def env_actions(self, actions: Any, envs: gym.vector.VectorEnv) -> Any:
        """The agent's actions as ``envs`` take them."""
        return actions

    def ended_successes(self, info: Info, done: Any) -> Any:
        """The successes of the episodes a step ended (in a form :meth:`success_values`
        reads)."""
        raise NotImplementedError

    def true_next(self, next_obs: Obs, info: Info, done: Any, keys: tuple[str, ...]) -> Any:
        """The true next observations and info values ``keys`` of a step (the last ones
        of the episodes that ended)."""
        raise NotImplementedError

    def next_start(self, envs: gym.vector.VectorEnv, next_obs: dict[str, Any], done: Any) -> Any:
        """The observations the next step starts from."""
        return next_obs


class NumpyCollector(Collector):
    """Numpy vector envs with same-step autoreset; the numpy replay buffer."""

    # The step that ends an episode already returns the next episode's first observation;
    # the final one is read from the info.
    train_autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.SAME_STEP
    buffer_suffix: ClassVar[str] = "npz"
    other_suffix: ClassVar[str] = "pt"

    def env_device(self) -> torch.device | None:
        """None: the envs run on numpy."""
        return None

    def new_buffer(self, size: int, compute_reward: Any, **kwargs: Any) -> Any:
        """An empty numpy replay buffer."""
        from goalenvs.her.buffer import HerReplayBuffer

        return HerReplayBuffer(size, compute_reward=compute_reward, **kwargs)

    def load_buffer(self, path: Path, compute_reward: Any, compute_terminated: Any) -> Any:
        """A replay buffer this backend saved."""
        from goalenvs.her.buffer import HerReplayBuffer

        return HerReplayBuffer.load(path, compute_reward, compute_terminated)

    def td_errors(self, td_errors: torch.Tensor) -> Any:
        """TD errors in the form this backend's buffer takes as priorities."""
        return td_errors.cpu().numpy()

    xp: ClassVar[Any] = np

    def zeros(self, n: int) -> Any:
        """``n`` float64 zeros."""
        return np.zeros(n)

    def as_float(self, values: Any) -> Any:
        """``values`` as a float64 array."""
        return np.asarray(values, dtype=np.float64)

    def host_sums(self, arrays: list[Any]) -> torch.Tensor:
        """The sums as a float64 tensor."""
        return torch.tensor([a.sum() for a in arrays], dtype=torch.float64)

    def success_values(self, successes: list[Any]) -> list[float]:
        """The successes as floats."""
        return [float(v) for step in successes for v in step]

    def env_actions(self, actions: Any, envs: gym.vector.VectorEnv) -> Any:
        """The env and the buffer get the action space's dtype (float64 Boxes are common)."""
        return actions.astype(envs.single_action_space.dtype, copy=False)

    def ended_successes(self, info: Info, done: Any) -> Any:
        """``is_success`` of each ended episode, from its final info."""
        return [_final(info, "is_success", i) for i in np.flatnonzero(done).tolist()]

    def true_next(self, next_obs: Obs, info: Info, done: Any, keys: tuple[str, ...]) -> Any:
        """With same-step autoreset the final observations and infos come from the info."""
        return _with_final_obs(next_obs, info, done, keys)


class DeviceCollector(Collector):
    """The torch twins on the training device with autoreset disabled; the replay buffer
    on that device too."""

    # The loop resets finished sub-envs itself: the step's observation is then the final
    # one of every sub-env, one batched tensor, where same-step autoreset hands them out
    # one sub-env at a time.
    train_autoreset: ClassVar[gym.vector.AutoresetMode] = gym.vector.AutoresetMode.DISABLED
    buffer_suffix: ClassVar[str] = "pt"
    other_suffix: ClassVar[str] = "npz"

    def env_device(self) -> torch.device | None:
        """The training device."""
        return self.device

    def prepare(self, agent: Any) -> None:
        """Makes the agent's exploration generator now, so that a resume finds it."""
        agent.noise_generator()

    def new_buffer(self, size: int, compute_reward: Any, **kwargs: Any) -> Any:
        """An empty replay buffer on the device."""
        from goalenvs.her.device_buffer import DeviceHerReplayBuffer

        return DeviceHerReplayBuffer(
            size, compute_reward=compute_reward, device=self.device, **kwargs
        )

    def load_buffer(self, path: Path, compute_reward: Any, compute_terminated: Any) -> Any:
        """A replay buffer saved on a device, loaded onto this one."""
        from goalenvs.her.device_buffer import DeviceHerReplayBuffer

        return DeviceHerReplayBuffer.load(
            path, compute_reward, compute_terminated, device=self.device
        )

    def td_errors(self, td_errors: torch.Tensor) -> Any:
        """The TD errors where they are: no host copy per batch."""
        return td_errors

    xp: ClassVar[Any] = torch

    def zeros(self, n: int) -> Any:
        """``n`` float64 zeros on the device."""
        return torch.zeros(n, dtype=torch.float64, device=self.device)

    def as_float(self, values: Any) -> Any:
        """``values`` as float64, on the device."""
        return values.double()

    def concat(self, arrays: list[Any]) -> Any:
        """The tensors of several steps, one after the other."""
        return torch.cat(arrays)

    def host_sums(self, arrays: list[Any]) -> torch.Tensor:
        """The sums, computed on the device, in one copy to the host."""
        return torch.stack([a.sum() for a in arrays]).cpu()

    def success_values(self, successes: list[Any]) -> list[float]:
        """The successes of the episodes that ended, in one copy to the host."""
        if not successes:
            return []
        values = torch.cat([success for success, _ in successes])
        ended = torch.cat([done for _, done in successes])
        return values[ended].float().cpu().tolist()

    def ended_successes(self, info: Info, done: Any) -> Any:
        """Every sub-env's success and whether its episode ended: they stay on the device
        until :meth:`success_values` (no host copy per step)."""
        return info["is_success"].clone(), done

    def true_next(self, next_obs: Obs, info: Info, done: Any, keys: tuple[str, ...]) -> Any:
        """Autoreset is off: ``next_obs`` is every sub-env's true next (or final)
        observation."""
        return next_obs, {k: info[k] for k in keys}

    def next_start(self, envs: gym.vector.VectorEnv, next_obs: dict[str, Any], done: Any) -> Any:
        """The loop resets the finished sub-envs itself (one bool comes to the host)."""
        if not bool(done.any()):
            return next_obs
        with self.clock("env"):
            fresh, _ = envs.reset(options={"reset_mask": done})
        return {
            k: torch.where(done.reshape(-1, *(1,) * (v.ndim - 1)), fresh[k], v)
            for k, v in next_obs.items()
        }


def make_collector(
    on_device: bool, env_id: str, env_kwargs: dict[str, Any], device: torch.device
) -> Collector:
    """The collector of the run: on ``device`` (torch twins) or on numpy."""
    cls = DeviceCollector if on_device else NumpyCollector
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
        final_obs = _final_obs(info, i)
        for key in real_next:
            real_next[key][i] = final_obs[key]
        for key in infos:
            infos[key][i] = _final(info, key, i)
    return real_next, infos


def _final(info: dict[str, Any], key: str, i: int) -> Any:
    """Entry ``key`` of sub-env ``i``'s final info (same-step autoreset)."""
    final = info["final_info"]
    if isinstance(final, dict):  # SyncVectorEnv: a dict of per-env arrays
        return final[key][i]
    return final[i][key]


def _final_obs(info: dict[str, Any], i: int) -> dict[str, np.ndarray]:
    return info["final_obs"][i]
