"""GoalVectorEnv, the base of the native vector twins: seeding (sub-env ``i`` of a twin
seeded ``s`` follows the single env seeded ``s + i``), the time limit and the autoreset
modes, so each env only writes its batched dynamics."""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from goalenvs.core.backend import InfoLike, array_backend
from goalenvs.core.contract import GoalFunctions, goal_batch
from goalenvs.core.types import DeviceLike
from goalenvs.core.validate import (
    check_actions,
    check_choice,
    check_goal_option,
    check_positive,
    parse_autoreset_mode,
)

if TYPE_CHECKING:
    import torch


class GoalVectorEnv(GoalFunctions, VectorEnv):
    """Base class of the native vector twins: N goal envs stepped in one batched call.

    A twin takes its single env's arguments plus ``num_envs``, ``max_episode_steps``
    (``gym.make_vec`` passes the registered one), gymnasium's ``autoreset_mode`` and
    ``device`` (docs/gpu.md); ``render_mode="rgb_array"`` draws sub-env 0 (one frame where
    gymnasium's ``VectorEnv.render`` types a tuple: mypy's ``misc`` on each twin's class).
    A subclass allocates its state (``_allocate(n)``, which :meth:`_start` calls) with
    ``self.xp`` and the array helpers (``zeros``, ``constant``, ``fresh``, ``float32``,
    ``to_numpy``: :class:`NumpyArrays`' on its backend) and implements the draw of new
    episodes (:meth:`_draw_episode` or :meth:`_draw_episodes`, and
    :meth:`_draw_episodes_on_device`, into the arrays named in ``episode_state``),
    ``_step_envs(actions)``, ``_observation()`` (fresh arrays), ``_step_info()``
    (``is_success`` included, called after the step's resets) and the goal functions;
    this class supplies seeding, ``reset``, ``step``, the time limit and the autoreset
    modes ``next_step``, ``same_step`` (``info["final_obs"]`` an object array,
    ``info["final_info"]`` batched arrays with ``_key`` masks, as gymnasium's
    SyncVectorEnv) and ``disabled`` (``reset(options={"reset_mask": mask})``).
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "autoreset_mode": None}
    single_observation_space: spaces.Dict  # the goal Dict of one sub-env
    torch_generator: torch.Generator  # on a torch device only: every sub-env's draws

    def __init__(
        self,
        num_envs: int,
        single_observation_space: spaces.Dict,
        single_action_space: spaces.Space,
        max_episode_steps: int | None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: DeviceLike = None,
    ) -> None:
        check_positive("num_envs", num_envs, integer=True)
        if max_episode_steps is not None:
            check_positive("max_episode_steps", max_episode_steps, integer=True)
        mode = parse_autoreset_mode(autoreset_mode)
        self.num_envs = int(num_envs)
        self.max_episode_steps = max_episode_steps
        self.autoreset_mode = mode
        self.metadata = {**type(self).metadata, "autoreset_mode": mode}
        if render_mode is not None:
            check_choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)
        backend = self.backend = array_backend(device)
        self.device = backend.device
        self.zeros, self.constant, self.fresh = backend.zeros, backend.constant, backend.fresh
        self.float32, self.to_numpy = backend.float32, backend.to_numpy
        if self.device is None:
            self.np_randoms = [seeding.np_random(None)[0] for _ in range(self.num_envs)]
        else:
            import torch

            # One generator for all sub-envs: a million numpy generators would not fit.
            self.np_randoms = []
            self.torch_generator = torch.Generator(self.device)
            self.torch_generator.manual_seed(int(seeding.np_random(None)[0].integers(2**63)))
            if isinstance(single_action_space, spaces.Box):
                low, high = single_action_space.low, single_action_space.high
                # One bound for every dimension (the usual [-1, 1]) clamps with Python
                # floats, which torch handles several times faster than bound tensors.
                uniform = low.min() == low.max() and high.min() == high.max()
                self._action_bounds = (
                    (float(low.min()), float(high.max()))
                    if uniform
                    else (self.constant(low), self.constant(high))
                )
        self.elapsed_steps = self.zeros(self.num_envs, np.int64)
        self._needs_reset = self.zeros(self.num_envs, bool)
        self._has_reset = False
        # Copied for every "_key" info mask: a copy costs a fraction of np.ones' wrapper.
        self._all_envs = self.fresh(self.zeros(self.num_envs, bool) == 0)

    # ---- array helpers: self.backend's (numpy, or torch on self.device)
    @property
    def xp(self) -> ModuleType:
        """The array module of the state (a property: a module in the instance's dict
        would stop the twin from being copied or pickled)."""
        return self.backend.xp

    def _start(self, params: Any, num_envs: int, *settings: Any) -> None:
        """Starts a twin of ``params`` (whose ``spaces()`` are a sub-env's) with
        ``num_envs`` and :meth:`__init__`'s other ``settings`` (``max_episode_steps``,
        ``autoreset_mode``, ``render_mode``, ``device``), then allocates its state."""
        self.params = params
        GoalVectorEnv.__init__(self, num_envs, *params.spaces(), *settings)
        self._allocate(self.num_envs)

    # ---- subclass hooks
    def _allocate(self, n: int) -> None:
        raise NotImplementedError

    def _step_envs(self, actions: Any) -> None:
        raise NotImplementedError

    def _observation(self) -> dict[str, Any]:
        raise NotImplementedError

    def _step_info(self) -> dict[str, Any]:
        raise NotImplementedError

    # ---- new episodes: the subclass draws them, this class does the rest
    #: The state arrays a reset writes, in the order the draw hooks return them.
    episode_state: tuple[str, ...] = ()
    #: The state arrays a reset sets to zero (velocities).
    zeroed_on_reset: tuple[str, ...] = ()

    #: Whether the twin draws one episode at a time (it leaves _draw_episodes alone).
    _draws_one_by_one: bool = False

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        cls._draws_one_by_one = cls._draw_episodes is GoalVectorEnv._draw_episodes

    def _draw_episode(self, rng: np.random.Generator, goal: Any = None) -> tuple[object, ...]:
        """Numpy twin: one episode drawn from ``rng`` as the single env draws it, a row of
        each :attr:`episode_state` array, with this episode's row of what
        :meth:`_reset_options` pins. A twin defines this or :meth:`_draw_episodes`."""
        raise NotImplementedError

    def _draw_episodes(self, rngs: list[np.random.Generator], **pinned: Any) -> tuple[Any, ...]:
        """Numpy twin, batched: one episode per generator (``pinned``: one value for all, or
        one row each); by default :meth:`_draw_episode`'s, stacked."""
        draw = self._draw_episode
        if pinned:
            episodes = [draw(rng, **_row(pinned, j)) for j, rng in enumerate(rngs)]
        else:  # autoresets: nothing pinned
            episodes = [draw(rng) for rng in rngs]
        return tuple(np.array(rows) for rows in zip(*episodes, strict=True))

    def _draw_episodes_on_device(self, count: int, goal: object = None) -> tuple[object, ...]:
        """Device twin: ``count`` new episodes' state tensors, drawn in one batch from
        ``self.torch_generator`` (``goal`` as for :meth:`_draw_episodes`, as a tensor)."""
        raise NotImplementedError

    def _reset_options(self, options: dict[str, object] | None) -> dict[str, np.ndarray]:
        """What ``options`` pins (by default ``"goal"``: one, or one per sub-env, checked
        against the goal space by the params' ``check_goal`` where they have one, else
        :func:`check_goal_option`)."""
        goal = None if options is None else options.get("goal")
        if goal is None:
            return {}
        check = getattr(getattr(self, "params", None), "check_goal", check_goal_option)
        return {"goal": check(goal, self.single_observation_space["desired_goal"], self.num_envs)}

    def _store_episodes(self, index: object, drawn: tuple[object, ...]) -> None:
        """Writes drawn episodes into the rows ``index`` of :attr:`episode_state`."""
        for name, rows in zip(self.episode_state, drawn, strict=True):
            getattr(self, name)[index] = rows

    def _episodes_started(self, index: object) -> None:
        """Called after the sub-envs ``index`` started new episodes."""

    def _reset_envs(self, index: Any, options: dict[str, object] | None) -> None:
        """Starts new episodes in the sub-envs ``index``."""
        pinned = (
            {}  # autoresets, every step of a large twin: nothing to read
            if options is None
            else {
                key: self.backend.rows(value, index)
                for key, value in self._reset_options(options).items()
            }
        )
        if self.device is not None:
            self._store_episodes(index, self._draw_episodes_on_device(len(index), **pinned))
        elif self._draws_one_by_one:
            # One episode at a time: each row written where it goes, which spares stacking
            # the few episodes an autoreset draws (most of a small reset's cost).
            states = [getattr(self, name) for name in self.episode_state]
            draw, rngs = self._draw_episode, self.np_randoms
            for j, i in enumerate(index.tolist()):
                episode = draw(rngs[i], **_row(pinned, j)) if pinned else draw(rngs[i])
                for state, value in zip(states, episode, strict=True):
                    state[i] = value
        elif len(index):  # a reset_mask may name no sub-env
            rngs = [self.np_randoms[i] for i in index.tolist()]
            self._store_episodes(index, self._draw_episodes(rngs, **pinned))
        for name in self.zeroed_on_reset:
            getattr(self, name)[index] = 0
        self._episodes_started(index)

    def compute_truncated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Goal-dependent truncation: never (``step`` counts the time limit)."""
        shape, achieved, _, xp = goal_batch(achieved_goal, desired_goal)
        if xp is np:
            return np.zeros(shape, dtype=bool)
        return xp.zeros(shape, dtype=xp.bool, device=achieved.device)

    def _goal_outcomes(
        self, obs: dict[str, Any], info: dict[str, Any]
    ) -> tuple[Any, Any, Any | None]:
        """This step's fresh ``(reward, terminated, truncated)``, by default from the
        ``compute_*`` methods (a subclass: its kernel's, ``truncated`` None for never)."""
        achieved, desired = obs["achieved_goal"], obs["desired_goal"]
        reward = self.compute_reward(achieved, desired, info)
        terminated = self.compute_terminated(achieved, desired, info)
        truncated = self.compute_truncated(achieved, desired, info)
        return self.backend.outcomes(reward, terminated, truncated)

    # ---- gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, object] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Resets every sub-env, or those in ``options["reset_mask"]``; ``seed`` is an int
        (sub-env ``i`` gets ``seed + i``; on a device, the generator's) or one per sub-env,
        ``options["goal"]`` pins the goal (one for all, or one each)."""
        if seed is not None:
            self._seed(seed)
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            index = self.backend.arange(self.num_envs)
        else:
            mask = self.backend.reset_mask(mask, self.num_envs)
            if not self._has_reset and not bool(mask.all()):
                raise RuntimeError("the first reset must reset every sub-env (no reset_mask)")
            index = self.backend.where_true(mask)
        self._reset_envs(index, options)
        self.elapsed_steps[index] = 0
        self._needs_reset[index] = False
        self._has_reset = True
        return self._observation(), self._with_masks(self._step_info())

    def _seed(self, seed: int | Sequence[int | None]) -> None:
        if self.device is not None:
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise ValueError(
                    f"seed={seed!r}: on device {self.device} the sub-envs share one "
                    "torch.Generator, so seed must be an int (or None)"
                )
            self.torch_generator.manual_seed(int(seed))
            self._np_random, self._np_random_seed = seeding.np_random(int(seed))
            return
        seeds = (
            [seed + i for i in range(self.num_envs)]
            if isinstance(seed, (int, np.integer))
            else list(seed)
        )
        if len(seeds) != self.num_envs:
            raise ValueError(f"seed holds {len(seeds)} seeds, expected num_envs={self.num_envs}")
        for i, s in enumerate(seeds):
            if s is not None:
                self.np_randoms[i] = seeding.np_random(int(s))[0]
        self._np_random, self._np_random_seed = self.np_randoms[0], seeds[0]

    def step(self, actions: object) -> tuple[dict[str, Any], Any, Any, Any, dict[str, Any]]:
        """Steps every sub-env with one batched kernel call; actions are checked by
        :func:`check_actions`."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        bounds = getattr(self, "_action_bounds", None)
        actions = check_actions(
            actions, self.single_action_space, self.num_envs, self.device, bounds
        )
        if self.autoreset_mode == AutoresetMode.DISABLED and self.backend.any(self._needs_reset):
            raise RuntimeError(
                f"sub-envs {self.backend.where_true(self._needs_reset)[:8].tolist()} ended their "
                "episode: with autoreset_mode='disabled', reset them with "
                "reset(options={'reset_mask': mask}) before stepping"
            )
        self._step_envs(actions)
        self.elapsed_steps += 1
        restarted = None
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self.backend.any(self._needs_reset):
            # These sub-envs ended last step: this step resets them instead (gymnasium's
            # next-step convention: reward 0, not terminated, not truncated). Resetting
            # before the observation is built spares a second batched observation.
            restarted = self.backend.where_true(self._needs_reset)
            self._reset_envs(restarted, None)
            self.elapsed_steps[restarted] = 0
        obs = self._observation()
        info = self._step_info()
        reward, terminated, truncated = self._goal_outcomes(obs, info)
        if truncated is None:
            # Time limit alone: restarted sub-envs count 0 steps, below any limit (>= 1).
            truncated = (
                self.zeros(self.num_envs, bool)
                if self.max_episode_steps is None
                else self.elapsed_steps >= self.max_episode_steps
            )
        else:
            if self.max_episode_steps is not None:
                truncated |= self.elapsed_steps >= self.max_episode_steps
            if restarted is not None:
                truncated[restarted] = False
        if restarted is not None:
            reward[restarted] = 0.0
            terminated[restarted] = False

        done = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP and self.backend.any(done):
            index = self.backend.where_true(done)
            # gymnasium 1.x's forms: final_obs an object array of the ended sub-envs' last
            # observations (None elsewhere); final_info a dict of batched arrays, each
            # with its "_key" mask of the ended sub-envs (zeros elsewhere).
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in index.tolist():
                final_obs[i] = {k: self.fresh(v[i]) for k, v in obs.items()}
            final_info: dict[str, object] = {}
            for key, value in info.items():
                last = self.fresh(value)
                last[~done] = 0
                final_info[key], final_info["_" + key] = last, self.fresh(done)
            self._reset_envs(index, None)
            self.elapsed_steps[index] = 0
            fresh_obs, fresh_info = self._observation(), self._step_info()
            for key in obs:
                obs[key][index] = fresh_obs[key][index]
            for key in info:
                info[key][index] = fresh_info[key][index]
            info = self._with_masks(info)
            info["final_obs"], info["_final_obs"] = final_obs, self.fresh(done)
            info["final_info"], info["_final_info"] = final_info, self.fresh(done)
            return obs, reward, terminated, truncated, info

        self._needs_reset = done
        return obs, reward, terminated, truncated, self._with_masks(info)

    def _with_masks(self, info: dict[str, object]) -> dict[str, object]:
        # gymnasium's vector info convention: "_key" says which sub-envs carry "key".
        out: dict[str, object] = dict(info)
        for key in info:
            out["_" + key] = self.fresh(self._all_envs)
        return out


def _row(pinned: dict[str, Any], j: int) -> dict[str, object]:
    """Episode ``j``'s pinned values: row ``j`` of those with a row per episode."""
    return {k: v if v is None or v.ndim < 2 else v[j] for k, v in pinned.items()}


def twin_metadata(single_env: type[gym.Env]) -> dict[str, object]:
    """A vector twin's class ``metadata``: ``rgb_array`` at the single env's ``render_fps``."""
    fps = single_env.metadata["render_fps"]
    return {"render_modes": ["rgb_array"], "render_fps": fps, "autoreset_mode": None}
