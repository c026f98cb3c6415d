"""A goal env as many users write one, copied into a user's folder by the tests that play
and train it: its constructor takes no ``render_mode`` and it offers no render modes, an
episode ends on its own after ``HORIZON`` steps (so the ``module:Class`` forms end without
a registered time limit), a factory has no metadata, and the module registers its id."""

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "noframes/Reach-v0"
HORIZON = 10


class Reach(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self):
        box = spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.observation_space = spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
        self.action_space = box

    def _obs(self):
        position, goal = self.position.copy(), self.goal.copy()
        return {"observation": position, "achieved_goal": position.copy(), "desired_goal": goal}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        self.position = np.zeros(1, np.float32)
        self.goal = self.np_random.uniform(-1, 1, 1).astype(np.float32)
        return self._obs(), {"is_success": False}

    def compute_reward(self, achieved_goal, desired_goal, info):
        reached = self.compute_terminated(achieved_goal, desired_goal, info)
        return np.where(reached, 0.0, -1.0).astype(np.float32)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        gap = np.abs(np.asarray(achieved_goal) - np.asarray(desired_goal))[..., 0]
        return gap <= 0.1

    def step(self, action):
        move = 0.25 * np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + move, -1.0, 1.0)
        self.steps += 1
        success = bool(self.compute_terminated(self.position, self.goal, None))
        reward = float(self.compute_reward(self.position, self.goal, None))
        return self._obs(), reward, success, self.steps >= HORIZON, {"is_success": success}


class DrawsNothing(Reach):
    metadata = {"render_modes": ["rgb_array"]}  # claims frames, takes no render_mode


def make_reach():
    return Reach()


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=Reach, max_episode_steps=HORIZON)
