"""What the numpy and the device HER buffer share: their batch, their settings, their
copy and pickle rules, their input checks and their prioritized-replay rules, written once.

:class:`ReplayBufferBase` is a base class rather than a set of functions because every
rule here reads the buffer (its settings, its observation shapes, its priorities, its
state) and then needs one operation that differs between numpy and torch: the rule stays
one method of the base, and each buffer supplies the few operations (:meth:`state`,
:meth:`_adopt`, :meth:`_convert`, the ``_priority_*`` methods) in its own array library.
Hot paths (the numpy buffer's one-env ``add``) keep their fast checks in front and fall
back to these, which coerce or explain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import numpy as np

from goalenvs.core.backend import is_tensor
from goalenvs.core.types import DeviceLike, GoalFunction
from goalenvs.her.goal_mix import GoalMix
from goalenvs.her.settings import (
    BufferSettings,
    GoalSelectionStrategy,
    resolve_goal_function,
)

__all__ = ["HerBatch", "ReplayBufferBase"]

_Buffer = TypeVar("_Buffer", bound="ReplayBufferBase")

NO_EPISODE_YET = (
    "cannot sample before an episode has ended: the buffer holds no complete "
    "episode yet (start learning after at least one full episode)"
)


class HerBatch(NamedTuple):
    """A sampled batch; arrays (or tensors) have leading dimension ``batch_size``.

    ``observations["desired_goal"]`` and ``next_observations["desired_goal"]`` hold the
    (possibly relabeled) goal, ``rewards`` (float32) are the rewards for that goal, and
    ``dones`` (float32) is 1.0 where the target must not bootstrap (an n-step buffer's
    ``rewards`` are the discounted sums of its returns, with ``discounts`` beside them:
    the target is ``rewards + discounts * (1 - dones) * Q'``). Discrete actions come
    as int64 of shape ``(batch_size,)``. ``weights`` and ``indices`` serve prioritized
    replay (ones and the sampled indices for a uniform buffer, so agents can always use
    them).

    Every ``sample`` returns fresh arrays (or tensors), which no later call writes into.
    """

    observations: dict[str, Any]
    actions: Any
    rewards: Any
    next_observations: dict[str, Any]
    dones: Any
    #: Importance-sampling weights (float32), normalized by the batch's largest weight;
    #: all ones unless the buffer is ``prioritized``. Multiply the per-sample losses by them.
    weights: Any = None
    #: The transitions' storage indices (int64): pass them back to ``update_priorities``.
    indices: Any = None
    #: Per transition, the discount of the bootstrapped value: ``gamma ** m`` for the ``m``
    #: steps an n-step return summed (float32); None for one-step transitions, whose
    #: discount is the agent's ``gamma``.
    discounts: Any = None


def batch_to(batch: HerBatch, device: DeviceLike) -> HerBatch:
    """``batch`` with every tensor moved to ``device`` (``tensor.to(device)``)."""
    return HerBatch(
        {k: v.to(device) for k, v in batch.observations.items()},
        batch.actions.to(device),
        batch.rewards.to(device),
        {k: v.to(device) for k, v in batch.next_observations.items()},
        batch.dones.to(device),
        batch.weights.to(device),
        batch.indices.to(device),
        None if batch.discounts is None else batch.discounts.to(device),
    )


def to_numpy(value: object) -> np.ndarray:
    """``value`` as a numpy array (a torch tensor detached and brought to the CPU first);
    a column ``(B, 1)`` becomes ``(B,)``."""
    array = value.detach().cpu().numpy() if is_tensor(value) else np.asarray(value)
    if array.ndim == 2 and array.shape[1] == 1:
        return array.reshape(-1)
    return array


def goal_function_name(function: object) -> str:
    """What messages call a goal function: ``Class.method`` for an env's method, the
    function's own name else (``ToyReach.compute_reward``, ``my_reward``)."""
    owner = getattr(function, "__self__", None)
    name = getattr(function, "__name__", None)
    if owner is not None and name:
        return f"{type(owner).__name__}.{name}"
    qualname = getattr(function, "__qualname__", None)
    if qualname and "<locals>" not in qualname:
        return str(qualname)
    return str(name or function)


def reward_shape_error(
    function: object, shape: tuple[int, ...], batch_size: int, goal_shape: tuple[int, ...]
) -> ValueError:
    """The error for a ``compute_reward`` whose result is not one reward per goal pair (a
    scalar for the batch included: broadcast, it would pay every relabeled transition the
    reward of one pair)."""
    return ValueError(
        f"{goal_function_name(function)} returned shape {tuple(shape)} for a batch of "
        f"{batch_size} goal pairs (achieved_goal and desired_goal of shape "
        f"{tuple(goal_shape)}); expected ({batch_size},), one reward per pair: compute it "
        "over the leading dimensions (e.g. np.linalg.norm(achieved_goal - desired_goal, "
        "axis=-1)), as the HER buffers never broadcast one value to a batch"
    )


def no_other_episode_error(mix: GoalMix, transitions: int) -> RuntimeError:
    """The error for a draw of another episode's desired goal from a buffer that holds
    one episode."""
    return RuntimeError(
        f"goal_mix desired={mix.desired:g} draws the desired goals of other episodes, but "
        f"the buffer holds a single complete episode ({transitions} transitions): sample "
        "once a second episode is stored, or let a future-only warm-up run first "
        "(goal_mix_warmup)"
    )


def batch_shape_error(name: str, shape: tuple[int, ...], batch_size: int) -> ValueError:
    """The error for a goal function whose result does not have one value per goal."""
    return ValueError(
        f"{name} returned shape {shape} for a batch of {batch_size} goals; "
        f"expected ({batch_size},) or a scalar"
    )


def version_error(name: str, kind: str, version: object, expected: int) -> ValueError:
    """The error for a saved file of a layout version this code does not read."""
    return ValueError(
        f"{name} has {kind} layout version {version}, this goalenvs reads version {expected}"
    )


def _setting(name: str, doc: str, convert: Callable[[Any], Any] | None = None) -> Any:
    """A read-only property of the buffer's setting ``name`` (through ``convert``)."""

    def read(self: ReplayBufferBase) -> Any:
        value = getattr(self._settings, name)
        return value if convert is None else convert(value)

    return property(read, doc=doc)


def _tuple_or_none(value: Any) -> tuple[float, ...] | None:
    return None if value is None else tuple(value)


class ReplayBufferBase:
    """The settings, copy and pickle rules, input checks and prioritized-replay rules of
    both HER buffers.

    A subclass calls :meth:`_configure` with its checked settings, its goal functions and
    the dtypes it stores observations and actions in (the input checks cast to them), and
    supplies its state (:meth:`state`, :meth:`_adopt`), :meth:`_convert` and the
    ``_priority_*`` operations in its own array library.

    Copies and pickles go through the public state, the same way for both buffers:
    ``copy.copy`` gives a buffer with copies of every array and the generator's state that
    shares the goal functions; ``copy.deepcopy`` copies the goal functions too (the env
    behind them included); a pickle holds the state and the goal functions, which must
    then be picklable. Episodes in progress stay in progress in all three.
    ``__getstate__`` hands out the live state (the pickle copies it): an object given it by
    hand through ``__setstate__`` shares the buffer's arrays.
    """

    #: The class name that messages suggest (``HerReplayBuffer(..., prioritized=True)``).
    _NAME = ""
    #: What the per-env values of an ``infos`` dict are called in its messages.
    _INFO_VALUES = "arrays"
    #: What ``obs`` holds, in its messages.
    _OBS_VALUES = "arrays"

    _settings: BufferSettings
    #: The batched goal functions (see :func:`goalenvs.her.settings.resolve_goal_function`).
    compute_reward: GoalFunction
    compute_terminated: GoalFunction | None
    #: The shape of one stored action: ``()`` for Discrete.
    action_shape: tuple[int, ...]
    _obs_shapes: dict[str, tuple[int, ...]]
    _obs_dtypes: dict[str, object]
    _action_dtype: object

    def _configure(
        self,
        settings: BufferSettings,
        compute_reward: object,
        compute_terminated: object,
        obs_dtypes: Mapping[str, object],
        action_dtype: object,
    ) -> None:
        """Sets the checked ``settings``, the goal functions (resolved from their sources)
        and what the input checks expect: ``obs_dtypes`` (in the buffer's order of keys)
        and ``action_dtype``."""
        self._settings = settings
        self.compute_reward = resolve_goal_function(compute_reward, "compute_reward")
        self.compute_terminated = (
            None
            if compute_terminated is None
            else resolve_goal_function(compute_terminated, "compute_terminated")
        )
        self.action_shape = settings.action_shape
        spaces_ = settings.observation_space.spaces
        n = settings.n_envs
        self._obs_shapes = {key: (n, *(spaces_[key].shape or ())) for key in obs_dtypes}
        self._obs_dtypes = dict(obs_dtypes)
        self._action_dtype = action_dtype

    # ------------------------------------------------------------------ state
    def state(self) -> Any:
        """The buffer's public state (each buffer's own type)."""
        raise NotImplementedError

    def _adopt(self, state: Any, compute_reward: object, compute_terminated: object) -> None:
        """Makes this (new or unpickled) object the buffer ``state`` describes."""
        raise NotImplementedError

    @classmethod
    def from_state(
        cls: type[_Buffer], state: Any, compute_reward: object, compute_terminated: object = None
    ) -> _Buffer:
        """The buffer ``state`` describes, with these goal functions (as the constructor's).

        The buffer takes the state's arrays as its own, without a copy: pass
        ``state.copy()`` to keep the state's arrays apart from the new buffer's.
        """
        buffer = cls.__new__(cls)
        buffer._adopt(state, compute_reward, compute_terminated)
        return buffer

    def __copy__(self: _Buffer) -> _Buffer:
        return self.from_state(self.state().copy(), self.compute_reward, self.compute_terminated)

    def __getstate__(self) -> dict[str, object]:
        return {
            "state": self.state(),
            "compute_reward": self.compute_reward,
            "compute_terminated": self.compute_terminated,
        }

    # ------------------------------------------------------------------ settings
    @property
    def settings(self) -> BufferSettings:
        """The checked constructor arguments (all but the goal functions and the device),
        with the live ``beta``."""
        return self._settings

    # The settings, read-only (each one's meaning: HerReplayBuffer's docstring).
    buffer_size = _setting("buffer_size", "Transitions held over all envs.")
    observation_space = _setting("observation_space", "The single-env goal Dict space.")
    action_space = _setting("action_space", "The single-env action space.")
    n_envs = _setting("n_envs", "Parallel envs writing into the buffer.")
    rows_per_env = _setting("rows_per_env", "Transitions each env keeps: buffer_size // n_envs.")
    n_sampled_goal = _setting("n_sampled_goal", "HER's k: relabeled with probability k/(k+1).")
    her_ratio = _setting("her_ratio", "The probability k/(k+1) that a sample is relabeled.")
    goal_selection_strategy = _setting(
        "goal_selection_strategy", "Where relabeled goals come from.", GoalSelectionStrategy.parse
    )
    goal_mix = _setting("relabel_mix", "The relabelling mix: the one given, or the strategy's.")
    goal_mix_warmup = _setting("goal_mix_warmup", "Env steps stored before the mix applies.")
    handle_timeout_termination = _setting(
        "handle_timeout_termination", "Whether a truncated transition still bootstraps."
    )
    info_keys = _setting("info_keys", "The info keys stored for the goal functions.", tuple)
    prioritized = _setting("prioritized", "Whether draws follow the priorities.")
    priority = _setting(
        "priority", 'What a prioritized buffer draws by: "td_error", "goal_motion".'
    )
    motion_clip = _setting("motion_clip", "The most one step's goal motion counts.")
    motion_weights = _setting(
        "motion_weights", "Per-entry weights of the goal's motion.", _tuple_or_none
    )
    n_step = _setting("n_step", "The steps each sampled return sums.")
    gamma = _setting("gamma", "The discount of n-step returns (None for one-step).")
    alpha = _setting("alpha", "How much the priorities count, in [0, 1].")
    priority_eps = _setting("priority_eps", "The floor added to every priority.")

    def _relabelling_repr(self) -> str:
        """The relabelling settings as a repr shows them: the strategy and k, or the mix."""
        settings = self._settings
        if settings.goal_mix is None:
            text = (
                f"n_sampled_goal={self.n_sampled_goal}, "
                f"goal_selection_strategy={self.goal_selection_strategy.value!r}"
            )
        else:
            text = f"goal_mix={str(self.goal_mix)!r}"
        if settings.goal_mix_warmup:
            text += f", goal_mix_warmup={settings.goal_mix_warmup}"
        return text

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of prioritized replay, in [0, 1]."""
        return self._settings.beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._settings = dataclasses.replace(self._settings, beta=value)
        self._beta_changed()

    def _beta_changed(self) -> None:
        """Called after ``beta`` changed (a buffer that keeps a copy of it updates it)."""

    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.n_transitions

    # ------------------------------------------------------------------ input checks
    def _convert(self, name: str, value: object, dtype: Any) -> Any:
        """``value`` as this buffer's array type (of ``dtype``, where the buffer casts)."""
        raise NotImplementedError

    def _check_obs_fully(self, name: str, obs: object) -> dict[str, Any]:
        """``obs`` as a dict of arrays of the stored shapes, or the error that says what
        is wrong."""
        if not isinstance(obs, Mapping):
            raise TypeError(
                f"{name} must be a dict of {self._OBS_VALUES}, got {type(obs).__name__}"
            )
        if obs.keys() != self._obs_shapes.keys():
            raise ValueError(
                f"{name} has keys {sorted(obs.keys())}, expected {sorted(self._obs_shapes)}"
            )
        checked = {}
        for key, expected in self._obs_shapes.items():
            value = self._convert(f"{name}[{key!r}]", obs[key], self._obs_dtypes[key])
            if tuple(value.shape) != expected:
                raise ValueError(
                    f"{name}[{key!r}] has shape {tuple(value.shape)}, expected {expected} "
                    f"(n_envs, *shape of {self.observation_space[key]})"
                )
            checked[key] = value
        return checked

    def _check_action(self, action: Any) -> Any:
        """``action`` as an array of shape ``(n_envs, *action_shape)``; Discrete actions
        may come as ``(n_envs, 1)``, as stable-baselines3 stores them."""
        action = self._convert("action", action, self._action_dtype)
        expected = (self.n_envs, *self.action_shape)
        if tuple(action.shape) != expected:
            if self.action_shape or tuple(action.shape) != (self.n_envs, 1):
                raise ValueError(
                    f"action has shape {tuple(action.shape)}, expected {expected} "
                    f"(n_envs, *action shape) for {self.action_space}"
                )
            action = action.reshape(self.n_envs)
        return action

    def _per_env(self, name: str, value: Any, dtype: object) -> Any:
        """``value`` as an array of shape ``(n_envs,)`` (any shape of ``n_envs`` values)."""
        value = self._convert(name, value, dtype)
        n = self.n_envs
        if tuple(value.shape) != (n,):
            if int(np.prod(value.shape)) != n:
                raise ValueError(
                    f"{name} has shape {tuple(value.shape)}, expected ({n},) (one per env)"
                )
            value = value.reshape(n)
        return value

    def _info_value(self, infos: object, key: str) -> object:
        """The per-env values of info ``key``: ``infos[key]`` of a dict, or the key's
        values gathered from a sequence of ``n_envs`` dicts."""
        n = self.n_envs
        if isinstance(infos, Mapping):
            if key not in infos:
                raise KeyError(f"infos has no {key!r} (declared in info_keys)")
            return infos[key]
        if isinstance(infos, (Sequence, np.ndarray)) and len(infos) == n:
            try:
                return np.asarray([info[key] for info in infos])
            except KeyError:
                raise KeyError(f"an info dict has no {key!r} (declared in info_keys)") from None
        raise TypeError(
            f"infos must be a dict of per-env {self._INFO_VALUES} or a sequence of {n} dicts "
            f"holding {list(self.info_keys)}, got {type(infos).__name__}"
        )

    # ------------------------------------------------------------------ priorities
    def update_priorities(self, indices: Any, td_errors: Any) -> None:
        """Sets the priorities of sampled transitions to ``|td_error| + priority_eps``.

        ``indices`` are a batch's ``indices`` (numpy arrays, or torch tensors on any
        device), ``td_errors`` one value per index (the critic's TD errors, any sign; shape
        ``(B,)`` or ``(B, 1)``). Call it before more ``add()`` calls reuse the rows: an
        index whose row no longer holds a transition of a complete episode is skipped. New
        transitions start at the largest priority seen so far. An index out of range or a
        TD error that is not finite is an error, never clamped or kept.
        """
        if not self.prioritized:
            raise RuntimeError(
                f"update_priorities needs a prioritized buffer: {self._NAME}(..., prioritized=True)"
            )
        if self.priority != "td_error":
            raise RuntimeError(
                f"update_priorities: this buffer draws by priority={self.priority!r}, set when "
                "each episode ends; TD errors set the priorities of priority='td_error' only"
            )
        indices, td_errors = self._priority_input(indices), self._priority_input(td_errors)
        if indices.ndim != 1 or td_errors.ndim != 1 or indices.shape != td_errors.shape:
            raise ValueError(
                f"update_priorities: indices has shape {tuple(indices.shape)} and td_errors "
                f"shape {tuple(td_errors.shape)}; expected two 1-d arrays of the same length"
            )
        if indices.shape[0] == 0:
            return
        if not self._priority_indices_are_integers(indices):
            raise TypeError(f"update_priorities: indices must be integers, got {indices.dtype}")
        capacity = self._priority_capacity()
        indices, priority, bad_index, bad_value = self._priority_of(indices, td_errors, capacity)
        if bad_index:
            positions = to_numpy(indices)
            raise ValueError(
                f"update_priorities: indices must be in [0, {capacity}) (a batch's indices), "
                f"got values {int(positions.min())}..{int(positions.max())}"
            )
        if bad_value:
            bad = int(np.flatnonzero(~np.isfinite(to_numpy(priority)))[0])
            raise ValueError(
                f"update_priorities: td_errors[{bad}] = {float(to_numpy(td_errors)[bad])}; "
                "expected finite values"
            )
        self._priority_set(indices, priority)

    def _priority_input(self, value: object) -> object:
        """``value`` as a 1-d array of this buffer's type (``(B, 1)`` becomes ``(B,)``)."""
        raise NotImplementedError

    def _priority_indices_are_integers(self, indices: Any) -> bool:
        raise NotImplementedError

    def _priority_capacity(self) -> int:
        """How many priorities the buffer keeps: indices lie in ``[0, capacity)``."""
        raise NotImplementedError

    def _priority_of(self, indices: Any, td_errors: Any, capacity: int) -> tuple[object, ...]:
        """``(indices, priority, any index out of range, any priority not finite)``, with
        ``priority = |td_errors| + priority_eps``."""
        raise NotImplementedError

    def _priority_set(self, indices: Any, priority: Any) -> None:
        """Writes ``priority ** alpha`` where the index's row is sampleable."""
        raise NotImplementedError
