"""The reference Hindsight Experience Replay buffer, written once over the array module.

:class:`HerReplayBuffer` keeps its episodes in time-major rings ``(rows, n_envs)``, one
stream per parallel env, in numpy arrays or in torch tensors on any device
(:class:`DeviceHerReplayBuffer`): every line runs on both (``xp`` is the module; what the
two spell differently, and the state, are in :mod:`~goalenvs.her.buffer_state`; the file
in :mod:`~goalenvs.her.buffer_file`). What it does for its user: docs/buffer.md.

Storage: ``rows = buffer_size // n_envs``; add number ``t`` (the counter, unwrapped)
writes row ``t % rows`` of every env: one transition with both its observations, its
flags and its episode's start, side by side in one float32 ``records`` row (one copy an
add). ``episode_start[row, env]`` is the counter of the row's episode's first transition;
``episode_end[s % rows, env]`` is one past the counter of the last transition of the
episode that starts at ``s``, written when it ends. An env's sampleable transitions are
the counters ``[sampleable_from, sampleable_to)``: the start of its oldest intact episode
and the end of its newest complete one. An add about to overwrite the first row of that
oldest episode moves ``sampleable_from`` to its end: the whole episode leaves at once
(rows = 4, episodes [0, 3) and [3, 4): add 4 overwrites row 0, ``sampleable_from`` goes
0 -> 3 and counters 1, 2 leave with it).

Sampling draws transitions uniformly over every env's sampleable counters (a cumulative
sum over the envs and a ``searchsorted``) or by priority (:class:`Priorities`), then each
one's goal source from the mix (:class:`~goalenvs.her.goal_mix.GoalMix`), and rewards the
whole batch, every n-step return's steps included, with one ``compute_reward`` call.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import operator
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces

from goalenvs.core import check_int
from goalenvs.core.backend import is_tensor
from goalenvs.core.types import DeviceLike, GoalFunction
from goalenvs.her.buffer_file import legacy_state, read_file, write_file
from goalenvs.her.buffer_state import (
    BufferState,
    NumpyOps,
    TorchOps,
    empty_state,
    field_views,
    flat_view,
    numpy_dtype,
    packed_names,
    packed_slices,
    record_width,
)
from goalenvs.her.common import HerBatch
from goalenvs.her.goal_mix import FUTURE_ONLY, RELABELLING, GoalMix
from goalenvs.her.settings import BufferSettings, GoalSelectionStrategy, resolve_goal_function
from goalenvs.her.sumtree import SumTree

#: add() takes values of the stored shapes and dtypes as they are.
_SHAPE, _DTYPE = operator.attrgetter("shape"), operator.attrgetter("dtype")
_BOOL = np.dtype(bool)
_CLOSING = ("truncated", "episode_end")  # the fields that ending episodes write
_Buffer = TypeVar("_Buffer", bound="HerReplayBuffer")

__all__ = ["DeviceHerReplayBuffer", "HerReplayBuffer", "Priorities", "TreePriorities"]


def _setting(name: str, doc: str = "") -> Any:
    """A read-only property of the buffer's (checked, normalized) setting ``name``."""
    return property(operator.attrgetter(f"settings.{name}"), doc=doc or f"The ``{name}`` setting.")


# ---------------------------------------------------------------------- priorities
class Priorities:
    """The draws of a prioritized buffer, in proportion to ``p ** alpha``, on torch.

    ``raw[row, env]`` holds each row's TD-error ``p ** alpha`` (goal motion reads the
    ``motion`` path instead). A draw masks the rows that cannot be sampled and takes a
    cumulative sum and a ``searchsorted``: ``O(rows * n_envs)``, no host read, capturable.
    """

    def __init__(self, buffer: HerReplayBuffer, raw: Any) -> None:
        self.buffer, self.raw = buffer, raw

    def closed(self, done: Any, start: Any, t: int) -> None:
        """The episodes ``[start, t]`` of the envs where ``done`` became sampleable."""

    def retired(self, hit: Any, old: int, end: Any) -> None:
        """The episodes ``[old, end)`` of the envs where ``hit`` left the buffer."""

    def weights(self) -> Any:
        """Every row's draw weight, 0 where it cannot be sampled: ``(rows, n_envs)``."""
        b = self.buffer
        xp, f, c = b.xp, b.fields, b.counters
        counter = b.counter_of_rows()[:, None]
        live = (counter >= c["sampleable_from"]) & (counter < c["sampleable_to"])
        if "motion" in f:
            # Each row's episode's whole path: the path its last row holds.
            start = f["episode_start"] % b._rows
            last = (b.ops.take_rows(f["episode_end"], start) - 1) % b._rows
            s = b.settings
            weight = (b.ops.take_rows(f["motion"], last) + s.priority_eps) ** s.alpha
        else:
            weight = self.raw
        return xp.where(live, weight, 0.0)

    def draw(self, count: int) -> tuple[Any, Any, Any, Any]:
        """``count`` rows drawn in proportion to their weight: ``(row, env, weight of
        each, total weight)``."""
        b = self.buffer
        weights = self.weights().reshape(-1)
        cum = b.xp.cumsum(weights, 0)
        total = cum[-1]
        flat = b.ops.searchsorted(cum, b.ops.uniform(count) * total)
        flat = b.xp.minimum(flat, b.ops.asarray(weights.shape[0] - 1))
        return flat // b.n_envs, flat % b.n_envs, weights[flat], total

    def update(self, flat: Any, value: Any) -> None:
        """Sets the TD-error weights of the sampleable rows among ``flat``."""
        live = self.weights().reshape(-1)[flat] > 0
        raw = self.raw.reshape(-1)  # a view
        raw[flat] = self.buffer.xp.where(live, value, raw[flat])


class TreePriorities(Priorities):
    """:class:`Priorities` on numpy: a sum tree of the sampleable rows' weights, written as
    episodes end and leave (``O(log N)`` a draw)."""

    def __init__(self, buffer: HerReplayBuffer, raw: Any) -> None:
        super().__init__(buffer, raw)
        self.tree = SumTree(raw.size)
        self.tree.set_all(super().weights().reshape(-1))

    def _episode_rows(self, envs: np.ndarray, first: np.ndarray, stop: np.ndarray) -> Any:
        """The flat indices of counters ``first[i] .. stop[i] - 1`` of ``envs[i]``."""
        length = stop - first
        offset = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        rows = (np.repeat(first, length) + offset) % self.buffer._rows
        return rows * self.buffer.n_envs + np.repeat(envs, length), length

    def closed(self, done: Any, start: Any, t: int) -> None:
        envs = np.flatnonzero(done)
        if envs.size == 0:
            return
        b = self.buffer
        flat, length = self._episode_rows(envs, start[envs], np.full(envs.size, t + 1))
        if "motion" in b.fields:
            path = b.fields["motion"][t % b._rows, envs]
            value = np.repeat((path + b.settings.priority_eps) ** b.settings.alpha, length)
        else:
            value = self.raw.reshape(-1)[flat]
        self.tree.update(flat, value)

    def retired(self, hit: Any, old: int, end: Any) -> None:
        envs = np.flatnonzero(hit)
        if envs.size:
            flat, _ = self._episode_rows(envs, np.full(envs.size, old), end[envs])
            self.tree.update(flat, 0.0)

    def weights(self) -> Any:
        return self.tree.leaves.reshape(self.raw.shape)

    def draw(self, count: int) -> tuple[Any, Any, Any, Any]:
        tree, n = self.tree, self.buffer.n_envs
        flat = tree.find(self.buffer.ops.uniform(count) * tree.total)
        return flat // n, flat % n, tree.nodes[tree.size + flat], tree.total

    def update(self, flat: Any, value: Any) -> None:
        live = self.tree.nodes[self.tree.size + flat] > 0
        self.raw.reshape(-1)[flat[live]] = value[live]
        self.tree.update(flat[live], value[live])


class HerReplayBuffer:
    """Hindsight Experience Replay buffer with relabeling at sample time, in host memory
    (numpy) or on a torch device; docs/buffer.md walks through every option.

    Args:
        buffer_size: transitions held over all envs: each env keeps the last
            ``buffer_size // n_envs`` (``rows_per_env``), the longest episode it can hold.
        observation_space: the single-env goal Dict space (``observation``,
            ``achieved_goal``, ``desired_goal``; other keys are stored alike).
        action_space: the single-env action space (Box, Discrete or MultiBinary).
        compute_reward: a goal env (single or vector, possibly wrapped) or a callable
            ``(achieved_goal, desired_goal, info) -> rewards``: one reward per goal pair.
        n_envs: parallel envs writing into the buffer, one transition each per ``add``.
        n_sampled_goal, goal_selection_strategy: HER's ``k`` and ``"future"``, ``"final"``,
            ``"episode"`` or ``"random"``: relabeled with probability ``k / (k + 1)``.
        handle_timeout_termination: True: a truncated transition still bootstraps.
        info_keys: step-info keys ``compute_reward`` needs, stored and passed back batched.
        compute_terminated: None keeps the stored ``terminated`` for relabeled goals (as
            stable-baselines3); a goal env or callable recomputes it.
        seed: seed of every draw (:attr:`rng` on numpy, :attr:`generator` on torch).
        prioritized, alpha, beta, priority_eps: proportional prioritized replay (Schaul et
            al. 2016): ``P(i) ~ p_i ** alpha``, ``weights`` ``(N * P(i)) ** -beta`` over the
            batch's largest, ``p_i = |td_error| + priority_eps`` (:meth:`update_priorities`).
        goal_mix, goal_mix_warmup: fractions of each goal source (a
            :class:`~goalenvs.her.goal_mix.GoalMix`, a dict or text) in place of the
            strategy and ``k``, and the env steps stored before they apply.
        priority, motion_clip, motion_weights: ``"td_error"``, or ``"goal_motion"``: an
            episode drawn by its achieved goal's path, ``sum_t min(|w * (ag_{t+1} -
            ag_t)|, motion_clip)``, with no importance weights.
        n_step, gamma: each sampled return sums up to ``n_step`` rewards within its
            episode, discounted by ``gamma`` (``discounts``: ``gamma`` to the steps summed).
        device: None: numpy arrays in host memory; a torch device: tensors there, where
            the goal functions receive tensors and should return tensors.

    Its whole content is :meth:`state`; :meth:`from_state` rebuilds a buffer from one.
    """

    #: The batched goal functions (see :func:`goalenvs.her.settings.resolve_goal_function`).
    compute_reward: GoalFunction
    compute_terminated: GoalFunction | None

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        compute_reward: object,
        n_envs: int = 1,
        n_sampled_goal: int = 4,
        goal_selection_strategy: str | GoalSelectionStrategy = "future",
        handle_timeout_termination: bool = True,
        info_keys: Sequence[str] = (),
        compute_terminated: object = None,
        seed: int | None = None,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        priority_eps: float = 1e-6,
        goal_mix: GoalMix | Mapping[str, float] | str | None = None,
        goal_mix_warmup: int = 0,
        priority: str = "td_error",
        motion_clip: float | None = None,
        motion_weights: Sequence[float] | None = None,
        n_step: int = 1,
        gamma: float | None = None,
        *,
        device: DeviceLike | None = None,
    ) -> None:
        given = locals()  # every argument but the goal functions and the device: a setting
        checked = BufferSettings(
            **{f.name: given[f.name] for f in dataclasses.fields(BufferSettings)}
        )
        ops = NumpyOps(seed) if device is None else TorchOps(device, checked.seed)
        self._adopt(empty_state(checked, ops), compute_reward, compute_terminated)

    def _adopt(self, state: BufferState, compute_reward: object, terminated: object) -> None:
        if not isinstance(state, BufferState):
            raise TypeError(f"state must be a BufferState, got {type(state).__name__}")
        settings = state.settings
        self._rows, self._n = settings.rows_per_env, settings.n_envs
        lead = (settings.rows_per_env, settings.n_envs)
        for name, value in state.fields.items():
            if tuple(value.shape[:2]) != lead:
                raise ValueError(
                    f"state.fields[{name!r}] has shape {tuple(value.shape)}; expected its "
                    f"first two dimensions {lead} (rows_per_env, n_envs)"
                )
        ops = NumpyOps() if state.device is None else TorchOps(state.device)
        ops.set_rng_state(state.rng_state)
        self.ops, self.xp, self.device = ops, ops.xp, ops.device
        f = dict(state.fields)
        packed = packed_names(settings)
        records, width = state.records, record_width(packed)
        if records is None or tuple(records.shape[2:]) != (width,):
            # Fields of their own (a file, a copy, a pickle of an earlier layout): packed.
            records = ops.zeros((settings.rows_per_env, settings.n_envs, width), np.float32)
            for name, view in field_views(records, packed).items():
                view[...] = f[name]
                f[name] = view
        else:  # its views (a pickle brings them back as arrays of their own: stale)
            f.update(field_views(records, packed))
        self.records = records
        self._packed = packed_slices(packed)
        self._records_flat = flat_view(records)
        keys = sorted(settings.observation_space.spaces)
        #: The checked constructor arguments (all but the goal functions and the device).
        self._settings = settings
        self.compute_reward = resolve_goal_function(compute_reward, "compute_reward")
        self.compute_terminated = (
            None if terminated is None else resolve_goal_function(terminated, "compute_terminated")
        )
        #: The shape of one stored action: ``()`` for Discrete.
        self.action_shape = settings.action_shape
        spaces_, n = settings.observation_space.spaces, settings.n_envs
        self._obs_shapes = {key: (n, *(spaces_[key].shape or ())) for key in keys}
        self.fields, self.counters = f, state.counters
        self.steps_added = state.steps_added
        self.max_priority = state.max_priority
        self.priorities: Priorities | None = None
        if state.priorities is not None:
            face = TreePriorities if ops.xp is np else Priorities
            self.priorities = face(self, state.priorities)
        mix = settings.relabel_mix
        self._thresholds = ops.asarray(mix.thresholds(), np.float64)
        self._sources = frozenset(mix.sources)
        self._warmup_thresholds = ops.asarray(FUTURE_ONLY.thresholds(), np.float64)
        weights = settings.motion_weights
        self._motion_weights = None if weights is None else ops.asarray(weights, np.float64)
        self._envs = ops.arange(settings.n_envs)
        self._action_shape = (settings.n_envs, *settings.action_shape)
        # add(): the values it takes straight in, their stored shapes and dtypes, and the
        # order the packed ones go into the records row.
        names = [f"{side}/{k}" for side in ("obs", "next_obs") for k in keys] + ["action", "reward"]
        shapes = [self._obs_shapes[k] for k in keys] * 2 + [self._action_shape, (n,)]
        self._add_shapes, self._add_dtypes = tuple(shapes), tuple(f[name].dtype for name in names)
        self._obs_values, self._n_keys = operator.itemgetter(*keys), len(keys)
        index = [names.index(name) for name in self._packed]
        self._pack_index = None if index == list(range(len(names))) else index
        self._unpacked_obs = [k for k in keys if f"obs/{k}" not in self._packed]
        self._action_packed = "action" in self._packed
        self._reshape_parts = any(
            len(shape) != 1 for _, _, shape in list(self._packed.values())[:-1]
        )
        # On numpy a row's packed values, then its flags (False) and episode start (each
        # env's current one: _meta, renewed as episodes end), are the bytes they join
        # into: one env copies them into its row, more envs into a staging row that one
        # take orders by env (a third of np.concatenate's time, spent on every add).
        self._meta = self._stage = None
        if ops.xp is np:
            floats, n = self._packed["reward"][1], settings.n_envs
            self._meta = np.zeros((n, width - floats), np.float32)
            self._meta_start = self._meta[:, -2:].view(np.int64)[:, 0]
            if records.flags.c_contiguous:
                # Part [lo, hi) of the joined values is (n_envs, hi - lo), from n_envs * lo.
                edges, joined = [*(lo for lo, _, _ in self._packed.values()), floats, width], []
                for lo, hi in itertools.pairwise(edges):
                    joined.append(np.arange(n * lo, n * hi).reshape(n, hi - lo))
                order = np.concatenate(joined, axis=1).reshape(-1)  # by env, as in a row
                staging = np.zeros(order.size, np.float32)
                memory, staged = records.reshape(-1).view(np.uint8).data, staging.data.cast("B")
                by_row = records.reshape(settings.rows_per_env, -1)
                self._stage = (memory, order.size * 4, by_row, staging, staged, order)
        self._one, self._last_env = ops.asarray(1), ops.asarray(settings.n_envs - 1)
        self._numbers: tuple[Any, ...] | None = None
        self._all_false = bytes(settings.n_envs) if ops.xp is np else None  # n_envs Falses
        self._motion = "motion" in f
        # Whether add() may take its hot path (before add number _quiet_until).
        self._hot = (
            ops.xp is np
            and not (self.info_keys or self._unpacked_obs or self._motion)
            and self._action_packed
            and state.priorities is None
        )
        # No add before the one that overwrites counter _retire_from retires an episode
        # (numpy reads it; torch, which would have to read the device, masks every add).
        self._retire_from = ops.lowest(state.counters["sampleable_from"])
        self._renew_meta()
        # Flat (rows * n_envs, ...) views of every field, gathered by row * n_envs + env.
        self._flat = {name: flat_view(value) for name, value in f.items()}
        # What the host last read of the device (see _read_horizons): -1, nothing yet.
        self._no_overflow_before = self._nonempty_until = self._other_episode_until = -1
        self._quiet_until = -1

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        # A pickle of goalenvs 148f048 or earlier holds the old numpy buffer's state.
        state = pickled.get("state")
        if not isinstance(state, BufferState):
            state = legacy_state(pickled, type(self).__name__)
        self._adopt(state, pickled["compute_reward"], pickled.get("compute_terminated"))

    def __getstate__(self) -> dict[str, object]:
        return {
            "state": self.state(),
            "compute_reward": self.compute_reward,
            "compute_terminated": self.compute_terminated,
        }

    def __copy__(self: _Buffer) -> _Buffer:
        return self.from_state(self.state().copy(), self.compute_reward, self.compute_terminated)

    @classmethod
    def from_state(
        cls: type[_Buffer], state: Any, compute_reward: object, compute_terminated: object = None
    ) -> _Buffer:
        """The buffer ``state`` describes, with these goal functions, on the state's own
        arrays (pass ``state.copy()`` to keep them apart)."""
        buffer = cls.__new__(cls)
        buffer._adopt(state, compute_reward, compute_terminated)
        return buffer

    # ------------------------------------------------------------------ settings
    # The settings, read-only (each one's meaning: the class docstring).
    buffer_size = _setting("buffer_size")
    observation_space = _setting("observation_space")
    action_space = _setting("action_space")
    n_envs = _setting("n_envs")
    rows_per_env = _setting("rows_per_env")
    n_sampled_goal = _setting("n_sampled_goal")
    her_ratio = _setting("her_ratio", "The probability that a sample is relabeled.")
    goal_selection_strategy = _setting("goal_selection_strategy")
    goal_mix = _setting("relabel_mix", "The relabelling mix: the one given, or the strategy's.")
    goal_mix_warmup = _setting("goal_mix_warmup")
    handle_timeout_termination = _setting("handle_timeout_termination")
    info_keys = _setting("info_keys")
    prioritized = _setting("prioritized")
    priority = _setting("priority")
    motion_clip = _setting("motion_clip")
    motion_weights = _setting("motion_weights")
    n_step = _setting("n_step")
    gamma = _setting("gamma")
    alpha = _setting("alpha")
    priority_eps = _setting("priority_eps")

    @property
    def settings(self) -> BufferSettings:
        """The buffer's settings (read-only; ``beta`` has its own setter)."""
        return self._settings

    @property
    def beta(self) -> float:
        """The importance-sampling exponent of prioritized replay, in [0, 1] (settable)."""
        return self.settings.beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._settings = dataclasses.replace(self._settings, beta=value)

    def __len__(self) -> int:
        return self.n_transitions

    # ------------------------------------------------------------------ state
    def state(self, *, truncate_in_progress: bool = False) -> BufferState:
        """The buffer's content, on its own arrays (``state().copy()``: a snapshot). With
        ``truncate_in_progress`` the episodes in progress end as truncations, in copies of
        the flags and counters that change (the live buffer goes on with them)."""
        state = BufferState(
            self.settings,
            self.device,
            self.fields,
            self.counters,
            self.steps_added,
            None if self.priorities is None else self.priorities.raw,
            self.max_priority,
            self.ops.rng_state(),
            self.records,
        )
        if truncate_in_progress:
            clone = copy.copy if self.xp is np else lambda value: value.clone()
            f = {**state.fields, **{k: clone(state.fields[k]) for k in _CLOSING}}
            c = {name: clone(value) for name, value in state.counters.items()}
            self._truncate(f, c)  # in the copies: fields of their own, not records views
            state = dataclasses.replace(state, fields=f, counters=c, records=None)
        return state

    @property
    def n_transitions(self) -> int:
        """Transitions of complete, intact episodes (a host read on torch: for logs)."""
        c = self.counters
        return int((c["sampleable_to"] - c["sampleable_from"]).sum())

    @property
    def episodes_in_progress(self) -> int:
        """Envs whose current episode has stored transitions but has not ended."""
        return int((self.counters["current_start"] < self.steps_added).sum())

    def __repr__(self) -> str:
        s = self.settings
        mix = f"goal_mix={str(self.goal_mix)!r}"
        if s.goal_mix is None:
            strategy = self.goal_selection_strategy.value
            mix = f"n_sampled_goal={s.n_sampled_goal}, goal_selection_strategy={strategy!r}"
        if s.goal_mix_warmup:
            mix += f", goal_mix_warmup={s.goal_mix_warmup}"
        where = "" if self.device is None else f", device={str(self.device)!r}"
        return (
            f"{type(self).__name__}(buffer_size={self.buffer_size}, n_envs={self._n}, "
            f"{mix}{where}, n_transitions={self.n_transitions})"
        )

    def can_sample(self) -> bool:
        """Whether a batch can be drawn (a complete episode, two for ``desired`` goals).
        It reads the device only when its last reading no longer vouches for it."""
        if self.steps_added > self._nonempty_until:
            self._read_horizons()
        if self.steps_added > self._nonempty_until:
            return False
        warm = self.steps_added * self._n < self.settings.goal_mix_warmup
        if "desired" in self._sources and not warm:
            if self.steps_added > self._other_episode_until:
                self._read_other_episode()
            return self.steps_added <= self._other_episode_until
        return True

    def _read_horizons(self) -> None:
        """The one host read of add() and sample(): no episode in progress outgrows the ring
        before add ``_no_overflow_before`` (one starting at ``s`` holds ``rows`` after add
        ``s + rows - 1``), and the newest ended episode is intact while at most
        ``_nonempty_until`` adds are made (add ``s + rows`` overwrites its first row)."""
        c, rows = self.counters, self._rows
        ended = c["sampleable_from"] < c["sampleable_to"]
        newest = self.xp.where(ended, c["newest_start"], -1).max()
        oldest_open = int(c["current_start"].min())
        self._no_overflow_before = oldest_open + rows
        self._nonempty_until = int(newest) + rows if int(newest) >= 0 else -1

    def _read_other_episode(self) -> None:
        """Two complete intact episodes are held while at most ``_other_episode_until`` adds
        are made: the two newest ended ones are among each env's newest and the one before."""
        xp, f, c, rows = self.xp, self.fields, self.counters, self._rows
        ended = c["sampleable_from"] < c["sampleable_to"]
        newest = xp.where(ended, c["newest_start"], -1)
        has_previous = ended & (c["newest_start"] > c["sampleable_from"])
        previous_start = f["episode_start"][(c["newest_start"] - 1) % rows, self._envs]
        previous = xp.where(has_previous, previous_start, -1)
        starts = sorted(self.ops.to_numpy(xp.concatenate([newest, previous])).tolist())
        second = starts[-2] if len(starts) > 1 else -1
        self._other_episode_until = second + rows if second >= 0 else -1

    # ------------------------------------------------------------------ input checks
    def _convert(self, name: str, value: Any, dtype: Any) -> Any:
        """``value`` as this buffer's array type (of ``dtype``, where the buffer casts)."""
        if is_tensor(value):
            if self.device is None:
                value = value.detach().cpu().numpy()
            elif value.device != self.device:
                raise ValueError(
                    f"{name} is a tensor on {value.device}, expected one on {self.device}"
                )
        else:
            value = self.ops.asarray(np.asarray(value))
        return value if dtype is None or value.dtype == dtype else self.ops.cast(value, dtype)

    def _check_obs_fully(self, name: str, obs: object) -> dict[str, Any]:
        """``obs`` as a dict of arrays of the stored shapes, or the error that says what
        is wrong."""
        if not isinstance(obs, Mapping):
            values = "arrays" if self.device is None else "tensors"
            raise TypeError(f"{name} must be a dict of {values}, got {type(obs).__name__}")
        if obs.keys() != self._obs_shapes.keys():
            raise ValueError(
                f"{name} has keys {sorted(obs.keys())}, expected {sorted(self._obs_shapes)}"
            )
        checked = {}
        for key, expected in self._obs_shapes.items():
            value = self._convert(f"{name}[{key!r}]", obs[key], self.fields[f"obs/{key}"].dtype)
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
        action = self._convert("action", action, self.fields["action"].dtype)
        expected = self._action_shape
        if tuple(action.shape) != expected:
            if self.action_shape or tuple(action.shape) != (self._n, 1):
                raise ValueError(
                    f"action has shape {tuple(action.shape)}, expected {expected} "
                    f"(n_envs, *action shape) for {self.action_space}"
                )
            action = action.reshape(self._n)
        return action

    def _per_env(self, name: str, value: Any, dtype: object) -> Any:
        """``value`` as an array of shape ``(n_envs,)`` (any shape of ``n_envs`` values)."""
        value = self._convert(name, value, dtype)
        n = self._n
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
        n = self._n
        if isinstance(infos, Mapping):
            if key not in infos:
                raise KeyError(f"infos has no {key!r} (declared in info_keys)")
            return infos[key]
        if isinstance(infos, (Sequence, np.ndarray)) and len(infos) == n:
            try:
                return np.asarray([info[key] for info in infos])
            except KeyError:
                raise KeyError(f"an info dict has no {key!r} (declared in info_keys)") from None
        values = "arrays" if self.device is None else "values"
        raise TypeError(
            f"infos must be a dict of per-env {values} or a sequence of {n} dicts "
            f"holding {list(self.info_keys)}, got {type(infos).__name__}"
        )

    # ------------------------------------------------------------------ priorities
    def update_priorities(self, indices: Any, td_errors: Any) -> None:
        """Sets the priorities of a batch's ``indices`` (arrays or tensors on any device) to
        ``|td_error| + priority_eps`` (``td_errors``: ``(B,)`` or ``(B, 1)``); an index whose
        row no longer holds a complete episode's transition is skipped. New transitions
        start at the largest priority seen. Bad indices or TD errors are errors."""
        if self.priorities is None:
            raise RuntimeError(
                "update_priorities needs a prioritized buffer: "
                f"{type(self).__name__}(..., prioritized=True)"
            )
        if self.priority != "td_error":
            raise RuntimeError(
                f"update_priorities: this buffer draws by priority={self.priority!r}, set when "
                "each episode ends; TD errors set the priorities of priority='td_error' only"
            )

        def flat(value: object) -> Any:
            array = self._convert("indices", value, None)
            return array.reshape(-1) if array.ndim == 2 and array.shape[1] == 1 else array

        indices, td_errors = flat(indices), flat(td_errors)
        if indices.ndim != 1 or td_errors.ndim != 1 or indices.shape != td_errors.shape:
            raise ValueError(
                f"update_priorities: indices has shape {tuple(indices.shape)} and td_errors "
                f"shape {tuple(td_errors.shape)}; expected two 1-d arrays of the same length"
            )
        if indices.shape[0] == 0:
            return
        torch_float = is_tensor(indices) and indices.dtype.is_floating_point
        if torch_float or not (is_tensor(indices) or indices.dtype.kind in "iu"):
            raise TypeError(f"update_priorities: indices must be integers, got {indices.dtype}")
        capacity = self._rows * self._n
        low, high = int(indices.min()), int(indices.max())
        if low < 0 or high >= capacity:
            raise ValueError(
                f"update_priorities: indices must be in [0, {capacity}) (a batch's indices), "
                f"got values {low}..{high}"
            )
        priority = self.xp.abs(self.ops.asarray(td_errors, np.float64)) + self.priority_eps
        if not bool(self.xp.isfinite(priority).all()):
            bad = int(np.flatnonzero(~np.isfinite(self.ops.to_numpy(priority)))[0])
            raise ValueError(
                f"update_priorities: td_errors[{bad}] = "
                f"{float(self.ops.to_numpy(td_errors)[bad])}; expected finite values"
            )
        self.priorities.update(self.ops.to_int(indices), priority**self.alpha)
        self.max_priority = max(self.max_priority, float(priority.max()))

    # ------------------------------------------------------------------ writing
    def add(
        self,
        obs: Mapping[str, Any],
        next_obs: Mapping[str, Any],
        action: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        infos: Any = None,
    ) -> None:
        """Stores one transition per env (values with leading dimension ``n_envs``);
        ``next_obs`` is the true next observation (the final one at an episode's end)."""
        t = self.steps_added
        row = t % self._rows
        # The hot path (numpy, no info keys, priorities or goal motion): a mid-episode step
        # (flags all False) of values of the stored shapes and dtypes, before the next add
        # that may retire an episode or outgrow the ring, is one copy into its records row.
        # Anything else takes the careful path, which coerces or explains.
        try:
            calm = (
                terminated.dtype is truncated.dtype is _BOOL
                and terminated.tobytes() == self._all_false == truncated.tobytes()
            )
        except AttributeError:
            calm = False
        quiet = calm and t < self._quiet_until
        if quiet and self._write_packed(row, obs, next_obs, action, reward):
            self.steps_added = t + 1
            return
        xp, ops, f, c = self.xp, self.ops, self.fields, self.counters
        rows, n = self._rows, self._n
        if not calm:
            terminated = self._flags("terminated", terminated)
            truncated = self._flags("truncated", truncated)
        info_values = {key: self._info_value(infos, key) for key in self.info_keys}
        if t >= self._no_overflow_before:
            self._read_horizons()
            if t >= self._no_overflow_before:
                env = int(xp.argmin(c["current_start"]))
                raise ValueError(
                    f"the episode of env {env} has reached {rows} transitions without "
                    f"ending: it no longer fits in its {rows} rows (buffer_size="
                    f"{self.buffer_size} // n_envs={n}); use a larger buffer_size"
                )
        if not self._write_packed(row, obs, next_obs, action, reward):
            obs = self._check_obs_fully("obs", obs)
            next_obs = self._check_obs_fully("next_obs", next_obs)
            action = self._check_action(action)
            reward = self._per_env("reward", reward, f["reward"].dtype)
            written = self._write_packed(row, obs, next_obs, action, reward)
            assert written, "checked values fit"
        if t >= rows and t - rows >= self._retire_from:
            old = t - rows  # the counter this add overwrites
            hit = c["sampleable_from"] == old  # its env's oldest episode loses its first row
            if ops.may_hold(hit):
                end = f["episode_end"][row]
                if self.priorities is not None:
                    self.priorities.retired(hit, old, end)
                c["sampleable_from"][...] = xp.where(hit, end, c["sampleable_from"])
                self._retire_from = ops.lowest(c["sampleable_from"])
        for key in self._unpacked_obs:
            f[f"obs/{key}"][row] = obs[key]
            f[f"next_obs/{key}"][row] = next_obs[key]
        if not self._action_packed:
            f["action"][row] = action
        f["terminated"][row] = terminated
        f["truncated"][row] = truncated
        start = c["current_start"]
        f["episode_start"][row] = start
        for key, value in info_values.items():
            self._write_info(key, row, value)
        if self._motion:
            step = ops.asarray(next_obs["achieved_goal"] - obs["achieved_goal"], np.float64)
            step = step.reshape(n, -1)
            if self._motion_weights is not None:
                step = step * self._motion_weights
            moved = ops.norm(step)
            if self.motion_clip is not None:
                moved = xp.minimum(moved, ops.asarray(self.motion_clip, np.float64))
            before = f["motion"][(t - 1) % rows]
            f["motion"][row] = xp.where(start < t, before + moved, moved)
        elif self.priorities is not None:
            self.priorities.raw[row] = self.max_priority**self.alpha
        self.steps_added = t + 1
        if not calm and ops.may_hold(done := terminated | truncated):
            self._close(done, t)
        if self._hot:
            self._quiet_until = min(self._no_overflow_before, rows + self._retire_from)

    def _flags(self, name: str, value: Any) -> Any:
        """A step's ``terminated`` or ``truncated`` as ``(n_envs,)`` bools of this module."""
        if type(value) is type(self.records) and value.shape == (self._n,):
            return value if value.dtype == self.fields["terminated"].dtype else value != 0
        return self._per_env(name, value, None) != 0

    def _write_packed(self, row: int, obs: Any, next_obs: Any, action: Any, reward: Any) -> bool:
        """Writes one add's packed fields (on numpy, flags False and the episode starts
        after them) into records row ``row`` with one copy; False, writing nothing, when a
        value is not an array of its stored shape and dtype."""
        get = self._obs_values
        try:
            values = (*get(obs), *get(next_obs), action, reward)
            if (
                len(obs) != self._n_keys
                or len(next_obs) != self._n_keys
                or tuple(map(_SHAPE, values)) != self._add_shapes
                or tuple(map(_DTYPE, values)) != self._add_dtypes
            ):
                return False
            parts = values if self._pack_index is None else [values[i] for i in self._pack_index]
            if self._stage is not None:
                try:
                    joined = b"".join((*parts, self._meta_bytes))
                except TypeError:  # a view of no bytes of its own: np.concatenate below
                    pass
                else:
                    memory, size, rows, staging, staged, order = self._stage
                    if self._n == 1:
                        memory[row * size : (row + 1) * size] = joined
                    else:
                        staged[:] = joined
                        staging.take(order, out=rows[row], mode="clip")
                    return True
            parts = [*parts[:-1], reward.reshape(self._n, 1)]
            if self._reshape_parts:
                parts = [part.reshape(self._n, -1) for part in parts]
            meta = [] if self._meta is None else [self._meta]  # torch: add() writes them
            self.ops.write_row(self.records, row, [*parts, *meta])
        except (KeyError, TypeError, AttributeError, RuntimeError, ValueError):
            return False
        return True

    def _renew_meta(self) -> None:
        """The flags (False) and episode starts that add() writes after a row's values."""
        if self._meta is not None:
            self._meta_start[:] = self.counters["current_start"]
            self._meta_bytes = self._meta.tobytes()

    def _close(self, done: Any, t: int, f: Any = None, c: Any = None) -> None:
        """Ends the episodes ``[current_start, t]`` of the envs where ``done``, in the buffer
        or only in ``f`` and ``c``, copies of its fields and counters."""
        live = f is None
        xp, rows = self.xp, self._rows
        f, c = (self.fields, self.counters) if live else (f, c)
        start = c["current_start"]
        first = start % rows
        f["episode_end"][first, self._envs] = xp.where(
            done, t + 1, f["episode_end"][first, self._envs]
        )
        c["sampleable_to"][...] = xp.where(done, t + 1, c["sampleable_to"])
        c["newest_start"][...] = xp.where(done, start, c["newest_start"])
        if live and self.priorities is not None:
            self.priorities.closed(done, start, t)
        c["current_start"][...] = xp.where(done, t + 1, start)
        if live:
            self._renew_meta()

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation."""
        if self._truncate():
            self._no_overflow_before = self._nonempty_until = self._other_episode_until = -1
            self._quiet_until = -1

    def _truncate(self, f: Any = None, c: Any = None) -> bool:
        """:meth:`truncate_last_trajectory` in the buffer, or only in ``f`` and ``c`` (as
        :meth:`_close`); whether an episode was in progress."""
        t = self.steps_added
        open_ = (self.counters if c is None else c)["current_start"] < t
        if not bool(open_.any()):
            return False
        (self.fields if f is None else f)["truncated"][(t - 1) % self._rows] |= open_
        self._close(open_, t - 1, f, c)
        return True

    def _write_info(self, key: str, row: int, value: Any) -> None:
        value, name = self._convert(f"infos[{key!r}]", value, None), f"info/{key}"
        old, dtype = self.fields.get(name), numpy_dtype(value.dtype)
        store: Any = old
        if old is None:
            store = self.ops.zeros((self._rows, self._n, *value.shape[1:]), dtype)
        elif np.result_type(numpy_dtype(old.dtype), dtype) != numpy_dtype(old.dtype):
            # Widened to a later value's dtype (an int, then 0.75).
            store = self.ops.asarray(old, np.result_type(numpy_dtype(old.dtype), dtype))
        if store is not old:
            self.fields[name], self._flat[name] = store, flat_view(store)
        store[row] = value.reshape(self._n, *store.shape[2:])

    def counter_of_rows(self, rows: Any = None) -> Any:
        """The counter each of ``rows`` (default: all) holds: the newest ``t`` with
        ``t % rows_per_env == row`` (negative for a row not written yet)."""
        if rows is None:
            rows = self.ops.arange(self._rows)
        last = (self.steps_added - 1) % self._rows
        return (self.steps_added - 1) - ((last - rows) % self._rows)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the buffer to ``path``, atomically, as an ``.npz`` (no pickle), episodes in
        progress as truncated (the live buffer keeps them)."""
        write_file(self.state(truncate_in_progress=True), path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = None,
    ) -> HerReplayBuffer:
        """Reads a file :meth:`save` (or goalenvs 148f048 and earlier) wrote into host memory
        (``device=None``), onto a torch ``device`` or where it was saved from (``"saved"``)."""
        return cls.from_state(read_file(path, device), compute_reward, compute_terminated)

    @property
    def rng(self) -> np.random.Generator | None:
        """The numpy generator of every draw of :meth:`sample`; None on torch."""
        return getattr(self.ops, "rng", None)

    @property
    def generator(self) -> Any:
        """The torch generator of every draw (for a CUDA graph that captures :meth:`sample`);
        None on numpy."""
        return getattr(self.ops, "generator", None)

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, device: Any = None) -> HerBatch:
        """``batch_size`` relabeled transitions in fresh arrays (tensors on ``device``)."""
        try:
            batch = self._sample(int(check_int("batch_size", batch_size, minimum=1)))
        finally:
            self._numbers = None  # the counters may change before the next sample
        return batch if device is None else _batch_on(batch, device)

    def _sample(self, B: int) -> HerBatch:
        xp, ops, f, s = self.xp, self.ops, self.fields, self.settings
        rows = self._rows
        if not self.can_sample():
            if self.steps_added > self._nonempty_until:
                raise RuntimeError(
                    "cannot sample before an episode has ended: the buffer holds no complete "
                    "episode yet (start learning after at least one full episode)"
                )
            raise RuntimeError(
                f"goal_mix desired={self.goal_mix.desired:g} draws the desired goals of other "
                f"episodes, but the buffer holds a single complete episode "
                f"({self.n_transitions} transitions): sample once a second episode is "
                "stored, or let a future-only warm-up run first (goal_mix_warmup)"
            )
        if self.priorities is None:
            env, counter = self._draw_uniform(B)
            weights = ops.full((B,), 1.0, np.float32)
        else:
            row, env, mass, total = self.priorities.draw(B)
            counter = self.counter_of_rows(row)
            weights = self._importance(mass, total, B)
        n = self._n
        index = (counter % rows) * n + env
        at_index = self._gather(index)  # every packed field of the drawn rows, one take
        start = self._take("episode_start", index)
        end = self._take("episode_end", (start % rows) * n + env)
        relabel, goals = self._draw_goals(B, env, counter, start, end)
        own = self._field(at_index, "obs/desired_goal", index)
        goals = xp.where(relabel.reshape(B, *([1] * (own.ndim - 1))), goals, own)
        # Every step k of every return, as one batch of steps * B: counter + k while it is
        # inside the episode (the last counter of the episode past its end: masked below).
        steps = s.n_step
        if steps == 1:
            step_index, at_step, desired, relabel_k = index, at_index, goals, relabel
        else:
            ks = xp.stack([counter + k for k in range(steps)])
            alive = ks < end
            step_index = ((xp.minimum(ks, end - 1) % rows) * n + env).reshape(-1)
            at_step = self._gather(step_index)
            desired = xp.concatenate([goals] * steps)
            relabel_k = xp.concatenate([relabel] * steps)
        achieved = self._field(at_step, "next_obs/achieved_goal", step_index)
        info = {key[5:]: self._take(key, step_index) for key in f if key.startswith("info/")}
        reward_k = xp.where(relabel_k, self._rewards(achieved, desired, info), at_step["reward"])
        done_k = self._take("terminated", step_index)
        if self.compute_terminated is not None:
            value = ops.asarray(_plain(self.compute_terminated(achieved, desired, info)), bool)
            value = value.reshape(()) if tuple(value.shape) == (1,) else value  # one value
            if value.ndim and tuple(value.shape) not in ((steps * B,), (steps * B, 1)):
                raise ValueError(
                    f"compute_terminated returned shape {tuple(value.shape)} for a batch of "
                    f"{steps * B} goals; expected ({steps * B},) or a scalar"
                )
            # One value stands for the whole batch (a constant rule), unlike a reward.
            recomputed = value.reshape(-1) if value.ndim else (done_k & False) | value
            done_k = xp.where(relabel_k, recomputed, done_k)
        if not s.handle_timeout_termination:
            done_k = done_k | self._take("truncated", step_index)
        reward_k, done_k = reward_k.reshape(steps, B), done_k.reshape(steps, B)
        if steps == 1:
            returns, ended, last = reward_k[0], done_k[0], index
            discounts = None
        else:
            # Sum while inside the episode and not yet done: the returns, the steps summed
            # and the done of the last one.
            gamma = s.gamma
            assert gamma is not None  # BufferSettings requires it with n_step > 1
            returns = ops.asarray(reward_k[0], np.float64)
            summed = ops.full((B,), 1, np.int64)
            ended = done_k[0]
            going = ~ended
            for k in range(1, steps):
                take = going & alive[k]
                returns = returns + xp.where(take, gamma**k * reward_k[k], 0.0)
                summed = summed + take
                ended = xp.where(take, done_k[k], ended)
                going = take & ~done_k[k]
            last = ((counter + summed - 1) % rows) * n + env
            discounts = ops.asarray(gamma**summed, np.float32)
        at_last = at_index if steps == 1 else self._gather(last)
        observations = {k[4:]: self._field(at_index, k, index) for k in f if k[:4] == "obs/"}
        observations["desired_goal"] = goals
        next_observations = {
            k[9:]: self._field(at_last, k, last) for k in f if k[:9] == "next_obs/"
        }
        next_observations["desired_goal"] = goals
        return HerBatch(
            observations,
            self._field(at_index, "action", index),
            ops.asarray(returns, np.float32),
            next_observations,
            ops.asarray(ended, np.float32),
            ops.asarray(weights, np.float32),
            index,
            discounts,
        )

    def _take(self, name: str, index: Any) -> Any:
        """Field ``name`` at the flat indices ``index``."""
        return self.ops.take(self._flat[name], index)

    def _gather(self, index: Any) -> dict[str, Any]:
        """Every packed field at the flat indices ``index``: views of one fresh take."""
        rows = self.ops.take(self._records_flat, index)
        count = rows.shape[0]
        return {
            name: rows[:, lo:hi].reshape(count, *shape)
            for name, (lo, hi, shape) in self._packed.items()
        }

    def _field(self, gathered: dict[str, Any], name: str, index: Any) -> Any:
        """Field ``name`` at ``index``: from ``gathered`` where packed, else its own take."""
        value = gathered.get(name)
        return self._take(name, index) if value is None else value

    def _importance(self, mass: Any, total: Any, B: int) -> Any:
        s = self.settings
        if s.priority == "goal_motion":  # a curriculum: no importance weights
            return self.ops.full((B,), 1.0, np.float64)
        c = self.counters
        count = (c["sampleable_to"] - c["sampleable_from"]).sum()  # on the device
        weights = (count * mass / total) ** -s.beta
        return weights / weights.max()

    def _sampleable_numbers(self) -> tuple[Any, Any, Any, Any]:
        """Each env's sampleable width, their cumulative sum and total, and each env's
        offset from a number to its counter (``sampleable_from - (cum - width)``)."""
        if self._numbers is None:
            c = self.counters
            width = c["sampleable_to"] - c["sampleable_from"]
            cum = self.xp.cumsum(width, 0)
            self._numbers = width, cum, cum[-1], c["sampleable_from"] - (cum - width)
        return self._numbers

    def _locate(self, x: Any) -> tuple[Any, Any]:
        """The ``(env, counter)`` of the sampleable transitions numbered ``x``: the envs'
        ranges laid end to end. Widths (2, 0, 3) give cum (2, 2, 5); x = 3 lies in env 2
        (the first cum > 3), at sampleable_from[2] + 3 - 2."""
        _, cum, _, offset = self._sampleable_numbers()
        if self._n == 1:
            return x * 0, x + offset[0]
        env = self.xp.minimum(self.ops.searchsorted(cum, x), self._last_env)
        return env, x + offset[env]

    def _draw_uniform(self, count: int) -> tuple[Any, Any]:
        total = self._sampleable_numbers()[2]
        u = self.ops.uniform(count)
        x = self.xp.minimum(self.ops.to_int(u * total), total - 1)
        return self._locate(x)

    def _draw_goals(self, B: int, env: Any, counter: Any, start: Any, end: Any) -> tuple[Any, Any]:
        """Which transitions are relabeled, and each one's new goal (any goal on those
        that keep theirs)."""
        xp, ops = self.xp, self.ops
        rows = self._rows
        warm = self.steps_added * self._n < self.settings.goal_mix_warmup
        thresholds = self._warmup_thresholds if warm else self._thresholds
        u = ops.uniform(B)
        relabel = u < thresholds[-1]
        source = ops.searchsorted(thresholds, u)  # position in RELABELLING; len: original
        # In-episode sources: a counter in [first, first + span) (future: counter .. end-1).
        first, span = counter, end - counter
        if "final" in self._sources:
            final = source == RELABELLING.index("final")
            first, span = xp.where(final, end - 1, first), xp.where(final, 1, span)
        if "episode" in self._sources:
            episode = source == RELABELLING.index("episode")
            first, span = xp.where(episode, start, first), xp.where(episode, end - start, span)
        span = xp.maximum(span, self._one)
        pick = xp.minimum(ops.to_int(ops.uniform(B) * span), span - 1)
        goal_counter, goal_env = first + pick, env
        if "achieved" in self._sources:
            other_env, other_counter = self._draw_uniform(B)
            chosen = source == RELABELLING.index("achieved")
            goal_counter = xp.where(chosen, other_counter, goal_counter)
            goal_env = xp.where(chosen, other_env, goal_env)
        goals = self._take("next_obs/achieved_goal", (goal_counter % rows) * self._n + goal_env)
        if "desired" in self._sources and not warm:
            other_env, other_counter = self._draw_other_episode(B, env, start, end)
            desired = self._take("obs/desired_goal", (other_counter % rows) * self._n + other_env)
            chosen = (source == RELABELLING.index("desired")).reshape(B, *[1] * (goals.ndim - 1))
            goals = xp.where(chosen, desired, goals)
        return relabel, goals

    def _draw_other_episode(self, B: int, env: Any, start: Any, end: Any) -> tuple[Any, Any]:
        """For each transition (of ``env``, in episode ``[start, end)``), one drawn uniformly
        from the other episodes: its own holds the numbers ``x0 .. x0 + T - 1`` of the envs'
        ranges laid end to end, which ``y`` uniform in ``[0, total - T)`` skips."""
        xp, ops = self.xp, self.ops
        _, _, total, offset = self._sampleable_numbers()
        length = end - start
        x0 = start - offset[env]
        others = xp.maximum(total - length, self._one)
        y = xp.minimum(ops.to_int(ops.uniform(B) * others), others - 1)
        return self._locate(xp.where(y < x0, y, y + length))

    def _rewards(self, achieved: Any, desired: Any, info: dict[str, Any]) -> Any:
        """One ``compute_reward`` call, one reward per pair (never a broadcast scalar)."""
        value = self.compute_reward(achieved, desired, info)
        value = self.ops.asarray(_plain(value))
        count = achieved.shape[0]
        if tuple(value.shape) not in ((count,), (count, 1)):
            # A scalar for the batch included: broadcast, it would pay every relabeled
            # transition the reward of one pair.
            function = self.compute_reward
            owner, name = getattr(function, "__self__", None), getattr(function, "__name__", "")
            qualname = getattr(function, "__qualname__", "")
            if owner is not None and name:
                name = f"{type(owner).__name__}.{name}"
            elif qualname and "<locals>" not in qualname:
                name = qualname
            raise ValueError(
                f"{name or function} returned shape {tuple(value.shape)} for a batch of "
                f"{count} goal pairs (achieved_goal and desired_goal of shape "
                f"{tuple(achieved.shape)}); expected ({count},), one reward per pair: compute "
                "it over the leading dimensions (e.g. np.linalg.norm(achieved_goal - "
                "desired_goal, axis=-1)), as the HER buffers never broadcast one value to a "
                "batch"
            )
        return value.reshape(count)


class DeviceHerReplayBuffer(HerReplayBuffer):
    """:class:`HerReplayBuffer` on a torch device, ``device`` required; its ``sample`` can
    be captured in a CUDA graph (docs/buffer.md)."""

    def __init__(self, *args: Any, device: DeviceLike, **kwargs: Any) -> None:
        super().__init__(*args, device=device, **kwargs)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = "saved",
    ) -> HerReplayBuffer:
        """:meth:`HerReplayBuffer.load`, by default where it was saved from."""
        return super().load(path, compute_reward, compute_terminated, device)


def _batch_on(batch: HerBatch, device: Any) -> HerBatch:
    """``batch`` as torch tensors on ``device`` (numpy arrays without a copy on the CPU)."""
    import torch

    target = torch.device(device)

    def move(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
            if target.type == "cpu":  # .to would return it as it is, at a cost per array
                return value
        return None if value is None else value.to(target)

    return HerBatch(*map(move, batch))


def _plain(value: Any) -> Any:
    """A goal function's result as an array or tensor."""
    return value if is_tensor(value) else np.asarray(value)
