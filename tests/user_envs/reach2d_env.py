"""A 2D reach env as a user writes one from the docs (plain ``gymnasium.Env``, a goal
Dict, no ``render_mode`` argument, episodes that the env truncates itself after
``HORIZON`` steps), and the ways users break such an env: each factory below builds one
with a single defect. ``goalenvs check`` and ``goalenvs train`` must agree on every one."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

HORIZON = 20
RADIUS = 0.15


class Reach2D(gym.Env):
    def __init__(self, defect=None):
        self.defect = defect
        box = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            observation=spaces.Box(-1.0, 1.0, (2,), np.float32),
            achieved_goal=box,
            desired_goal=box,
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def compute_reward(self, achieved_goal, desired_goal, info):
        distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1)
        if self.defect == "scalar_reward":  # one value for the whole batch
            return -float(np.mean(distance) > RADIUS)
        return -(distance > RADIUS).astype(np.float32)

    def _obs(self):
        position, goal = self.position.copy(), self.goal.copy()
        return {"observation": position, "achieved_goal": position.copy(), "desired_goal": goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.position = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self._obs(), {}

    def step(self, action):
        move = 0.2 * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + move, -1.0, 1.0).astype(np.float32)
        self.t += 1
        obs = self._obs()
        success = bool(np.linalg.norm(self.position - self.goal) <= RADIUS)
        info = {"is_success": success}
        if self.defect == "no_success":
            info = {}
        elif self.defect == "array_success":
            info = {"is_success": np.array([success])}
        reward = self.compute_reward(obs["achieved_goal"], obs["desired_goal"], info)
        reward = float(np.asarray(reward).reshape(-1)[0])
        truncated = self.t >= HORIZON and self.defect != "endless"
        return obs, reward, False, truncated, info


def scalar_reward():
    return Reach2D("scalar_reward")


def no_success():
    return Reach2D("no_success")


def array_success():
    return Reach2D("array_success")


def endless():
    return Reach2D("endless")
