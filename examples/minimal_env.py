"""The smallest correct goal env and its native vector twin, in the goalenvs shape.

A point on a line moves by the action; the goal is a random point. The goal functions are
written once (a mixin both faces inherit), batched over leading dims, so HER can recompute
rewards for substituted goals. Copy this file to start a new env, then add one registry
entry in goalenvs/registration.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.core import GoalEnv, GoalVectorEnv, InfoLike

SIZE, TOLERANCE, MAX_STEPS = 1.0, 0.05, 50


class LineGoals:
    """Goal functions shared by both faces: reward 0 on success, -1 otherwise."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: InfoLike) -> np.ndarray:
        """-1 unless the goals are within TOLERANCE, batched over leading dims."""
        return -(~self.compute_terminated(achieved_goal, desired_goal, info)).astype(np.float32)

    def compute_terminated(
        self, achieved_goal: Any, desired_goal: Any, info: InfoLike
    ) -> np.ndarray:
        """Whether the goals are within TOLERANCE, batched over leading dims."""
        gap = np.asarray(achieved_goal, np.float32) - np.asarray(desired_goal, np.float32)
        return np.abs(gap)[..., 0] <= TOLERANCE


def _spaces() -> tuple[spaces.Dict, spaces.Box]:
    box = spaces.Box(-SIZE, SIZE, (1,), np.float32)
    return spaces.Dict(observation=box, achieved_goal=box, desired_goal=box), box


class LineEnv(LineGoals, GoalEnv):
    """Single env: move a point on [-1, 1] to a random goal."""

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space, self.action_space = _spaces()
        self.render_mode = render_mode
        self.pos = self.goal = np.zeros(1, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        """Starts at 0 with a goal drawn from ``self.np_random``."""
        super().reset(seed=seed)
        self.pos = np.zeros(1, np.float32)
        self.goal = self.np_random.uniform(-SIZE, SIZE, 1).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: np.ndarray) -> tuple[dict, float, bool, bool, dict]:
        """Moves by the clipped action; reward and termination come from the goal functions."""
        self.pos = np.clip(self.pos + np.clip(action, -SIZE, SIZE), -SIZE, SIZE).astype(np.float32)
        done = bool(self.compute_terminated(self.pos, self.goal, None))
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, done, False, {"is_success": done}


class LineVectorEnv(LineGoals, GoalVectorEnv):
    """Native twin: sub-env i seeded s follows LineEnv seeded s + i."""

    def __init__(
        self, num_envs: int, render_mode: str | None = None, autoreset_mode: str = "next_step"
    ) -> None:
        super().__init__(num_envs, *_spaces(), MAX_STEPS, autoreset_mode, render_mode)
        self.pos = np.zeros((num_envs, 1), np.float32)
        self.goal = np.zeros((num_envs, 1), np.float32)

    def _reset_envs(self, index: np.ndarray, options: dict[str, Any] | None) -> None:
        for i in index:
            self.pos[i] = 0.0
            self.goal[i] = self.np_randoms[i].uniform(-SIZE, SIZE, 1).astype(np.float32)

    def _step_envs(self, actions: np.ndarray) -> None:
        self.pos = np.clip(self.pos + np.clip(actions, -SIZE, SIZE), -SIZE, SIZE).astype(np.float32)

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.pos.copy(),
            "achieved_goal": self.pos.copy(),
            "desired_goal": self.goal.copy(),
        }

    def _step_info(self) -> dict[str, np.ndarray]:
        return {"is_success": self.compute_terminated(self.pos, self.goal, None)}
