"""Goal envs written the way a new user writes one from the README, broken the ways
users' envs break: the checker's user-style test library.

``Cursor(defect=None)`` is a plain ``gymnasium.Env``: a 2-D cursor reaching a goal,
paid 0 within ``RADIUS`` and -1 beyond, never terminating (``make`` adds a ``TimeLimit``);
each defect of ``USER_DEFECTS`` breaks one thing. Unlike ``broken_envs.ToyReach``, the
probe parks at the goal and the radius is small, so a wrong ``is_success`` disagrees
with the reward only on the few steps around the line. ``PushLike()`` is a correct
look-alike of the Fetch object tasks (no single action moves the block while the cursor
is away) and must stay free of warnings.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import TimeLimit

RADIUS = 0.05  # success and the goal reward: the cursor within RADIUS of the goal
SMALL_RADIUS = 0.02  # what the "success_radius_small" defect judges is_success on
SPEED = 0.1  # an action of 1 moves the cursor this far along an axis
EPISODE_STEPS = 50  # the TimeLimit make() adds
CONTACT = 0.1  # PushLike: the cursor moves the block within this distance

# defect -> (check id that must catch it, its severity, what is wrong)
# fmt: off
USER_DEFECTS: dict[str, tuple[str, str, str]] = {
    "success_radius_small": ("success.near_goal", "error",
        "is_success within 0.02, the reward within 0.05, no termination"),
    "success_late": ("success.near_goal", "error",
        "is_success judged on the distance before the step (one step late)"),
    "obs_lags": ("goal.achieved_current", "warning",
        "the observation is built before the state update; reward and is_success after it"),
}
# fmt: on
# What else a defect breaks, truly: a lagging observation makes the reward (paid for the
# state after the step) differ from compute_reward of the goals returned, near the goal.
CONSEQUENCES: dict[str, set[str]] = {"obs_lags": {"reward.step_match"}}


def _distance(achieved_goal: Any, desired_goal: Any) -> np.ndarray:
    return np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)


class Cursor(gym.Env):
    """A cursor in [-1, 1]^2 moved by ``SPEED * action`` toward a goal (see the module)."""

    def __init__(self, defect: str | None = None) -> None:
        if defect is not None and defect not in USER_DEFECTS:
            raise ValueError(
                f"defect={defect!r} is not valid; expected one of {list(USER_DEFECTS)}"
            )
        self.defect = defect
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            observation=spaces.Box(-1.0, 1.0, (2,), np.float32), achieved_goal=box, desired_goal=box
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.position = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return -(_distance(achieved_goal, desired_goal) > RADIUS).astype(np.float32)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.zeros(np.shape(achieved_goal)[:-1], bool)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": self.position.copy(),
            "achieved_goal": self.position.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple:
        before = float(_distance(self.position, self.goal))
        stale = self._obs()  # "obs_lags" returns this
        move = SPEED * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + move, -1.0, 1.0).astype(np.float32)
        obs = self._obs()
        distance = float(_distance(self.position, self.goal))
        success = distance <= RADIUS
        if self.defect == "success_radius_small":
            success = distance <= SMALL_RADIUS
        elif self.defect == "success_late":
            success = before <= RADIUS
        info = {"is_success": bool(success)}
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return stale if self.defect == "obs_lags" else obs, reward, False, False, info


class PushLike(Cursor):
    """A cursor pushing a block toward the goal: the block (the achieved goal) moves with
    the cursor's step only while the cursor is within ``CONTACT`` of it."""

    def __init__(self) -> None:
        super().__init__()
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            observation=spaces.Box(-1.0, 1.0, (4,), np.float32), achieved_goal=box, desired_goal=box
        )
        self.block = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.concatenate([self.position, self.block]),
            "achieved_goal": self.block.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        gym.Env.reset(self, seed=seed)
        self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.block = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple:
        move = SPEED * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + move, -1.0, 1.0).astype(np.float32)
        if float(_distance(self.position, self.block)) <= CONTACT:
            self.block = np.clip(self.block + move, -1.0, 1.0).astype(np.float32)
        obs = self._obs()
        info = {"is_success": bool(_distance(self.block, self.goal) <= RADIUS)}
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
        return obs, reward, False, False, info


def make(defect: str | None = None) -> gym.Env:
    """The cursor with ``defect`` under the time limit ``--max-episode-steps 50`` adds."""
    return TimeLimit(Cursor(defect), EPISODE_STEPS)


def make_push_like() -> gym.Env:
    """The correct Push-like look-alike under the same time limit."""
    return TimeLimit(PushLike(), EPISODE_STEPS)
