"""One sub-env of a device twin seen as a plain numpy gymnasium env.

The goal-env checker drives single numpy envs; :class:`SubEnvView` presents the one
sub-env of a device twin through that API, converting at the edges only, so every check
runs the twin's own torch code::

    view = sub_env_view("goalenvs/PointMaze-v0", device="cpu")
    report = check_goal_env(view, factory=lambda **kw: sub_env_view(
        "goalenvs/PointMaze-v0", device="cpu", **kw))
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from goalenvs.core import GoalVectorEnv, InfoLike
from goalenvs.core.types import DeviceLike


class SubEnvView(gym.Env):
    """The single sub-env of ``vector_env`` (``num_envs=1``) as a numpy gymnasium env.

    Actions go in and observations, rewards, flags and info values come out as numpy
    values and Python scalars; the goal functions run on the twin's device and return
    numpy. The vector env should run with ``autoreset_mode="disabled"``.
    """

    def __init__(self, vector_env: gym.vector.VectorEnv) -> None:
        if not isinstance(vector_env, GoalVectorEnv) or vector_env.num_envs != 1:
            raise ValueError(
                f"vector_env must be a GoalVectorEnv with num_envs=1, got {vector_env!r}"
            )
        self.vector_env = vector_env
        self.observation_space = vector_env.single_observation_space
        self.action_space = vector_env.single_action_space
        self.render_mode = vector_env.render_mode
        # the twin's time limit, declared as the twin declares it (goalenvs.core.episode_length)
        self.max_episode_steps = vector_env.max_episode_steps
        self.metadata = {
            "render_modes": list(vector_env.metadata.get("render_modes", [])),
            "render_fps": vector_env.metadata.get("render_fps", 30),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Resets the sub-env (``seed`` seeds the twin's device generator)."""
        super().reset(seed=seed)
        obs, info = self.vector_env.reset(seed=seed, options=options)
        return self._obs(obs), self._info(info)

    def step(
        self, action: object
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """One step of the sub-env with ``action`` (the single action space's shape)."""
        obs, reward, terminated, truncated, info = self.vector_env.step(np.asarray(action)[None])
        return (
            self._obs(obs),
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            self._info(info),
        )

    def compute_reward(
        self, achieved_goal: object, desired_goal: object, info: InfoLike
    ) -> np.ndarray:
        """The twin's ``compute_reward`` run on its device, returned as numpy."""
        return self._on_device("compute_reward", achieved_goal, desired_goal, info)

    def compute_terminated(
        self, achieved_goal: object, desired_goal: object, info: InfoLike
    ) -> np.ndarray:
        """The twin's ``compute_terminated`` run on its device, returned as numpy."""
        return self._on_device("compute_terminated", achieved_goal, desired_goal, info)

    def compute_truncated(
        self, achieved_goal: object, desired_goal: object, info: InfoLike
    ) -> np.ndarray:
        """The twin's ``compute_truncated`` run on its device, returned as numpy."""
        return self._on_device("compute_truncated", achieved_goal, desired_goal, info)

    def render(self) -> np.ndarray | None:
        """The twin's frame of its sub-env 0."""
        # A twin draws its sub-env 0 alone: one (H, W, 3) array, not gymnasium's tuple of
        # every sub-env's frames.
        frame = self.vector_env.render()
        return None if frame is None else np.asarray(frame)

    def close(self) -> None:
        """Closes the twin."""
        self.vector_env.close()

    def _obs(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        return {key: self.vector_env.to_numpy(value[0]) for key, value in obs.items()}

    def _info(self, info: dict[str, Any]) -> dict[str, object]:
        # The sub-env's entry of every per-env info array (``is_success``, Parking's
        # ``crashed``, ...) as a Python scalar; gymnasium's ``_key`` masks are dropped.
        return {
            key: self.vector_env.to_numpy(value[0]).item()
            for key, value in info.items()
            if not key.startswith("_") and key not in ("final_obs", "final_info")
        }

    def _on_device(
        self, name: str, achieved_goal: object, desired_goal: object, info: object
    ) -> Any:
        twin = self.vector_env
        if twin.device is not None:
            # Goals the caller passes as numpy become tensors on the device, as written:
            # a float64 goal stays float64, so the twin sees what a numpy env would.
            achieved_goal = twin.xp.as_tensor(np.asarray(achieved_goal), device=twin.device)
            desired_goal = twin.xp.as_tensor(np.asarray(desired_goal), device=twin.device)
        result = getattr(twin, name)(achieved_goal, desired_goal, info)
        return twin.to_numpy(result)


def sub_env_view(env_id: str, device: DeviceLike = "cpu", **kwargs: Any) -> SubEnvView:
    """``gym.make_vec(env_id, num_envs=1, device=device, autoreset_mode="disabled",
    **kwargs)`` seen as one numpy env (:class:`SubEnvView`), for the checker."""
    vector_env = gym.make_vec(
        env_id, num_envs=1, device=device, autoreset_mode="disabled", **kwargs
    )
    return SubEnvView(vector_env)
