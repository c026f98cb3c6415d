"""Goal envs for the env-worker and replay-device tests, built by file path (in each
worker process too)."""

from __future__ import annotations

import os
import signal
from typing import Any

import numpy as np

from goalenvs.envs.point_reach import PointReachEnv


class FailingReach(PointReachEnv):
    """PointReach whose step raises (``fail_after`` steps in) or kills its own process
    (``die_after``), as a simulator's bug or segfault would."""

    def __init__(self, fail_after: int | None = None, die_after: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.fail_after, self.die_after, self.steps = fail_after, die_after, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.fail_after is not None and self.steps > self.fail_after:
            raise FloatingPointError(f"the simulator diverged at step {self.steps}")
        if self.die_after is not None and self.steps > self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


class NumpyOnlyReach(PointReachEnv):
    """PointReach whose goal functions refuse anything but numpy arrays, as a third-party
    env's numpy code would fail on tensors."""

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        for name, value in (("achieved_goal", achieved_goal), ("desired_goal", desired_goal)):
            if not isinstance(value, np.ndarray):
                raise TypeError(f"{name} must be a numpy array, got {type(value).__name__}")
        return super().compute_reward(achieved_goal, desired_goal, info)


class StepCounter(PointReachEnv):
    """PointReach whose achieved goal is the step count within the episode (1, 2, ...),
    whatever the action, and whose goal is never reached: the last observation of an
    episode is told apart from the next episode's first (0) by its value alone."""

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        obs, info = super().reset(seed=seed, options=options)
        self.count = 0
        return self._counted(obs), info

    def step(self, action: Any) -> Any:
        obs, reward, _, truncated, info = super().step(action)
        self.count += 1
        return self._counted(obs), reward, False, truncated, info

    def _counted(self, obs: dict) -> dict:
        counted = {key: value.copy() for key, value in obs.items()}
        counted["achieved_goal"][:] = self.count / 100.0
        counted["desired_goal"][:] = 0.9
        return counted

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return np.full(np.shape(achieved_goal)[:-1], -1.0, np.float32)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return np.zeros(np.shape(achieved_goal)[:-1], bool)
