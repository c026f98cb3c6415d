"""The goal-env contract: :class:`GoalEnv`, the goal keys and goal batches.

A goal env is a :class:`gymnasium.Env` whose observation space is
``Dict(observation=..., achieved_goal=..., desired_goal=...)`` and which computes its
reward, termination and truncation from goals alone, for one goal pair or any batch of
them, so that Hindsight Experience Replay can relabel stored transitions::

    compute_reward(achieved_goal, desired_goal, info)      -> float32, shape batch_shape
    compute_terminated(achieved_goal, desired_goal, info)  -> bool, shape batch_shape
    compute_truncated(achieved_goal, desired_goal, info)   -> bool, shape batch_shape

where ``batch_shape`` is the goals' leading shape (``()`` for one pair). ``info`` is None,
one dict (whose values may be batched arrays), or a list / object array of dicts, one per
element (stable-baselines3 passes ``[{}] * B``).
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core.backend import InfoLike, goal_pair, is_tensor, torch_goal_arrays

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


class GoalFunctions:
    """The two goal functions every goal env and vector twin implements, batched."""

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Reward for reaching ``achieved_goal`` when ``desired_goal`` was asked, batched.

        Returns a float32 array of shape ``achieved_goal.shape[:-1]``.
        """
        raise NotImplementedError

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Whether the episode ends for these goals, batched (bool array)."""
        raise NotImplementedError


class GoalEnv(GoalFunctions, gym.Env):
    """A gymnasium env with a goal Dict observation and batched goal functions.

    Subclasses set ``observation_space`` to a :class:`gymnasium.spaces.Dict` with the keys
    ``observation``, ``achieved_goal`` and ``desired_goal`` and implement
    :meth:`compute_reward` and :meth:`compute_terminated`. Every step's reward and
    termination must equal these functions applied to the step's goals and info: that is
    what lets HER recompute them for substituted goals.
    """

    observation_space: spaces.Dict

    def compute_truncated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Goal-dependent truncation, batched. goalenvs envs never truncate on goals.

        The time limit is not goal-dependent and is applied by gymnasium's ``TimeLimit``
        (single envs) or the vector env's step counter.
        """
        shape, _, _ = goal_arrays(achieved_goal, desired_goal)
        return np.zeros(shape, dtype=bool)


# --------------------------------------------------------------------------- goal batches


def goal_arrays(
    achieved_goal: object, desired_goal: object, goal_size: int | None = None
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Validates a goal pair or batch and returns ``(batch_shape, achieved, desired)``.

    Both arrays keep their float dtype (integers become float32). Leading dimensions
    broadcast against each other; the last dimension is the goal and must match
    ``goal_size`` when given.
    """
    return goal_pair(achieved_goal, desired_goal, goal_size)


def goal_batch(
    achieved_goal: object, desired_goal: object, goal_size: int | None = None
) -> tuple[tuple[int, ...], Any, Any, Any]:
    """:func:`goal_arrays` for numpy or torch: ``(batch_shape, achieved, desired, xp)``.

    When either goal is a torch tensor, both come back as float tensors on that tensor's
    device and ``xp`` is ``torch``, so a goal function computes on the caller's device and
    returns tensors there; otherwise this is :func:`goal_arrays` with ``xp = numpy``.
    """
    if not (is_tensor(achieved_goal) or is_tensor(desired_goal)):
        return (*goal_arrays(achieved_goal, desired_goal, goal_size), np)
    return torch_goal_arrays(achieved_goal, desired_goal, goal_size)


def goal_dict_space(observation: spaces.Space, goal: spaces.Space) -> spaces.Dict:
    """The goal observation space ``Dict(observation, achieved_goal, desired_goal)``.

    The two goal entries are identical, independent copies of ``goal``.
    """
    goals = {"achieved_goal": goal, "desired_goal": copy.deepcopy(goal)}
    return spaces.Dict({"observation": observation, **goals})


def goal_obs(observation: Any, achieved_goal: Any, desired_goal: Any) -> dict[str, Any]:
    """The observation dict of :data:`GOAL_KEYS`, holding the arrays given (pass copies)."""
    return {
        "observation": observation,
        "achieved_goal": achieved_goal,
        "desired_goal": desired_goal,
    }


def episode_length(env: object) -> int | None:
    """The episode length ``env`` declares, or None: its spec's ``max_episode_steps``, a
    ``TimeLimit`` among its wrappers, or its own ``max_episode_steps`` attribute (the
    goalenvs twins, highway-env). ``goalenvs check`` and ``goalenvs train`` both read it
    here, so they agree on which envs declare one."""
    spec = getattr(env, "spec", None)
    if spec is not None and getattr(spec, "max_episode_steps", None):
        return int(spec.max_episode_steps)
    layer = env
    while isinstance(layer, gym.Wrapper):
        if isinstance(layer, gym.wrappers.TimeLimit):
            return int(layer._max_episode_steps)
        layer = layer.env
    own = getattr(getattr(env, "unwrapped", env), "max_episode_steps", None)
    if isinstance(own, (int, np.integer)) and not isinstance(own, bool) and own > 0:
        return int(own)
    return None
