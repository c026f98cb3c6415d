"""The goal-env contract and the helpers every goalenvs environment shares.

A goal env is a :class:`gymnasium.Env` whose observation space is
``Dict(observation=..., achieved_goal=..., desired_goal=...)`` and which computes its
reward, termination and truncation from goals alone, for one goal pair or any batch of
them, so that Hindsight Experience Replay can relabel stored transitions::

    compute_reward(achieved_goal, desired_goal, info)      -> float32, shape batch_shape
    compute_terminated(achieved_goal, desired_goal, info)  -> bool, shape batch_shape
    compute_truncated(achieved_goal, desired_goal, info)   -> bool, shape batch_shape

where ``batch_shape`` is the goals' leading shape (``()`` for one pair). ``info`` is None,
one dict (whose values may be batched arrays), or a list / object array of dicts, one per
element (stable-baselines3 passes ``[{}] * B``).

:class:`GoalVectorEnv` is the base of the native vector twins: it owns seeding (one
generator per sub-env, seeded like gymnasium's ``SyncVectorEnv`` so that sub-env ``i`` of a
vector env seeded ``s`` follows the single env seeded ``s + i``), the time limit and the
three gymnasium autoreset modes, so each env only writes its batched dynamics.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

# info_values and InfoLike live with the numpy|torch helpers (devices reads them too);
# they are part of this module's API.
from goalenvs.devices import (  # noqa: F401
    InfoLike,
    check_tensor_actions,
    info_values,
    is_tensor,
    resolve_device,
    torch_dtype,
    torch_goal_arrays,
)

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


class GoalEnv(gym.Env):
    """A gymnasium env with a goal Dict observation and batched goal functions.

    Subclasses set ``observation_space`` to a :class:`gymnasium.spaces.Dict` with the keys
    ``observation``, ``achieved_goal`` and ``desired_goal`` and implement
    :meth:`compute_reward` and :meth:`compute_terminated`. Every step's reward and
    termination must equal these functions applied to the step's goals and info: that is
    what lets HER recompute them for substituted goals.
    """

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Reward for reaching ``achieved_goal`` when ``desired_goal`` was asked, batched.

        Returns a float32 array of shape ``achieved_goal.shape[:-1]``.
        """
        raise NotImplementedError

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Whether the episode ends for these goals, batched (bool array)."""
        raise NotImplementedError

    def compute_truncated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Goal-dependent truncation, batched. goalenvs envs never truncate on goals.

        The time limit is not goal-dependent and is applied by gymnasium's ``TimeLimit``
        (single envs) or the vector env's step counter.
        """
        shape, _, _ = goal_arrays(achieved_goal, desired_goal)
        return np.zeros(shape, dtype=bool)


# --------------------------------------------------------------------------- goal batches


def goal_arrays(
    achieved_goal: Any, desired_goal: Any, goal_size: int | None = None
) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Validates a goal pair or batch and returns ``(batch_shape, achieved, desired)``.

    Both arrays keep their float dtype (integers become float32). Leading dimensions
    broadcast against each other; the last dimension is the goal and must match
    ``goal_size`` when given.
    """
    achieved = np.asarray(achieved_goal)
    desired = np.asarray(desired_goal)
    for name, arr in (("achieved_goal", achieved), ("desired_goal", desired)):
        if arr.ndim == 0:
            raise ValueError(f"{name} must have at least one dimension (the goal), got a scalar")
        if arr.dtype.kind not in "fiub":
            raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
        if goal_size is not None and arr.shape[-1] != goal_size:
            raise ValueError(
                f"{name} has shape {arr.shape}: its last dimension must be the goal size "
                f"{goal_size}"
            )
    if achieved.shape[-1] != desired.shape[-1]:
        raise ValueError(
            f"achieved_goal shape {achieved.shape} and desired_goal shape {desired.shape} "
            "differ in the goal dimension"
        )
    try:
        batch_shape = np.broadcast_shapes(achieved.shape[:-1], desired.shape[:-1])
    except ValueError:
        raise ValueError(
            f"achieved_goal shape {achieved.shape} and desired_goal shape {desired.shape} "
            "have leading (batch) dimensions that do not broadcast"
        ) from None
    if achieved.dtype.kind != "f":
        achieved = achieved.astype(np.float32)
    if desired.dtype.kind != "f":
        desired = desired.astype(np.float32)
    return batch_shape, achieved, desired


# --------------------------------------------------------------------------- argument checks


def parse_json_object(flag: str, text: str | None) -> dict[str, Any]:
    """The JSON object given to a ``--kwargs``-style flag (``{}`` when it is absent).

    Raises ValueError naming the flag and the text when it is not JSON or not an object.
    """
    if text is None:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{flag} {text!r} is not valid JSON: {exc.msg}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} must be a JSON object like '{{\"n_bits\": 50}}', got {text!r}")
    return value


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """Returns ``value`` when it is one of ``choices``, else raises a ValueError naming both."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not valid; expected one of {list(choices)}")
    return value


def check_positive(name: str, value: Any, *, integer: bool = False, minimum: float = 0.0) -> Any:
    """Checks that a constructor constant is a finite number above ``minimum``."""
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {kind}, got {value!r} ({type(value).__name__})")
    if not np.isfinite(value) or value <= minimum:
        raise ValueError(f"{name} must be > {minimum}, got {value!r}")
    return value


def check_action(action: Any, space: spaces.Space, name: str = "action") -> np.ndarray:
    """Validates one action for ``space`` and returns it as an array.

    Box actions: the shape must match and the values must be finite (NaN or inf is an
    error); finite values outside the bounds are clipped to them, as noisy policies
    routinely overshoot. Discrete actions: an integer in ``[start, start + n)``, else an
    error. MultiBinary: a 0/1 array of the space's shape.
    """
    if isinstance(space, spaces.Box):
        arr = np.asarray(action)
        if arr.dtype.kind not in "fiu":
            raise TypeError(
                f"{name} must be a real-valued array for {space}, got dtype {arr.dtype}: {action!r}"
            )
        if arr.shape != space.shape:
            raise ValueError(
                f"{name} has shape {arr.shape}, expected {space.shape} for {space}: {action!r}"
            )
        if not np.isfinite(arr).all():
            raise ValueError(f"{name} must be finite, got {arr!r} for {space}")
        # maximum/minimum rather than np.clip, whose Python wrapper dominates on one action.
        return np.minimum(np.maximum(arr, space.low), space.high).astype(space.dtype, copy=False)
    if isinstance(space, spaces.Discrete):
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            # The common case, an int: no array round trip.
            if not space.start <= action < space.start + space.n:
                raise ValueError(
                    f"{name}={action} is outside {space}: expected an integer in "
                    f"[{space.start}, {space.start + space.n})"
                )
            return np.asarray(action, dtype=np.int64)
        arr = np.asarray(action)
        if arr.shape not in ((), (1,)) or arr.dtype.kind not in "iu":
            raise TypeError(
                f"{name} must be an integer for {space}, got {action!r} "
                f"(shape {arr.shape}, dtype {arr.dtype})"
            )
        value = int(arr.reshape(()))
        if not space.start <= value < space.start + space.n:
            raise ValueError(
                f"{name}={value} is outside {space}: expected an integer in "
                f"[{space.start}, {space.start + space.n})"
            )
        return np.asarray(value, dtype=np.int64)
    if isinstance(space, spaces.MultiBinary):
        arr = np.asarray(action)
        if arr.shape != space.shape or not np.isin(arr, (0, 1)).all():
            raise ValueError(f"{name} must be a 0/1 array of shape {space.shape}, got {action!r}")
        return arr.astype(np.int8)
    raise TypeError(f"check_action does not support {space}")


def check_actions(actions: Any, single_space: spaces.Space, num_envs: int) -> np.ndarray:
    """Validates a batch of ``num_envs`` actions with the rules of :func:`check_action`."""
    arr = np.asarray(actions)
    if isinstance(single_space, spaces.Box):
        expected = (num_envs, *single_space.shape)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"actions must be a real-valued array, got dtype {arr.dtype}")
        if arr.shape != expected:
            raise ValueError(
                f"actions has shape {arr.shape}, expected {expected} "
                f"(num_envs, *{single_space.shape})"
            )
        # Fast path: every value inside every dimension's bounds needs no clipping and is
        # finite (NaN fails both comparisons). Flat min/max cost a fraction of np.clip or
        # of comparisons broadcast over a short last axis.
        if (
            arr.size
            and arr.min() >= single_space.low.max()
            and arr.max() <= single_space.high.min()
        ):
            return arr.astype(single_space.dtype, copy=False)
        if not np.all(np.isfinite(arr)):
            bad = np.flatnonzero(~np.isfinite(arr).reshape(num_envs, -1).all(axis=1))
            raise ValueError(
                f"actions must be finite; sub-envs {bad[:8].tolist()} got {arr[bad[0]]!r}"
            )
        clipped = np.minimum(np.maximum(arr, single_space.low), single_space.high)
        return clipped.astype(single_space.dtype, copy=False)
    if isinstance(single_space, spaces.Discrete):
        if arr.dtype.kind not in "iu":
            raise TypeError(f"actions must be integers for {single_space}, got dtype {arr.dtype}")
        if arr.shape != (num_envs,):
            raise ValueError(f"actions has shape {arr.shape}, expected ({num_envs},)")
        lo, hi = single_space.start, single_space.start + single_space.n
        # Two reductions first: the per-element scan only runs to name a bad sub-env.
        if arr.size and (arr.min() < lo or arr.max() >= hi):
            bad = np.flatnonzero((arr < lo) | (arr >= hi))
            raise ValueError(
                f"actions[{bad[0]}]={arr[bad[0]]} is outside {single_space}: expected integers "
                f"in [{lo}, {hi})"
            )
        return arr.astype(np.int64, copy=False)
    raise TypeError(f"check_actions does not support {single_space}")


def check_goal_option(goal: Any, space: spaces.Box, batch: int | None = None) -> np.ndarray:
    """Validates a goal passed as ``reset(options={"goal": ...})``.

    For a vector env (``batch`` given) the goal may be one goal, used for every reset
    sub-env, or one per sub-env.
    """
    arr = np.asarray(goal, dtype=np.float64)
    shapes = [space.shape] if batch is None else [space.shape, (batch, *space.shape)]
    if arr.shape not in shapes:
        raise ValueError(
            f"options['goal'] has shape {arr.shape}, expected one of {shapes} for {space}"
        )
    if not np.all(np.isfinite(arr)) or np.any(arr < space.low) or np.any(arr > space.high):
        raise ValueError(
            f"options['goal']={arr.tolist()} is outside the goal space [{space.low.tolist()}, "
            f"{space.high.tolist()}]"
        )
    return arr.astype(space.dtype)


def goal_dict_space(observation: spaces.Space, goal: spaces.Space) -> spaces.Dict:
    """The goal observation space ``Dict(observation, achieved_goal, desired_goal)``.

    The two goal entries are identical, independent copies of ``goal``.
    """
    goals = {"achieved_goal": goal, "desired_goal": copy.deepcopy(goal)}
    return spaces.Dict({"observation": observation, **goals})


# --------------------------------------------------------------------------- vector envs


_AUTORESET_NAMES = {
    **{mode.value: mode for mode in AutoresetMode},
    **{mode.name.lower(): mode for mode in AutoresetMode},
}


def parse_autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    """An :class:`AutoresetMode` from itself, its value (``"NextStep"``) or its snake-case
    name (``"next_step"``, ``"same_step"``, ``"disabled"``), as the docstrings spell them."""
    if isinstance(value, AutoresetMode):
        return value
    mode = _AUTORESET_NAMES.get(value) if isinstance(value, str) else None
    if mode is None:
        raise ValueError(
            f"autoreset_mode={value!r} is not valid; expected one of {sorted(_AUTORESET_NAMES)}"
        )
    return mode


class GoalVectorEnv(VectorEnv):
    """Base class of the native vector twins: N goal envs stepped in one batched call.

    Subclasses implement the batched dynamics:

    - ``_reset_envs(index, options)``: draw a new episode for the sub-envs in ``index``
      (an int array), each with its own generator ``self.np_randoms[i]``, exactly as the
      single env draws it (on a torch device: ``index`` is a tensor there, and the
      subclass's ``_draw_episodes(count, goal)`` draws them in one batch from
      ``self.torch_generator``);
    - ``_step_envs(actions)``: advance every sub-env by one step (validated actions);
    - ``_observation()``: the batched observation dict (fresh arrays);
    - ``_step_info()``: a dict of per-sub-env arrays, ``is_success`` included;
    - ``compute_reward`` / ``compute_terminated`` (usually the env's kernel functions);

    and this class supplies ``reset``, ``step``, seeding, the time limit
    (``max_episode_steps``) and the autoreset modes ``next_step`` (gymnasium's default:
    the step after an episode ends resets that sub-env and returns reward 0),
    ``same_step`` (the finished sub-env resets inside the step; its last observation is in
    ``info["final_obs"]``) and ``disabled`` (the caller resets with
    ``reset(options={"reset_mask": mask})``).

    ``device``: None (the default) keeps state and results in numpy arrays. A torch
    device (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``) keeps the state as
    tensors there and returns observations, rewards, terminated, truncated and the info
    arrays as tensors on it; actions may be tensors on that device or array-likes. The
    subclass writes its state with the array module ``self.xp`` and the helpers
    :meth:`zeros`, :meth:`constant`, :meth:`fresh` and :meth:`float32`, so one code path
    serves both. Seeding differs by backend: the numpy twin keeps one generator per
    sub-env (sub-env ``i`` seeded ``s + i`` follows the single env seeded ``s + i``); a
    device twin draws every sub-env's numbers from one ``torch.Generator`` on its
    device, seeded by ``reset(seed=s)``: the same seed on the same device type gives the
    same episodes, but not the numpy twin's (nor another device type's) numbers.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "autoreset_mode": None}

    def __init__(
        self,
        num_envs: int,
        single_observation_space: spaces.Dict,
        single_action_space: spaces.Space,
        max_episode_steps: int | None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: Any = None,
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
        self.device = None if device is None else resolve_device(device)
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

    # ---- array helpers: numpy, or torch on self.device
    @property
    def xp(self) -> Any:
        """The array module of the state: numpy, or torch on a device.

        A property, not an attribute: a module in the instance's dict would stop the
        twin from being copied or pickled (a HER buffer keeps its goal functions so).
        """
        if self.device is None:
            return np
        import torch

        return torch

    def zeros(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """Zeros of a numpy ``dtype`` (float32, int64, bool) on this env's backend."""
        if self.device is None:
            return np.zeros(shape, dtype)
        return self.xp.zeros(shape, dtype=torch_dtype(dtype), device=self.device)

    def constant(self, value: Any) -> Any:
        """A numpy constant (a wall map, bounds) as an array of this env's backend."""
        if self.device is None:
            return np.asarray(value)
        return self.xp.as_tensor(np.asarray(value), device=self.device)

    def fresh(self, value: Any) -> Any:
        """A copy that shares no memory with env state (``copy`` / ``clone``)."""
        return value.copy() if self.device is None else value.clone()

    def float32(self, value: Any) -> Any:
        """``value`` (bool, int or float) as float32 on this env's backend."""
        return value.astype(np.float32) if self.device is None else value.float()

    def to_numpy(self, value: Any) -> np.ndarray:
        """A numpy copy of an array of this env's backend (for drawing and printing)."""
        return np.array(value) if self.device is None else value.detach().cpu().numpy().copy()

    def _any(self, mask: Any) -> bool:
        # count_nonzero: a fraction of the cost of any() on the small arrays of every step.
        return bool(np.count_nonzero(mask)) if self.device is None else bool(mask.any())

    def _where_true(self, mask: Any) -> Any:
        return mask.nonzero()[0] if self.device is None else mask.nonzero(as_tuple=True)[0]

    # ---- subclass hooks
    def _reset_envs(self, index: Any, options: dict[str, Any] | None) -> None:
        raise NotImplementedError

    def _step_envs(self, actions: Any) -> None:
        raise NotImplementedError

    def _observation(self) -> dict[str, Any]:
        raise NotImplementedError

    def _step_info(self) -> dict[str, Any]:
        raise NotImplementedError

    def _draw_episodes(self, count: int, goal: Any) -> tuple[Any, ...]:
        """On a device: ``count`` new episodes' state tensors, drawn in one batch from
        ``self.torch_generator`` (``goal``: None, or pinned goals as a tensor)."""
        raise NotImplementedError

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Batched reward, as the single env's :meth:`GoalEnv.compute_reward`."""
        raise NotImplementedError

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Batched termination, as the single env's :meth:`GoalEnv.compute_terminated`."""
        raise NotImplementedError

    def compute_truncated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """Goal-dependent truncation: never (the time limit is counted in ``step``).

        Tensors in, a bool tensor on their device out; numpy in, numpy out.
        """
        shape, achieved, _, xp = goal_batch(achieved_goal, desired_goal)
        if xp is np:
            return np.zeros(shape, dtype=bool)
        return xp.zeros(shape, dtype=xp.bool, device=achieved.device)

    def _goal_outcomes(
        self, obs: dict[str, Any], info: dict[str, Any]
    ) -> tuple[Any, Any, Any | None]:
        """This step's ``(reward, terminated, truncated)``: fresh, writable arrays.

        The default calls the public ``compute_*`` methods. A subclass may return its
        kernel's results directly to skip their input validation, provided they equal
        what ``compute_*`` returns for ``obs`` and ``info`` (tests hold them to it).
        ``truncated`` may be None where the env never truncates on goals: the step then
        builds it from the time limit alone.
        """
        achieved, desired = obs["achieved_goal"], obs["desired_goal"]
        reward = self.compute_reward(achieved, desired, info)
        terminated = self.compute_terminated(achieved, desired, info)
        truncated = self.compute_truncated(achieved, desired, info)
        if self.device is None:
            return (
                np.array(reward, np.float32),
                np.array(terminated, bool),
                np.array(truncated, bool),
            )
        torch = self.xp
        return (
            torch.as_tensor(reward, device=self.device).float().clone(),
            torch.as_tensor(terminated, device=self.device).bool().clone(),
            torch.as_tensor(truncated, device=self.device).bool().clone(),
        )

    # ---- gymnasium API
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Resets every sub-env, or those in ``options["reset_mask"]``.

        ``seed`` is an int (sub-env ``i`` gets ``seed + i``, as gymnasium's vector envs) or
        one seed per sub-env; on a torch device, an int that seeds the device's generator.
        ``options["goal"]`` pins the goal (one for all, or one each).
        """
        if seed is not None:
            self._seed(seed)
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            index = (
                np.arange(self.num_envs)
                if self.device is None
                else self.xp.arange(self.num_envs, device=self.device)
            )
        else:
            mask = self._check_reset_mask(mask)
            if not self._has_reset and not bool(mask.all()):
                raise RuntimeError("the first reset must reset every sub-env (no reset_mask)")
            index = self._where_true(mask)
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

    def _check_reset_mask(self, mask: Any) -> Any:
        if self.device is None:
            mask = np.asarray(mask)
            dtype, shape = mask.dtype, mask.shape
            ok = dtype.kind == "b"
        else:
            torch = self.xp
            if not isinstance(mask, torch.Tensor):
                mask = torch.as_tensor(np.asarray(mask))
            dtype, shape = mask.dtype, tuple(mask.shape)
            ok = dtype == torch.bool
            mask = mask.to(self.device)
        if not ok or shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must be a bool array of shape ({self.num_envs},), "
                f"got dtype {dtype} shape {shape}"
            )
        return mask

    def step(self, actions: Any) -> tuple[dict[str, Any], Any, Any, Any, dict[str, Any]]:
        """Steps every sub-env with one batched kernel call.

        Actions are validated with :func:`check_actions` (finite values outside the
        bounds are clipped; NaN, inf or a wrong shape raise), on a torch device with
        :func:`check_tensor_actions` (the same rules).
        """
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        if self.device is None:
            actions = check_actions(actions, self.single_action_space, self.num_envs)
        else:
            actions = check_tensor_actions(
                actions,
                self.single_action_space,
                self.num_envs,
                self.device,
                getattr(self, "_action_bounds", None),
            )
        if self.autoreset_mode == AutoresetMode.DISABLED and self._any(self._needs_reset):
            raise RuntimeError(
                f"sub-envs {self._where_true(self._needs_reset)[:8].tolist()} ended their "
                "episode: with autoreset_mode='disabled', reset them with "
                "reset(options={'reset_mask': mask}) before stepping"
            )
        self._step_envs(actions)
        self.elapsed_steps += 1
        restarted = None
        if self.autoreset_mode == AutoresetMode.NEXT_STEP and self._any(self._needs_reset):
            # These sub-envs ended last step: this step resets them instead (gymnasium's
            # next-step convention: reward 0, not terminated, not truncated). Resetting
            # before the observation is built spares a second batched observation.
            restarted = self._where_true(self._needs_reset)
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
        if self.autoreset_mode == AutoresetMode.SAME_STEP and self._any(done):
            index = self._where_true(done)
            final_obs = np.empty(self.num_envs, dtype=object)
            final_info = np.empty(self.num_envs, dtype=object)
            for i in index.tolist():
                final_obs[i] = {k: self.fresh(v[i]) for k, v in obs.items()}
                final_info[i] = {k: self.fresh(v[i]) for k, v in info.items()}
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

    def _with_masks(self, info: dict[str, Any]) -> dict[str, Any]:
        # gymnasium's vector info convention: "_key" says which sub-envs carry "key".
        out: dict[str, Any] = dict(info)
        for key in info:
            out["_" + key] = self.fresh(self._all_envs)
        return out


def goal_batch(
    achieved_goal: Any, desired_goal: Any, goal_size: int | None = None
) -> tuple[tuple[int, ...], Any, Any, Any]:
    """:func:`goal_arrays` for numpy or torch: ``(batch_shape, achieved, desired, xp)``.

    When either goal is a torch tensor, both come back as float tensors on that tensor's
    device and ``xp`` is ``torch``, so a goal function computes on the caller's device and
    returns tensors there; otherwise this is :func:`goal_arrays` with ``xp = numpy``.
    """
    if not (is_tensor(achieved_goal) or is_tensor(desired_goal)):
        return (*goal_arrays(achieved_goal, desired_goal, goal_size), np)
    return torch_goal_arrays(achieved_goal, desired_goal, goal_size)


def command_name() -> str:
    """How to type the ``goalenvs`` command here, for the next commands the CLI prints:
    ``goalenvs`` when that is the console script beside this Python (or none is
    installed), else the script's path (``.venv/bin/goalenvs`` after ``make demo``)."""
    script = Path(sys.executable).with_name("goalenvs")
    found = shutil.which("goalenvs")
    if not script.is_file() or (found is not None and Path(found).samefile(script)):
        return "goalenvs"
    relative = os.path.relpath(script)
    return shlex.quote(relative if not relative.startswith("..") else str(script))
