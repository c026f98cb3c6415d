"""A toy vector goal env with switchable defects: the vector checker's test library.

``ToyVecReach(num_envs=8)`` is a correct batched goal env written without goalenvs'
``GoalVectorEnv`` (2-D points reaching goals, sparse reward, terminating on success,
one generator per sub-env seeded ``seed + i``, a time limit per sub-env), in any of
gymnasium's three autoreset modes. ``ToyVecReach(defect=name)`` breaks exactly one
thing, a defect seen in the field's batched envs; ``VECTOR_DEFECTS`` maps each to the
check id and severity that must catch it. ``ToyTorchVecReach`` is the same env returning
torch tensors on a device. ``TOY_VEC_ID`` registers the toy with both entry points
(``ToySingleReach``, the single env it vectorizes, and ``ToyVecReach``).
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from goalenvs.core import GoalEnv, parse_autoreset_mode

RADIUS = 0.1  # success: the point within RADIUS of its goal
SPEED = 0.1  # an action of 1 moves the point this far along an axis
LIMIT = 20  # steps per episode

# defect -> (check id that must catch it, severity, autoreset mode it runs in, what is wrong)
# fmt: off
VECTOR_DEFECTS: dict[str, tuple[str, str, str, str]] = {
    "unbatched_space": ("vector.spaces", "error", "next_step",
        "observation_space is the single space, not batched"),
    "final_obs_missing": ("vector.final_obs", "error", "same_step",
        "same-step autoreset without final_obs: the last observation is lost"),
    "final_obs_aliased": ("vector.final_obs", "error", "same_step",
        "final_obs holds views of the state the reset overwrites"),
    "declares_next_does_same": ("vector.autoreset_mode", "error", "next_step",
        "declares next-step, resets in the step that ends the episode"),
    "mode_string": ("vector.autoreset_mode", "error", "next_step",
        "metadata['autoreset_mode'] is the string 'next_step'"),
    "ignores_reset_mask": ("vector.autoreset_mode", "error", "disabled",
        "reset(options={'reset_mask': m}) resets every sub-env"),
    "reward_after_reset": ("vector.reward_match", "error", "same_step",
        "reward computed after the reset: a success pays -1"),
    "redraw_all_goals": ("vector.goal_fixed", "error", "next_step",
        "an autoreset redraws every sub-env's goal"),
    "shared_counter": ("vector.time_limit", "error", "next_step",
        "one step counter for the whole vector"),
    "counter_reset_by_any": ("vector.time_limit", "error", "next_step",
        "the step counter restarts whenever any sub-env resets"),
    "norm_axis1": ("vector.goal_batch", "error", "next_step",
        "compute_reward reduces over axis=1: (T, N, k) goals break"),
    "success_terminates_all": ("vector.terminated_match", "error", "next_step",
        "one sub-env's success terminates all"),
    "actions_scaled_by_batch": ("vector.isolation", "error", "next_step",
        "step divides the actions by the batch's largest"),
    "success_scalar": ("vector.success", "error", "next_step",
        "info['is_success'] is one number for the batch"),
    "dtype_drift": ("vector.obs_batch", "error", "next_step",
        "autoreset steps return float64 observations"),
    "obs_view": ("vector.obs_fresh", "error", "next_step",
        "obs['achieved_goal'] is a view of the positions"),
    "step_raises": ("vector.result_batch", "error", "next_step", "step raises on the 6th step"),
    "copies": ("vector.sub_envs_differ", "warning", "next_step",
        "every sub-env seeded with the same seed"),
    "unseeded_autoreset": ("vector.seed", "warning", "next_step",
        "autoresets draw from an unseeded generator"),
    "replays_first_episode": ("vector.episodes_vary", "warning", "next_step",
        "each autoreset re-seeds its sub-env with its first seed: the first episode again"),
}
# fmt: on

# Defects of the torch variant (ToyTorchVecReach).
# fmt: off
TORCH_DEFECTS: dict[str, tuple[str, str, str, str]] = {
    "numpy_rewards": ("vector.device", "error", "next_step",
        "a torch env returns its rewards as numpy"),
    "numpy_compute_reward": ("vector.device", "error", "next_step",
        "compute_reward of tensors returns numpy"),
}
# fmt: on

# Defects seen only against the single env (gym.make_vec of TOY_VEC_ID).
# fmt: off
SINGLE_DEFECTS: dict[str, tuple[str, str, str, str]] = {
    "single_drift": ("vector.single_equal", "error", "next_step",
        "the vector env moves 10% further than its single env"),
}
# fmt: on


def _observation_space() -> spaces.Dict:
    goal = spaces.Box(-0.5, 0.5, (2,), np.float32)
    return spaces.Dict(
        observation=spaces.Box(-1.0, 1.0, (4,), np.float32),
        achieved_goal=goal,
        desired_goal=goal,
    )


def _draw(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One episode's start and goal, apart by more than the success radius."""
    while True:
        position = rng.uniform(-0.3, 0.3, 2).astype(np.float32)
        goal = rng.uniform(-0.3, 0.3, 2).astype(np.float32)
        if np.linalg.norm(position - goal) > RADIUS:
            return position, goal


def reward_of(achieved_goal: Any, desired_goal: Any, axis: int = -1) -> np.ndarray:
    """-1 away from the goal, 0 within RADIUS, float32."""
    distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=axis)
    return np.where(distance > RADIUS, -1.0, 0.0).astype(np.float32)


def success_of(achieved_goal: Any, desired_goal: Any, axis: int = -1) -> np.ndarray:
    """Within RADIUS of the goal."""
    distance = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=axis)
    return distance <= RADIUS


class ToySingleReach(GoalEnv):
    """The single env ToyVecReach vectorizes: one point, one goal (``defect`` ignored)."""

    metadata = {"render_modes": [], "render_fps": 10}

    def __init__(self, defect: str | None = None) -> None:
        self.observation_space = _observation_space()
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.position = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)
        self.last_action = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "observation": np.concatenate([self.position, self.last_action]),
            "achieved_goal": self.position.copy(),
            "desired_goal": self.goal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.position, self.goal = _draw(self.np_random)
        self.last_action = np.zeros(2, np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple:
        action = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.position = np.clip(self.position + SPEED * action, -0.5, 0.5).astype(np.float32)
        self.last_action = action
        obs = self._obs()
        success = bool(success_of(obs["achieved_goal"], obs["desired_goal"]))
        reward = float(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None))
        return obs, reward, success, False, {"is_success": success}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return reward_of(achieved_goal, desired_goal)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return success_of(achieved_goal, desired_goal)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.zeros(np.shape(achieved_goal)[:-1], bool)


class ToyVecReach(gym.vector.VectorEnv):
    """``num_envs`` points reaching their goals, stepped as one batch (see the module)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self,
        num_envs: int = 8,
        autoreset_mode: str | AutoresetMode = "next_step",
        defect: str | None = None,
        max_episode_steps: int = LIMIT,
        random_start_len: bool = False,
    ) -> None:
        known = {**VECTOR_DEFECTS, **TORCH_DEFECTS, **SINGLE_DEFECTS}
        if defect is not None and defect not in known:
            raise ValueError(f"defect={defect!r} is not one of {sorted(known)}")
        self.num_envs = num_envs
        self.defect = defect
        self.mode = parse_autoreset_mode(autoreset_mode)
        declared: Any = self.mode
        if defect == "declares_next_does_same":
            self.mode, declared = AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP
        if defect == "mode_string":
            declared = "next_step"
        self.metadata = {"autoreset_mode": declared}
        self.max_episode_steps = max_episode_steps
        self.random_start_len = random_start_len
        self.single_observation_space = _observation_space()
        self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        if defect == "unbatched_space":
            self.observation_space = self.single_observation_space
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.rngs = [seeding.np_random(None)[0] for _ in range(num_envs)]
        self.seeds: list[int | None] = [None] * num_envs  # the seeds reset was given
        self.position = np.zeros((num_envs, 2), np.float32)
        self.goal = np.zeros((num_envs, 2), np.float32)
        self.last_action = np.zeros((num_envs, 2), np.float32)
        self.elapsed = np.zeros(num_envs, np.int64)
        self.shared_elapsed = 0
        self.needs_reset = np.zeros(num_envs, bool)
        self.steps_taken = 0

    # ---- goal functions
    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        axis = 1 if self.defect == "norm_axis1" else -1
        return reward_of(achieved_goal, desired_goal, axis)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        axis = 1 if self.defect == "norm_axis1" else -1
        return success_of(achieved_goal, desired_goal, axis)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        return np.zeros(np.shape(achieved_goal)[:-1], bool)

    # ---- episodes
    def _restart(self, rows: np.ndarray) -> None:
        for i in rows.tolist():
            rng = self.rngs[i]
            if self.defect == "unseeded_autoreset" and self.steps_taken > 0:
                rng = np.random.default_rng()
            if self.defect == "replays_first_episode":
                rng = self.rngs[i] = seeding.np_random(self.seeds[i])[0]
            position, goal = _draw(rng)
            # In place: a view of these rows sees the new episode (final_obs_aliased).
            self.position[i] = position
            self.goal[i] = goal
            self.last_action[i] = 0.0
            self.elapsed[i] = 0
        if self.defect == "redraw_all_goals" and self.steps_taken > 0 and len(rows):
            for i in range(self.num_envs):
                self.goal[i] = _draw(self.rngs[i])[1]
        if self.defect == "counter_reset_by_any" and len(rows):
            self.elapsed[:] = 0

    def _obs(self) -> dict[str, np.ndarray]:
        achieved = self.position if self.defect == "obs_view" else self.position.copy()
        return {
            "observation": np.concatenate([self.position, self.last_action], axis=1),
            "achieved_goal": achieved,
            "desired_goal": self.goal.copy(),
        }

    def _info(self, success: np.ndarray) -> dict[str, Any]:
        value = np.asarray(success.any()) if self.defect == "success_scalar" else success.copy()
        return {"is_success": value, "_is_success": np.ones(self.num_envs, bool)}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        mask = None if options is None else options.get("reset_mask")
        if seed is not None:
            seeds = (
                [seed] * self.num_envs
                if self.defect == "copies"
                else [seed + i for i in range(self.num_envs)]
            )
            self.rngs = [seeding.np_random(s)[0] for s in seeds]
            self.seeds = seeds
            self.steps_taken = 0
        if mask is None or self.defect == "ignores_reset_mask":
            rows = np.arange(self.num_envs)
        else:
            rows = np.flatnonzero(np.asarray(mask, bool))
        self._restart(rows)
        self.needs_reset[rows] = False
        if mask is None:
            self.shared_elapsed = 0
            if self.random_start_len:
                # rsl_rl's init_at_random_ep_len: first episodes start part-way through.
                self.elapsed = np.array(
                    [rng.integers(0, self.max_episode_steps) for rng in self.rngs], np.int64
                )
        obs = self._obs()
        return obs, self._info(success_of(obs["achieved_goal"], obs["desired_goal"]))

    def step(self, actions: Any) -> tuple:
        self.steps_taken += 1
        if self.defect == "step_raises" and self.steps_taken == 6:
            raise RuntimeError("the simulator lost its state")
        actions = np.clip(np.asarray(actions, np.float32), -1.0, 1.0)
        if self.defect == "actions_scaled_by_batch":
            actions = actions / max(1.0, float(np.abs(actions).max()) / 0.5)
        restarted = np.zeros(self.num_envs, bool)
        if self.mode == AutoresetMode.NEXT_STEP and self.needs_reset.any():
            restarted = self.needs_reset.copy()
            self._restart(np.flatnonzero(restarted))
        moving = ~restarted
        speed = SPEED * (1.1 if self.defect == "single_drift" else 1.0)
        self.position[moving] = np.clip(
            self.position[moving] + speed * actions[moving], -0.5, 0.5
        ).astype(np.float32)
        self.last_action[moving] = actions[moving]
        self.elapsed[moving] += 1
        self.shared_elapsed += 1
        obs = self._obs()
        reward = reward_of(obs["achieved_goal"], obs["desired_goal"])
        success = success_of(obs["achieved_goal"], obs["desired_goal"])
        terminated = success.copy()
        if self.defect == "success_terminates_all":
            terminated[:] = success.any()
        if self.defect == "shared_counter":
            truncated = np.full(self.num_envs, self.shared_elapsed >= self.max_episode_steps)
            if truncated.any():
                self.shared_elapsed = 0
        else:
            truncated = self.elapsed >= self.max_episode_steps
        reward[restarted], terminated[restarted], truncated[restarted] = 0.0, False, False
        info = self._info(success)
        done = terminated | truncated
        if self.mode == AutoresetMode.SAME_STEP and done.any():
            rows = np.flatnonzero(done)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in rows.tolist():
                if self.defect == "final_obs_aliased":
                    final_obs[i] = {
                        "observation": obs["observation"][i].copy(),
                        "achieved_goal": self.position[i],  # views: the reset overwrites them
                        "desired_goal": self.goal[i],
                    }
                else:
                    final_obs[i] = {k: v[i].copy() for k, v in obs.items()}
            final_info = {
                "is_success": np.where(done, success, False),
                "_is_success": done.copy(),
            }
            self._restart(rows)
            new = self._obs()
            if self.defect == "reward_after_reset":
                reward = reward_of(new["achieved_goal"], new["desired_goal"])
            obs = new
            # As gymnasium's SyncVectorEnv: an ended row's info is its new episode's.
            info = self._info(np.where(done, False, success))
            if self.defect != "final_obs_missing":
                info["final_obs"], info["_final_obs"] = final_obs, done.copy()
                info["final_info"], info["_final_info"] = final_info, done.copy()
        elif self.mode == AutoresetMode.NEXT_STEP:
            self.needs_reset = done
        if self.defect == "dtype_drift" and restarted.any():
            obs = {k: v.astype(np.float64) for k, v in obs.items()}
        return obs, reward, terminated, truncated, info


class ToyTorchVecReach(ToyVecReach):
    """ToyVecReach returning torch tensors on ``device`` (results, masks, goal functions)."""

    def __init__(self, *args: Any, device: str = "cpu", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        import torch

        self.device = torch.device(device)

    def _tensor(self, value: Any) -> Any:
        import torch

        if isinstance(value, np.ndarray) and value.dtype != object:
            return torch.as_tensor(value, device=self.device)
        if isinstance(value, dict):
            return {k: self._tensor(v) for k, v in value.items()}
        if isinstance(value, np.ndarray):  # final_obs: an object array of dicts
            out = np.full(len(value), None, dtype=object)
            for i, item in enumerate(value):
                out[i] = None if item is None else self._tensor(item)
            return out
        return value

    def _numpy(self, value: Any) -> Any:
        return value.cpu().numpy() if hasattr(value, "cpu") else np.asarray(value)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        if options and "reset_mask" in options:
            options = {**options, "reset_mask": self._numpy(options["reset_mask"])}
        obs, info = super().reset(seed=seed, options=options)
        return self._tensor(obs), self._tensor(info)

    def step(self, actions: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(self._numpy(actions))
        rewards = reward if self.defect == "numpy_rewards" else self._tensor(reward)
        return (
            self._tensor(obs),
            rewards,
            self._tensor(terminated),
            self._tensor(truncated),
            self._tensor(info),
        )

    def _goal_fn(self, fn: Any, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        result = fn(self._numpy(achieved_goal), self._numpy(desired_goal), None)
        return result if self.defect == "numpy_compute_reward" else self._tensor(np.asarray(result))

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return self._goal_fn(super().compute_reward, achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return self._goal_fn(super().compute_terminated, achieved_goal, desired_goal, info)

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return self._goal_fn(super().compute_truncated, achieved_goal, desired_goal, info)


class HangingVecReach(ToyVecReach):
    """ToyVecReach whose 4th step never returns (it sleeps far past any timeout)."""

    def step(self, actions: Any) -> tuple:
        if self.steps_taken == 3:
            time.sleep(60)
        return super().step(actions)


def make(defect: str | None = None, num_envs: int = 8, **kwargs: Any) -> ToyVecReach:
    """The toy with ``defect``, in the autoreset mode the defect runs in."""
    table = {**VECTOR_DEFECTS, **TORCH_DEFECTS, **SINGLE_DEFECTS}
    if defect is not None:
        kwargs.setdefault("autoreset_mode", table[defect][2])
    cls = ToyTorchVecReach if defect in TORCH_DEFECTS else ToyVecReach
    return cls(num_envs=num_envs, defect=defect, **kwargs)


def make_raising(**kwargs: Any) -> ToyVecReach:
    """A factory that raises while it builds the env."""
    raise RuntimeError("no simulator license found")


TOY_VEC_ID = "checker_test/ToyVecReach-v0"
if TOY_VEC_ID not in gym.registry:
    gym.register(
        TOY_VEC_ID,
        entry_point=ToySingleReach,
        vector_entry_point=ToyVecReach,
        max_episode_steps=LIMIT,
    )
TOY_SINGLE_ID = "checker_test/ToySingleReach-v0"  # no vector entry point
if TOY_SINGLE_ID not in gym.registry:
    gym.register(TOY_SINGLE_ID, entry_point=ToySingleReach, max_episode_steps=LIMIT)
