"""The smallest correct goal env and its native vector twin, in the goalenvs shape.

A point on a line moves by the action; the goal is a random point. In the order of every
goalenvs env file: a frozen params dataclass (the checked constants), the goal functions
written once (a mixin both faces inherit, batched over leading dims, so HER can recompute
rewards for substituted goals), the kernel (pure functions of arrays and their array
module ``xp``), the single env, the twin. Copy this file to start a new env, then add one
registry entry in goalenvs/registration.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import GoalEnv, GoalVectorEnv, InfoLike, check_positive, goal_arrays

MAX_STEPS = 50


@dataclass(frozen=True)
class LineParams:
    """The constants both faces share, checked once."""

    size: float = 1.0
    tolerance: float = 0.05

    def __post_init__(self) -> None:
        check_positive("size", self.size)
        check_positive("tolerance", self.tolerance)

    def spaces(self) -> tuple[spaces.Dict, spaces.Box]:
        """The single env's (observation space, action space)."""
        box = spaces.Box(-self.size, self.size, (1,), np.float32)
        return spaces.Dict(observation=box, achieved_goal=box, desired_goal=box), box


class LineGoals:
    """Goal functions shared by both faces: reward 0 on success, -1 otherwise."""

    params: LineParams

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: InfoLike) -> np.ndarray:
        """-1 unless the goals are within ``tolerance``, float32, batched over leading dims."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, 1)
        return sparse_reward(reached(achieved, desired, self.params.tolerance, np), np)

    def compute_terminated(
        self, achieved_goal: Any, desired_goal: Any, info: InfoLike
    ) -> np.ndarray:
        """Whether the goals are within ``tolerance``, batched over leading dims."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, 1)
        return reached(achieved, desired, self.params.tolerance, np)


# The kernel: numpy and torch run the same lines.
def reached(achieved: Any, desired: Any, tolerance: float, xp: Any) -> Any:
    """Success per goal pair (bool, the leading shape)."""
    return xp.abs(achieved - desired)[..., 0] <= tolerance


def sparse_reward(success: Any, xp: Any) -> Any:
    """0 on success, -1 otherwise (float32)."""
    zero = xp.zeros_like(success, dtype=xp.float32)
    return xp.where(success, zero, zero - 1.0)


def line_step(position: Any, action: Any, size: float, xp: Any) -> Any:
    """The ``(batch, 1)`` positions after one step: a new array."""
    return xp.clip(position + xp.clip(action, -size, size), -size, size)


def draw_goal(rng: np.random.Generator, params: LineParams) -> np.ndarray:
    """One episode's goal, float32 ``(1,)``: what both faces draw from an env's generator."""
    return rng.uniform(-params.size, params.size, 1).astype(np.float32)


class LineEnv(LineGoals, GoalEnv):
    """Single env: move a point on [-size, size] to a random goal."""

    def __init__(
        self, size: float = 1.0, tolerance: float = 0.05, render_mode: str | None = None
    ) -> None:
        self.params = LineParams(size, tolerance)
        self.observation_space, self.action_space = self.params.spaces()
        self.render_mode = render_mode
        self.pos = self.goal = np.zeros((1, 1), np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos[0].copy(),
            "achieved_goal": self.pos[0].copy(),
            "desired_goal": self.goal[0].copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Starts at 0 with a goal drawn from ``self.np_random``."""
        super().reset(seed=seed)
        self.pos = np.zeros((1, 1), np.float32)
        self.goal = draw_goal(self.np_random, self.params)[None]
        return self._obs(), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        """Moves by the clipped action; reward and termination come from the kernel."""
        self.pos = line_step(self.pos, np.asarray(action, np.float32)[None], self.params.size, np)
        success = reached(self.pos, self.goal, self.params.tolerance, np)
        reward = float(sparse_reward(success, np)[0])
        return self._obs(), reward, bool(success[0]), False, {"is_success": bool(success[0])}


class LineVectorEnv(LineGoals, GoalVectorEnv):
    """Native twin: sub-env i seeded s follows LineEnv seeded s + i."""

    def __init__(
        self,
        num_envs: int = 1,
        size: float = 1.0,
        tolerance: float = 0.05,
        max_episode_steps: int | None = MAX_STEPS,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ) -> None:
        self.params = LineParams(size, tolerance)
        observation_space, action_space = self.params.spaces()
        super().__init__(
            num_envs, observation_space, action_space, max_episode_steps, autoreset_mode,
            render_mode,
        )  # fmt: skip
        self.pos = np.zeros((self.num_envs, 1), np.float32)
        self.goal = np.zeros((self.num_envs, 1), np.float32)

    # The arrays a reset writes: the base class picks the resetting sub-envs, asks
    # _draw_episode for each one's new episode (from that sub-env's own generator, as the
    # single env draws it) and writes its row of each array. A twin whose draw vectorizes
    # over episodes defines _draw_episodes(rngs, goal=None) instead, returning whole rows.
    episode_state = ("pos", "goal")

    def _draw_episode(
        self, rng: np.random.Generator, goal: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        # goal: this sub-env's goal pinned by reset(options={"goal": ...}), if any.
        return np.zeros(1, np.float32), draw_goal(rng, self.params) if goal is None else goal

    def _step_envs(self, actions: np.ndarray) -> None:
        self.pos = line_step(self.pos, actions, self.params.size, np)

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def _step_info(self) -> dict[str, np.ndarray]:
        return {"is_success": reached(self.pos, self.goal, self.params.tolerance, np)}
