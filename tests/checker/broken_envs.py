"""A toy goal env with switchable defects: the checker's test library.

``ToyReach()`` is a correct goal env (a 2-D point reaching a goal, sparse reward,
terminating on success). ``ToyReach(defect=name)`` breaks exactly one thing; ``DEFECTS``
maps each defect to the check id and severity that must catch it. The correct twin of
every defect is ``ToyReach()`` with the same seed: the defect is the only difference.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from goalenvs.core import GoalEnv, goal_arrays, info_values

# defect -> (check id that must catch it, its severity, category, what is wrong)
# fmt: off
DEFECTS: dict[str, tuple[str, str, str, str]] = {
    "box_obs": ("space.dict", "error", "spaces", "observation space is a flat Box"),
    "missing_desired_key": ("space.dict", "error", "spaces", "Dict lacks desired_goal"),
    "goal_dtype_mismatch": ("space.goal_match", "error", "spaces",
        "desired_goal space float64, achieved float32"),
    "goal_bounds_differ": ("space.goal_bounds", "warning", "spaces",
        "achieved_goal space has wider bounds"),
    "old_reset_api": ("api.reset", "error", "api", "reset returns obs only (gym < 0.26)"),
    "step_four_values": ("api.step", "error", "api", "step returns 4 values (done)"),
    "step_raises": ("api.step", "error", "api", "step raises on the 6th step"),
    "goal_out_of_space": ("api.obs_in_space", "error", "api",
        "desired goals drawn outside the goal space"),
    "float64_obs": ("api.obs_dtype", "error", "api", "float64 observations in a float32 space"),
    "aliased_obs": ("api.obs_fresh", "error", "api", "achieved_goal is a view of env state"),
    "hang_step": ("api.timeout", "error", "api", "step hangs on the 4th step"),
    "no_compute_reward": ("reward.present", "error", "reward", "no compute_reward"),
    "two_arg_reward": ("reward.signature", "error", "reward", "compute_reward(ag, dg), no info"),
    "not_vectorized": ("reward.batch", "error", "reward", "norm without axis: one value per batch"),
    "no_leading_dims": ("reward.leading_dims", "error", "reward",
        "norm over axis=1: only (B, goal) batches"),
    "reward_list": ("reward.type", "error", "reward", "batch reward is a Python list"),
    "reward_column": ("reward.shape", "error", "reward", "batch reward has shape (B, 1)"),
    "reward_float64": ("reward.dtype", "warning", "reward", "reward is float64"),
    "reward_nan_at_goal": ("reward.finite", "error", "reward", "sqrt(d^2 - eps) is NaN at goal"),
    "info_as_dict": ("reward.info_forms", "error", "reward", "info.get(...) on a list of infos"),
    "info_none_fails": ("reward.info_forms", "error", "reward", "iterates info, fails on None"),
    "info_required": ("reward.info_forms", "error", "reward",
        "info['penalty'] required: SB3's [{}] * B crashes"),
    "info_key_missing": ("reward.step_match", "error", "reward",
        "reads info['penalty'], which step never sets"),
    "step_extra_penalty": ("reward.step_match", "error", "reward",
        "step pays an action penalty outside compute_reward"),
    "wrapper_rescales": ("reward.step_match", "error", "wrappers",
        "an observation wrapper rescales the goals"),
    "reward_mutates": ("reward.no_mutation", "error", "reward",
        "subtracts in place from its input"),
    "reward_noise": ("reward.deterministic", "error", "reward", "adds random noise"),
    "reward_inverted": ("reward.success_at_goal", "error", "relabeling",
        "pays -1 at the goal and 0 away from it"),
    "reward_reads_self_goal": ("reward.success_at_goal", "error", "relabeling",
        "uses self.goal, not desired_goal"),
    "reward_constant": ("reward.goal_dependent", "error", "relabeling", "always -1"),
    "terminated_mismatch": ("terminated.step_match", "error", "termination",
        "compute_terminated always False"),
    "terminated_not_vectorized": ("terminated.batch", "error", "termination",
        "compute_terminated returns one bool"),
    "no_compute_terminated": ("terminated.present", "warning", "termination",
        "ends on success, no compute_terminated"),
    "truncated_not_vectorized": ("truncated.batch", "error", "termination",
        "compute_truncated returns one bool"),
    "truncated_ignored": ("truncated.step_match", "error", "termination",
        "compute_truncated says so, step does not"),
    "success_key": ("success.present", "error", "is_success", "info['success'] instead"),
    "success_float": ("success.bool", "error", "is_success", "is_success is a distance"),
    "success_inverted": ("success.consistent", "error", "is_success", "is_success negated"),
    "success_always": ("success.consistent", "error", "is_success",
        "is_success True on every step, reward -1 away from the goal"),
    "goal_moves": ("goal.fixed", "warning", "episodes", "desired goal drifts every step"),
    "achieved_goal_lags": ("goal.achieved_current", "warning", "episodes",
        "achieved_goal read before the move"),
    "global_rng": ("seed.reset", "error", "seeding", "goal drawn from np.random"),
    "noisy_dynamics": ("seed.rollout", "error", "seeding", "np.random noise in step"),
    "fixed_goal": ("seed.goal_varies", "warning", "seeding", "the goal never changes"),
    "render_float": ("render.modes", "error", "render", "rgb_array frame is float32 in [0, 1]"),
    "goal_in_obs": ("obs.goal_visible", "error", "observation",
        "desired goal copied into obs['observation']"),
    "success_radius_differs": ("success.near_goal", "error", "near the goal",
        "is_success within 0.05, reward within 0.2"),
    "terminates_differently": ("terminated.at_goal", "error", "near the goal",
        "step terminates within 0.2, compute_terminated within 0.05"),
    "never_ends": ("episode.ends", "error", "episodes", "no truncation, no time limit"),
    "length_varies": ("episode.length", "error", "episodes",
        "truncates itself after 20 or 30 steps, declares no length"),
    "length_undeclared": ("episode.length_declared", "warning", "episodes",
        "truncates itself after 30 steps, declares no length"),
    "starts_solved": ("episode.start_solved", "warning", "episodes", "the goal is the start"),
    "achieved_frozen": ("goal.achieved_moves", "warning", "episodes",
        "achieved_goal stays at the start while the point moves"),
    "info_reused": ("api.info_fresh", "warning", "api", "one info dict, mutated every step"),
}
# fmt: on

SUCCESS_RADIUS = 0.2
# The seeding defects draw from this generator, which reset(seed=...) never reseeds.
_UNSEEDED = np.random.default_rng()
MAX_STEPS = 30


class ToyReach(GoalEnv):
    """A point in [-1, 1]^2 moves by 0.1 * action toward a goal drawn in [-0.5, 0.5]^2.

    Reward -1 until within ``SUCCESS_RADIUS`` of the goal, 0 there; the episode
    terminates on success and truncates after ``MAX_STEPS`` steps. With ``penalty=True``
    leaving the box ``[-penalty_box, penalty_box]^2`` costs 0.5, passed through
    ``info["penalty"]`` (a correct info-dependent reward).
    """

    metadata = {"render_modes": ["rgb_array", "ansi"], "render_fps": 10}

    def __init__(
        self,
        defect: str | None = None,
        penalty: bool = False,
        render_mode: str | None = None,
        penalty_box: float = 0.3,
        infinite_obs: bool = False,
        terminate_every: int | None = None,
    ) -> None:
        if defect is not None and defect not in DEFECTS:
            raise ValueError(f"defect={defect!r} is not valid; expected one of {list(DEFECTS)}")
        self.defect = defect
        self.penalty = penalty or defect in ("info_key_missing", "info_required")
        self.penalty_box = penalty_box
        self.render_mode = render_mode
        goal = spaces.Box(-1.0, 1.0, (2,), np.float32)
        achieved = goal
        observation = spaces.Box(-1.0, 1.0, (4 if defect == "goal_in_obs" else 2,), np.float32)
        if defect == "goal_bounds_differ":
            achieved = spaces.Box(-2.0, 2.0, (2,), np.float32)
        desired = (
            spaces.Box(-1.0, 1.0, (2,), np.float64) if defect == "goal_dtype_mismatch" else goal
        )
        if defect == "box_obs":
            self.observation_space = spaces.Box(-1.0, 1.0, (6,), np.float32)
        elif defect == "missing_desired_key":
            self.observation_space = spaces.Dict(
                {"observation": goal, "achieved_goal": achieved, "goal": desired}
            )
        else:
            self.observation_space = spaces.Dict(
                {"observation": observation, "achieved_goal": achieved, "desired_goal": desired}
            )
        if infinite_obs:  # as every Fetch and panda-gym env: correct, gymnasium remarks on it
            unbounded = spaces.Box(-np.inf, np.inf, (2,), np.float32)
            self.observation_space = spaces.Dict(
                {"observation": unbounded, "achieved_goal": achieved, "desired_goal": desired}
            )
        self.terminate_every = terminate_every
        # the episode length it declares (goalenvs.core.episode_length reads it)
        self.max_episode_steps = (
            None if defect in ("never_ends", "length_undeclared", "length_varies") else MAX_STEPS
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros(2, np.float32)
        self.prev_pos = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)
        self.t = 0
        self.successes = 0
        self._shared_info: dict[str, Any] = {}
        if defect == "no_compute_reward":
            self.compute_reward = None  # not callable: the attribute exists but is no method
        if defect == "no_compute_terminated":
            self.compute_terminated = None
        if defect == "two_arg_reward":
            self.compute_reward = self._two_arg_reward

    # ---- goal functions
    def _two_arg_reward(self, achieved_goal: Any, desired_goal: Any) -> np.ndarray:
        return self.compute_reward_impl(achieved_goal, desired_goal, None)

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        return self.compute_reward_impl(achieved_goal, desired_goal, info)

    def compute_reward_impl(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        d = self.defect
        if d == "reward_mutates":
            achieved_goal -= desired_goal
            return -(np.linalg.norm(achieved_goal, axis=-1) > SUCCESS_RADIUS).astype(np.float32)
        shape, ag, dg = goal_arrays(achieved_goal, desired_goal)
        if d == "reward_reads_self_goal":
            dg = self.goal
        if d == "not_vectorized":
            return np.float32(-float(np.linalg.norm(ag - dg) > SUCCESS_RADIUS))
        if d == "no_leading_dims":
            dist = np.linalg.norm(ag - dg) if ag.ndim == 1 else np.linalg.norm(ag - dg, axis=1)
        else:
            dist = np.linalg.norm(ag - dg, axis=-1)
        if d == "reward_nan_at_goal":
            return -np.sqrt(dist**2 - 1e-9).astype(np.float32)
        if d == "reward_constant":
            return np.full(shape, -1.0, np.float32)
        reached = dist <= SUCCESS_RADIUS
        reward = np.where(reached, 0.0, -1.0) if d != "reward_inverted" else -reached.astype(float)
        reward = np.asarray(reward, np.float32)
        if d == "reward_noise":
            reward = reward + _UNSEEDED.normal(0, 0.01, shape).astype(np.float32)
        if d == "info_as_dict":
            reward = reward + np.float32(info.get("penalty", 0.0))
        elif d == "info_none_fails":
            items = [info] if isinstance(info, dict) else list(info)
            reward = reward + np.asarray(
                [i.get("penalty", 0.0) for i in items], np.float32
            ).reshape(shape)
        elif self.penalty:
            reward = reward + self._penalty(info, shape)
        if d == "reward_list" and shape:
            return reward.tolist()
        if d == "reward_column" and shape:
            return reward.reshape(*shape, 1)
        if d == "reward_float64":
            return reward.astype(np.float64)
        return reward

    def _penalty(self, info: Any, shape: tuple[int, ...]) -> np.ndarray:
        d = self.defect
        if d == "info_required":  # every form works, as long as each info has the key
            if isinstance(info, dict):
                return np.broadcast_to(np.asarray(info["penalty"], np.float32), shape)
            items = np.asarray(info, dtype=object).reshape(-1)
            return np.asarray([i["penalty"] for i in items], np.float32).reshape(shape)
        if d == "info_key_missing":
            items = [info] if isinstance(info, dict) else list(info)
            return np.asarray([i["penalty"] for i in items], np.float32).reshape(shape)
        return info_values(info, "penalty", shape, 0.0, np.float32)

    def compute_terminated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        shape, ag, dg = goal_arrays(achieved_goal, desired_goal)
        if self.defect in ("terminated_mismatch", "never_ends"):
            return np.zeros(shape, bool)
        if self.defect == "terminated_not_vectorized":
            return bool(np.linalg.norm(ag - dg) <= SUCCESS_RADIUS)
        radius = SUCCESS_RADIUS / 4 if self.defect == "terminates_differently" else SUCCESS_RADIUS
        return np.linalg.norm(ag - dg, axis=-1) <= radius

    def compute_truncated(self, achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
        shape, ag, dg = goal_arrays(achieved_goal, desired_goal)
        if self.defect == "truncated_ignored":
            return np.abs(ag).max(axis=-1) > 0.3  # the step never applies it
        if self.defect == "truncated_not_vectorized":
            # one norm over the whole batch: no single pair is 3 apart, a batch often is
            return bool(np.linalg.norm(ag - dg) > 3.0)
        return np.zeros(shape, bool)

    # ---- gymnasium API
    def _obs(self) -> Any:
        pos = self.pos if self.defect == "aliased_obs" else self.pos.copy()
        if self.defect == "achieved_goal_lags":
            pos = self.prev_pos.copy()
        if self.defect == "achieved_frozen":
            pos = np.zeros(2, np.float32)
        observation = self.pos.copy()
        if self.defect == "goal_in_obs":
            observation = np.concatenate([self.pos, self.goal]).astype(np.float32)
        obs = {
            "observation": observation,
            "achieved_goal": pos,
            "desired_goal": self.goal.copy(),
        }
        if self.defect == "float64_obs":
            obs = {k: v.astype(np.float64) for k, v in obs.items()}
        if self.defect == "box_obs":
            return np.concatenate([obs["observation"], obs["achieved_goal"], obs["desired_goal"]])
        if self.defect == "missing_desired_key":
            obs["goal"] = obs.pop("desired_goal")
        return obs

    def _info(self) -> dict[str, Any]:
        dist = float(np.linalg.norm(self.pos - self.goal))
        success = dist <= SUCCESS_RADIUS
        if self.defect == "success_radius_differs":
            success = dist <= SUCCESS_RADIUS / 4
        info: dict[str, Any] = {"is_success": success}
        if self.defect == "info_reused":
            self._shared_info.clear()
            self._shared_info.update(info)
            info = self._shared_info
        if self.defect == "success_key":
            info = {"success": success}
        elif self.defect == "success_float":
            info["is_success"] = dist
        elif self.defect == "success_inverted":
            info["is_success"] = not success
        elif self.defect == "success_always":
            info["is_success"] = True
        if self.penalty and self.defect != "info_key_missing":
            info["penalty"] = np.float32(-0.5 if np.abs(self.pos).max() > self.penalty_box else 0.0)
        return info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        if self.defect == "global_rng":
            self.goal = _UNSEEDED.uniform(-0.5, 0.5, 2).astype(np.float32)
        elif self.defect == "starts_solved":
            self.goal = np.zeros(2, np.float32)  # where the point starts
        elif self.defect == "fixed_goal":
            self.goal = np.array([0.3, -0.3], np.float32)
        elif self.defect == "goal_out_of_space":
            self.goal = self.np_random.uniform(-1.5, 1.5, 2).astype(np.float32)
        else:
            self.goal = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.pos[:] = 0.0
        self.prev_pos[:] = 0.0
        self.t = 0
        obs = self._obs()
        if self.defect == "old_reset_api":
            return obs
        return obs, self._info()

    def step(self, action: Any) -> Any:
        action = np.clip(np.asarray(action, np.float32), -1.0, 1.0)
        self.t += 1
        if self.defect == "step_raises" and self.t == 6:
            raise RuntimeError("index out of range in the dynamics")
        if self.defect == "hang_step" and self.t == 4:
            time.sleep(3600)
        move = 0.1 * action
        if self.defect == "noisy_dynamics":
            move = move + _UNSEEDED.normal(0, 0.01, 2).astype(np.float32)
        self.prev_pos[:] = self.pos
        # In place on purpose: "aliased_obs" hands this very array out.
        self.pos += move
        np.clip(self.pos, -1.0, 1.0, out=self.pos)
        if self.defect == "goal_moves":
            self.goal = np.clip(self.goal + 0.01, -1.0, 1.0).astype(np.float32)
        obs = self._obs()
        info = self._info()
        if self.defect != "success_key":
            # an array in the info, as highway-env's: dict comparisons must cope with it
            info["action"] = action.copy()
        ag = (self.prev_pos if self.defect == "achieved_goal_lags" else self.pos).copy()
        dg = self.goal.copy()
        if self.defect == "info_key_missing":
            reward = -float(np.linalg.norm(ag - dg) > SUCCESS_RADIUS)
        else:
            reward = float(
                np.asarray(self.compute_reward_impl(ag.copy(), dg.copy(), info)).reshape(-1)[0]
            )
        if self.defect == "step_extra_penalty":
            reward -= 0.01 * float(np.sum(action**2))
        terminated = bool(np.linalg.norm(ag - dg) <= SUCCESS_RADIUS)
        if self.defect == "never_ends":
            terminated = False  # neither success nor a time limit ends an episode
        if self.terminate_every is not None and terminated:
            self.successes += 1
            terminated = self.successes % self.terminate_every == 1
        # "length_varies": episodes toward a goal on the right are cut short
        limit = MAX_STEPS - (10 if self.defect == "length_varies" and self.goal[0] > 0 else 0)
        truncated = self.t >= limit and self.defect != "never_ends"
        if self.defect == "step_four_values":
            return obs, reward, terminated or truncated, info
        return obs, reward, terminated, truncated, info

    def render(self) -> Any:
        if self.render_mode == "ansi":
            return f"pos={self.pos.tolist()} goal={self.goal.tolist()}"
        if self.render_mode == "rgb_array":
            frame = np.zeros((16, 16, 3), np.uint8)
            x, y = ((np.clip(self.pos, -1, 1) + 1) * 7.5).astype(int)
            frame[y, x] = 255
            if self.defect == "render_float":
                return frame.astype(np.float32) / 255.0
            return frame
        return None


class RescaleGoals(gym.ObservationWrapper):
    """Doubles both goals: the unwrapped compute_reward no longer sees what the agent sees."""

    def __init__(self, env: gym.Env, scale: float = 2.0) -> None:
        super().__init__(env)
        self.scale = scale
        self.observation_space = env.observation_space

    def observation(self, observation: dict) -> dict:
        obs = dict(observation)
        for key in ("achieved_goal", "desired_goal"):
            obs[key] = np.clip(obs[key] * self.scale, -1, 1).astype(np.float32)
        return obs


def make(defect: str | None = None, **kwargs: Any) -> gym.Env:
    """The toy env with ``defect``; ``wrapper_rescales`` wraps a correct env."""
    if defect == "wrapper_rescales":
        return RescaleGoals(ToyReach(**kwargs))
    return ToyReach(defect, **kwargs)


def make_twin(defect: str | None = None, **kwargs: Any) -> gym.Env:
    """The correct twin of ``defect``: same env and wrappers, defect removed."""
    if defect == "wrapper_rescales":
        return RescaleGoals(ToyReach(**kwargs), scale=1.0)
    return ToyReach(**kwargs)


TOY_ID = "checker_test/ToyReach-v0"
if TOY_ID not in gym.registry:
    # The registered twin: gym.make adds TimeLimit, OrderEnforcing and PassiveEnvChecker.
    gym.register(TOY_ID, entry_point=ToyReach, max_episode_steps=MAX_STEPS)


def make_hanging() -> gym.Env:
    """A factory that never returns (the CLI must give up on it)."""
    time.sleep(3600)
    return ToyReach()


class WrongSliceReach(ToyReach):
    """ToyReach whose state is (elapsed time, x, y) and whose achieved_goal is the
    off-by-one slice ``state[0:2]`` (time and x) instead of ``state[1:3]``.

    ``is_success`` reads the true position; the reward and ``terminated`` follow
    ``achieved_goal`` through the goal functions. They disagree because achieved_goal
    measures the wrong thing, not because of two thresholds.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        goal = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-1.0, 1.0, (3,), np.float32),
                "achieved_goal": goal,
                "desired_goal": goal,
            }
        )

    def _obs(self) -> Any:
        state = np.array([self.t / MAX_STEPS, *self.pos], np.float32)
        return {
            "observation": state,
            "achieved_goal": state[0:2].copy(),  # the defect: should be state[1:3]
            "desired_goal": self.goal.copy(),
        }

    def step(self, action: Any) -> Any:
        obs, _, _, truncated, info = super().step(action)
        ag, dg = obs["achieved_goal"], obs["desired_goal"]
        reward = float(np.asarray(self.compute_reward(ag, dg, info)).reshape(-1)[0])
        terminated = bool(np.asarray(self.compute_terminated(ag, dg, info)).reshape(-1)[0])
        return obs, reward, terminated, truncated, info
