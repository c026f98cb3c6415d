"""The training envs: resolving an env id, checking the trainer can drive it, building its
vector envs (numpy twins, torch twins on a device, or gymnasium's SyncVectorEnv), and
reading its goal functions and reward range."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents.registry import algo_for, check_action_space, get_algo
from goalenvs.core import GOAL_KEYS, GoalVectorEnv
from goalenvs.envspec import env_spec  # the gymnasium spec of any form of env id
from goalenvs.train.env_workers import EnvWorkers


def validate_training_env(env_id: str, env_kwargs: dict[str, Any], algo: str | None) -> gym.Env:
    """Makes one env and checks the trainer can drive it: a goal Dict observation and an
    action space the algorithm (None: any) fits (``goalenvs check`` checks the contract)."""
    if algo is not None:
        get_algo(algo)
    spec = env_spec(env_id)
    try:
        env = gym.make(spec, **env_kwargs)
    except gym.error.Error as exc:
        raise ValueError(f"env_id={env_id!r} could not be made: {exc}") from None
    space = env.observation_space
    if not isinstance(space, spaces.Dict) or any(k not in space.spaces for k in GOAL_KEYS):
        env.close()
        raise ValueError(
            f"{env_id} is not a goal env: its observation space is {space}, expected "
            f"Dict(observation=..., achieved_goal=..., desired_goal=...). Run "
            f"`goalenvs check {env_id}` to see what the goal-env contract asks for."
        )
    try:
        check_action_space(algo or algo_for(env.action_space), env.action_space, env_id)
    except ValueError:
        env.close()
        raise
    return env


# gymnasium's passive checker on an observation of another dtype than its space's (the
# second follows from the first: a Box holds only what casts safely to its dtype)
_DTYPE_WARNINGS = (
    r".*The obs returned by the `(reset|step)\(\)` method "
    r"(was expecting numpy array dtype|is not within the observation space)"
)


def observation_dtype_note(env: gym.Env, env_id: str, seed: int) -> str | None:
    """One line when ``env``'s reset observation has entries of another dtype than its
    space declares (training casts them), and gymnasium's own warnings about it silenced;
    None when every entry has its space's dtype."""
    space = env.observation_space
    assert isinstance(space, spaces.Dict)  # validate_training_env checked it
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DTYPE_WARNINGS, category=UserWarning)
        obs, _ = env.reset(seed=seed)
    dtypes = {key: (np.asarray(obs[key]).dtype, space[key].dtype) for key in space if key in obs}
    found = {
        k: (got, want) for k, (got, want) in dtypes.items() if want is not None and got != want
    }
    if not found:
        return None
    warnings.filterwarnings("ignore", message=_DTYPE_WARNINGS, category=UserWarning)
    entries = ", ".join(f"{key} {got} (space {want})" for key, (got, want) in found.items())
    return (
        f"{env_id} returns observations of another dtype than its space: {entries}; "
        "training casts them to the space's (`goalenvs check` calls it api.obs_dtype; "
        "`.astype(space.dtype)` in the env fixes it)"
    )


def device_twin_problem(env_id: str) -> str | None:
    """Why ``env_id`` cannot run as a torch twin on a device (a :class:`GoalVectorEnv`
    taking ``device``), or None when it can."""
    entry = env_spec(env_id).vector_entry_point
    if entry is None:
        return "it has no native vector twin (gymnasium's SyncVectorEnv steps it on numpy)"
    cls = gym.envs.registration.load_env_creator(entry) if isinstance(entry, str) else entry
    if not (isinstance(cls, type) and issubclass(cls, GoalVectorEnv)):
        return f"its vector env {entry} is not a goalenvs twin (GoalVectorEnv)"
    if "device" not in inspect.signature(cls).parameters:
        return f"its vector env {entry} takes no device argument"
    return None


def make_vector_env(
    env_id: str,
    env_kwargs: dict[str, Any],
    num_envs: int,
    mode: gym.vector.AutoresetMode,
    device: torch.device | None = None,
    workers: int = 1,
) -> gym.vector.VectorEnv:
    """The env's native vector twin (or gymnasium's SyncVectorEnv) in autoreset ``mode``;
    with ``device``, the torch twin on it; with ``workers`` > 1, :class:`EnvWorkers`."""
    mode, spec = gym.vector.AutoresetMode(mode), env_spec(env_id)
    if device is not None:  # the plan checked that it can (device_twin_problem)
        return gym.make_vec(
            spec, num_envs=num_envs, autoreset_mode=mode, device=device, **env_kwargs
        )
    if workers > 1:  # the plan checked that it has no native twin
        return EnvWorkers(env_id, env_kwargs, num_envs, workers, mode)
    if spec.vector_entry_point is not None:
        return gym.make_vec(spec, num_envs=num_envs, autoreset_mode=mode, **env_kwargs)
    return gym.make_vec(
        spec,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        **env_kwargs,
    )


def goal_function(
    vector_env: Any, env: gym.Env, name: str, host_arrays: bool = False
) -> Callable | None:
    """The batched ``compute_reward`` / ``compute_terminated`` of the env (None if absent).
    A ``compute_terminated`` result is broadcast to the batch (Fetch's is one ``False``);
    a ``compute_reward`` one never is (the buffer refuses one that is not one reward per
    goal pair). With ``host_arrays`` tensors reach the env's function as numpy arrays, and
    its result goes back to their device."""
    fn = getattr(vector_env.unwrapped, name, None)
    if not callable(fn):
        try:
            fn = env.get_wrapper_attr(name)
        except AttributeError:
            return None
    if not callable(fn):
        return None
    observation_space: Any = env.observation_space
    goal_ndim = len(observation_space["achieved_goal"].shape)

    def batched(achieved_goal: Any, desired_goal: Any, info: object) -> object:
        if host_arrays and isinstance(achieved_goal, torch.Tensor):
            device = achieved_goal.device
            result = batched(
                _host_array(achieved_goal),
                _host_array(desired_goal),
                {k: _host_array(v) for k, v in info.items()} if isinstance(info, dict) else info,
            )
            return torch.as_tensor(np.array(result), device=device)
        result = fn(achieved_goal, desired_goal, info)
        if isinstance(achieved_goal, torch.Tensor):  # a device twin's: tensors stay there
            batch_shape = tuple(achieved_goal.shape[: achieved_goal.ndim - goal_ndim])
            result = torch.as_tensor(result, device=achieved_goal.device)
            if tuple(result.shape) == batch_shape or name == "compute_reward":
                return result
            return result.broadcast_to(batch_shape)
        result = np.asarray(result)
        batch_shape = np.shape(achieved_goal)[: np.ndim(achieved_goal) - goal_ndim]
        if result.shape == batch_shape or name == "compute_reward":
            return result
        return np.broadcast_to(result, batch_shape)

    # the env's own name in messages (the buffer's refusal names the function it called)
    batched.__qualname__ = getattr(fn, "__qualname__", name)
    return batched


def _host_array(value: object) -> object:
    """A tensor as a numpy array in host memory (anything else as it is)."""
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value


def scalar_info_keys(env: gym.Env) -> tuple[str, ...]:
    """The numeric or boolean scalar entries of the env's info, ``is_success`` aside: HER
    recomputes rewards that read them (a collision penalty) without the user naming them."""
    _, info = env.reset(seed=0)
    named = [(k, v) for k, v in info.items() if k != "is_success" and not k.startswith("_")]
    return tuple(k for k, v in named if np.ndim(v) == 0 and np.asarray(v).dtype.kind in "biuf")


def probe_rewards(
    env: gym.Env, compute_reward: Callable, info_keys: tuple[str, ...], seed: int, steps: int = 200
) -> tuple[float, float]:
    """The lowest and highest reward ``compute_reward`` paid on a random-action probe:
    goals reached in ``steps`` random steps paired with other desired goals and with
    themselves, under the info seen and with every boolean info entry set both ways."""
    env.action_space.seed(seed)
    obs, info = env.reset(seed=seed)
    achieved, desired = [], []
    infos: dict[str, list[object]] = {k: [] for k in info_keys}
    for _ in range(steps):
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
        achieved.append(obs["achieved_goal"])
        desired.append(obs["desired_goal"])
        for key in info_keys:
            infos[key].append(info[key])
        if terminated or truncated:
            obs, _ = env.reset()
    achieved_goals, desired_goals = np.asarray(achieved), np.asarray(desired)
    info_batch = {k: np.asarray(v) for k, v in infos.items()}
    variants = [info_batch]
    for key, values in info_batch.items():
        if values.dtype == bool:
            for flag in (False, True):
                variants.append({**info_batch, key: np.full_like(values, flag)})
    shuffled = np.random.default_rng(seed).permutation(len(desired_goals))
    rewards = [
        np.asarray(compute_reward(achieved_goals, goals, variant), dtype=np.float64)
        for variant in variants
        for goals in (desired_goals, desired_goals[shuffled], achieved_goals)
    ]
    return float(min(r.min() for r in rewards)), float(max(r.max() for r in rewards))


def return_range(reward_low: float, reward_high: float, gamma: float) -> tuple[float, float]:
    """Bounds of any discounted return of rewards in ``[reward_low, reward_high]`` (0
    included: an episode may end at any step)."""
    return min(reward_low, 0.0) / (1.0 - gamma), max(reward_high, 0.0) / (1.0 - gamma)
