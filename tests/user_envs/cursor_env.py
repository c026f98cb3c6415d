"""A 2D cursor env as a user writes one today: a plain ``gymnasium.Env`` with a goal Dict, a
batched ``compute_reward`` and ``info["is_success"]``, that never ends an episode itself
(neither terminates nor truncates) and registers no id: its episode length comes from
``--max-episode-steps`` alone."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

RADIUS = 0.1


class CursorEnv(gym.Env):
    def __init__(self):
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def _obs(self):
        cursor, goal = self.cursor.copy(), self.goal.copy()
        return {"observation": cursor, "achieved_goal": cursor.copy(), "desired_goal": goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.cursor = np.zeros(2, np.float32)
        self.goal = self.np_random.uniform(-0.8, 0.8, 2).astype(np.float32)
        return self._obs(), {"is_success": False}

    def compute_reward(self, achieved_goal, desired_goal, info):
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        return -(distance > RADIUS).astype(np.float32)

    def step(self, action):
        move = 0.1 * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.cursor = np.clip(self.cursor + move, -1.0, 1.0).astype(np.float32)
        success = bool(np.linalg.norm(self.cursor - self.goal) <= RADIUS)
        reward = float(self.compute_reward(self.cursor, self.goal, None))
        return self._obs(), reward, False, False, {"is_success": success}


class Float64Cursor(CursorEnv):
    """The same env with a common slip: float64 observations from float32 spaces."""

    def _obs(self):
        return {key: value.astype(np.float64) for key, value in super()._obs().items()}
