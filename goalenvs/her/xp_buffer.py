"""WORK IN PROGRESS (branch buffer-wip): the one HER buffer, written once over the array
module. Not wired into the package yet: the old buffers (buffer.py, device_buffer.py)
still serve every consumer. See the module notes at the end for what is left.

:class:`XpHerBuffer` keeps its episodes in time-major rings ``(rows, n_envs)``, one stream
per parallel env, as stable-baselines3's buffer does, in numpy arrays on the host or in
torch tensors on any device; every line below runs on both (``xp`` is the module), and
the few operations the two spell differently sit in :class:`_NumpyOps` /
:class:`_TorchOps`.

Storage
-------
``rows = buffer_size // n_envs``. Each ``add`` writes row ``t % rows`` of every env, ``t``
counting the adds (unwrapped: it only grows). A row holds one transition with both its
observations. ``episode_start[row, env]`` is the counter of the first transition of the
row's episode; ``episode_end[s % rows, env]`` is one past the counter of the last
transition of the episode that starts at counter ``s``, written when it ends. An env's
sampleable transitions are one range of counters ``[sampleable_from, sampleable_to)``:
the end of its newest complete episode, and the start of its oldest intact one. When an
add is about to overwrite the first row of that oldest episode, ``sampleable_from`` jumps
to its end: the whole episode leaves at once.

Example, rows = 4, one env: episodes [0, 3) and [3, 4) stored; add 4 overwrites counter
0 (row 0), so ``sampleable_from`` goes 0 -> 3 and counters 1, 2 leave with it.

Sampling
--------
A transition is drawn uniformly over the sampleable counters of every env (a cumulative
sum over the envs and a ``searchsorted``), or by priority (:class:`Priorities`). Its goal
source is drawn from the relabelling mix (:class:`~goalenvs.her.goal_mix.GoalMix`): for a
transition at counter ``c`` of an episode ``[s, e)``, ``future`` takes the next achieved
goal of a counter uniform in ``c .. e-1``, ``final`` of ``e-1``, ``episode`` of one uniform
in ``s .. e-1``, ``achieved`` of any sampleable transition, ``desired`` the desired goal of
a transition of another episode, ``original`` keeps its own. The rewards of the whole
batch, every step of an n-step return included, come from one ``compute_reward`` call.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import zipfile
from collections.abc import Mapping
from typing import Any

import numpy as np

from goalenvs.core.backend import is_tensor, resolve_device, torch_dtype
from goalenvs.core.io import atomic_write
from goalenvs.her.buffer_state import HerStorage
from goalenvs.her.common import (
    NO_EPISODE_YET,
    HerBatch,
    ReplayBufferBase,
    batch_shape_error,
    no_other_episode_error,
    reward_shape_error,
)
from goalenvs.her.goal_mix import FUTURE_ONLY, RELABELLING
from goalenvs.her.settings import BufferSettings, check_batch_size
from goalenvs.her.sumtree import SumTree

__all__ = ["BufferState", "XpHerBuffer"]


# ---------------------------------------------------------------------- array modules
class _NumpyOps:
    """The operations numpy and torch spell differently, numpy's way."""

    device: Any = None
    xp = np

    def __init__(self, seed: Any = None) -> None:
        self.rng = np.random.default_rng(seed)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return np.zeros(shape, dtype)

    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> Any:
        return np.full(shape, value, dtype)

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        return np.asarray(value, dtype)

    def uniform(self, count: int) -> Any:
        return self.rng.random(count)

    def to_int(self, value: Any) -> Any:
        return value.astype(np.int64)

    def searchsorted(self, sorted_: Any, values: Any) -> Any:
        return np.searchsorted(sorted_, values, side="right")

    def norm(self, value: Any) -> Any:
        return np.linalg.norm(value, axis=1)

    def take_rows(self, value: Any, rows: Any) -> Any:
        """``value[rows[i, j], j]`` for every ``i, j``."""
        return np.take_along_axis(value, rows, 0)

    def take(self, value: Any, index: Any) -> Any:
        """The rows ``index`` (1-d) of ``value``: a gather along the first axis (np.take
        copies a strided source whole first: a view of the records is indexed instead)."""
        if value.flags.c_contiguous:
            return np.take(value, index, axis=0)
        return value[index]

    def float32(self, value: Any) -> Any:
        return value.astype(np.float32)

    def write_row(self, records: Any, row: int, parts: list[Any]) -> None:
        """Writes ``parts`` (each ``(n_envs, k)``) side by side into ``records[row]``;
        arrays of another module or device raise before anything is written."""
        np.concatenate(parts, axis=1, out=records[row])

    def arange(self, n: int) -> Any:
        return np.arange(n)

    def to_numpy(self, value: Any) -> np.ndarray:
        return np.asarray(value)

    def fits(self, value: Any, shape: tuple[int, ...]) -> bool:
        """Whether ``value`` is an array of this module (and device) of ``shape``."""
        return type(value) is np.ndarray and value.shape == shape

    def may_hold(self, mask: Any) -> bool:
        """Whether ``mask`` may have a true element: exactly, where that costs no host
        read (numpy); always True on torch, whose writes are masked instead."""
        return bool(mask.any())

    def lowest(self, value: Any) -> int:
        """``value.min()`` as an int where that costs no device read; torch: 0."""
        return int(value.min())

    def rng_state(self) -> Any:
        return dict(self.rng.bit_generator.state)

    def set_rng_state(self, state: Any) -> None:
        self.rng.bit_generator.state = dict(state)


class _TorchOps(_NumpyOps):
    """:class:`_NumpyOps` for tensors on the torch device ``device``; every draw comes from
    :attr:`generator`, so a CUDA graph that registers it replays fresh draws."""

    def __init__(self, device: Any, seed: Any = None) -> None:
        import torch

        self.xp = torch
        self.device = resolve_device(device)
        self.generator = torch.Generator(device=self.device)
        if seed is None:
            self.generator.seed()
        else:
            self.generator.manual_seed(int(seed))

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self.xp.zeros(shape, dtype=torch_dtype(dtype), device=self.device)

    def full(self, shape: tuple[int, ...], value: Any, dtype: Any) -> Any:
        return self.xp.full(shape, value, dtype=torch_dtype(dtype), device=self.device)

    def asarray(self, value: Any, dtype: Any = None) -> Any:
        dtype = None if dtype is None else torch_dtype(dtype)
        if isinstance(value, np.ndarray) and not value.dtype.isnative:  # torch refuses it
            value = value.astype(value.dtype.newbyteorder("="))
        return self.xp.as_tensor(value, dtype=dtype, device=self.device)

    def uniform(self, count: int) -> Any:
        torch = self.xp
        return torch.rand(count, generator=self.generator, dtype=torch.float64, device=self.device)

    def to_int(self, value: Any) -> Any:
        return value.long()

    def searchsorted(self, sorted_: Any, values: Any) -> Any:
        return self.xp.searchsorted(sorted_, values, right=True)

    def norm(self, value: Any) -> Any:
        return self.xp.linalg.vector_norm(value, dim=1)

    def take_rows(self, value: Any, rows: Any) -> Any:
        return value.gather(0, rows)

    def take(self, value: Any, index: Any) -> Any:
        # index_select on one index: several times faster than indexing by two.
        return value.index_select(0, index)

    def float32(self, value: Any) -> Any:
        return value.float()

    def write_row(self, records: Any, row: int, parts: list[Any]) -> None:
        records[row] = self.xp.cat(parts, 1)

    def arange(self, n: int) -> Any:
        return self.xp.arange(n, device=self.device)

    def to_numpy(self, value: Any) -> np.ndarray:
        return value.detach().cpu().numpy()

    def fits(self, value: Any, shape: tuple[int, ...]) -> bool:
        return (
            isinstance(value, self.xp.Tensor)
            and value.shape == shape
            and value.device == self.device
        )

    def may_hold(self, mask: Any) -> bool:
        return True

    def lowest(self, value: Any) -> int:
        return 0

    def rng_state(self) -> Any:
        return self.generator.get_state()

    def set_rng_state(self, state: Any) -> None:
        self.generator.set_state(state)


# ---------------------------------------------------------------------- priorities
class Priorities:
    """The draws of a prioritized buffer, in proportion to ``p ** alpha``.

    ``raw[row, env]`` holds each row's ``p ** alpha`` (TD-error priorities; goal motion
    reads the buffer's ``motion`` path instead). This face, torch's, keeps no other
    state: a draw masks the rows that cannot be sampled and takes a cumulative sum and a
    ``searchsorted`` (``O(rows * n_envs)``, no host read, capturable).
    :class:`TreePriorities`, numpy's, keeps a sum tree of the sampleable rows' weights
    instead (``O(log N)`` a draw), written as episodes end and leave.
    """

    def __init__(self, buffer: XpHerBuffer, raw: Any) -> None:
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
            start = f["episode_start"] % b.rows
            last = (b.ops.take_rows(f["episode_end"], start) - 1) % b.rows
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
    """:class:`Priorities` over a sum tree of the sampleable rows' weights (numpy)."""

    def __init__(self, buffer: XpHerBuffer, raw: Any) -> None:
        super().__init__(buffer, raw)
        self.tree = SumTree(raw.size)
        self.tree.set_all(super().weights().reshape(-1))

    def _episode_rows(self, envs: np.ndarray, first: np.ndarray, stop: np.ndarray) -> Any:
        """The flat indices of counters ``first[i] .. stop[i] - 1`` of ``envs[i]``."""
        length = stop - first
        offset = np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length)
        rows = (np.repeat(first, length) + offset) % self.buffer.rows
        return rows * self.buffer.n_envs + np.repeat(envs, length), length

    def closed(self, done: Any, start: Any, t: int) -> None:
        envs = np.flatnonzero(done)
        if envs.size == 0:
            return
        b = self.buffer
        flat, length = self._episode_rows(envs, start[envs], np.full(envs.size, t + 1))
        if "motion" in b.fields:
            path = b.fields["motion"][t % b.rows, envs]
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


# ---------------------------------------------------------------------- state
@dataclasses.dataclass
class BufferState:
    """The buffer's whole content but its goal functions (arrays of one module).

    ``fields`` maps ``obs/KEY``, ``next_obs/KEY``, ``action``, ``reward``, ``terminated``,
    ``truncated``, ``episode_start``, ``episode_end``, ``info/KEY`` (and ``motion``, the
    path of the achieved goal so far in its episode, for goal-motion priorities) to
    ``(rows, n_envs, ...)`` arrays; ``counters`` maps :data:`COUNTERS` to ``(n_envs,)``
    int64 arrays; ``priorities`` is each row's ``p ** alpha`` (prioritized by TD error).
    """

    settings: BufferSettings
    device: Any
    fields: dict[str, Any]
    counters: dict[str, Any]
    steps_added: int
    priorities: Any
    max_priority: float
    rng_state: Any
    #: ``(rows, n_envs, width)`` float32, when the float32 fields of :data:`PACKED` are
    #: views of it (side by side, in that order); None: the fields are arrays of their own.
    records: Any = None

    def copy(self) -> BufferState:
        """A copy that shares no array with this state."""

        def fresh(value: Any) -> Any:
            return value.clone() if is_tensor(value) else copy.deepcopy(value)

        return BufferState(
            self.settings,
            self.device,
            {name: fresh(value) for name, value in self.fields.items()},
            {name: fresh(value) for name, value in self.counters.items()},
            self.steps_added,
            None if self.priorities is None else fresh(self.priorities),
            self.max_priority,
            fresh(self.rng_state),
        )


#: Per env: where its episode in progress starts, its sampleable counters [from, to),
#: and where its newest complete episode starts.
COUNTERS = ("current_start", "sampleable_from", "sampleable_to", "newest_start")


def _packed_names(settings: BufferSettings) -> list[tuple[str, tuple[int, ...]]]:
    """The float32 fields packed side by side into one records array, with their shapes
    per row and env: a row is written with one copy and a batch gathered with one take."""
    spaces_ = settings.observation_space.spaces
    packed = [
        (f"{side}/{key}", tuple(spaces_[key].shape or ()))
        for side in ("obs", "next_obs")
        for key in sorted(spaces_)
        if np.dtype(spaces_[key].dtype) == np.float32
    ]
    if np.dtype(settings.action_dtype) == np.float32:
        packed.append(("action", tuple(settings.action_shape)))
    return [*packed, ("reward", ())]


def _empty_state(settings: BufferSettings, ops: _NumpyOps) -> BufferState:
    rows, n = settings.rows_per_env, settings.n_envs
    packed = _packed_names(settings)
    width = sum(int(np.prod(shape)) for _, shape in packed)
    records = ops.zeros((rows, n, width), np.float32)
    fields: dict[str, Any] = _views(records, packed)
    for key, space in settings.observation_space.spaces.items():
        if np.dtype(space.dtype) != np.float32:
            for side in ("obs", "next_obs"):
                shape = (rows, n, *(space.shape or ()))
                fields[f"{side}/{key}"] = ops.zeros(shape, np.dtype(space.dtype))
    if "action" not in fields:
        fields["action"] = ops.zeros((rows, n, *settings.action_shape), settings.action_dtype)
    fields["terminated"] = ops.zeros((rows, n), bool)
    fields["truncated"] = ops.zeros((rows, n), bool)
    fields["episode_start"] = ops.zeros((rows, n), np.int64)
    fields["episode_end"] = ops.zeros((rows, n), np.int64)
    if settings.priority == "goal_motion":
        fields["motion"] = ops.zeros((rows, n), np.float64)
    counters = {name: ops.zeros((n,), np.int64) for name in COUNTERS}
    priorities = ops.zeros((rows, n), np.float64) if settings.prioritized else None
    rng = ops.rng_state()
    return BufferState(settings, ops.device, fields, counters, 0, priorities, 1.0, rng, records)


def _width(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape))


def _views(records: Any, packed: list[tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
    """The fields ``packed`` as views of ``records`` ``(rows, n_envs, width)``."""
    rows, n = records.shape[:2]
    views, at = {}, 0
    for name, shape in packed:
        size = int(np.prod(shape))
        views[name] = records[:, :, at : at + size].reshape(rows, n, *shape)
        at += size
    return views


def _slices(packed: list[tuple[str, tuple[int, ...]]]) -> dict[str, tuple[int, int, tuple]]:
    """Each packed field's columns ``[lo, hi)`` in a records row, and its shape."""
    out, at = {}, 0
    for name, shape in packed:
        size = int(np.prod(shape))
        out[name] = (at, at + size, shape)
        at += size
    return out


# ---------------------------------------------------------------------- the buffer
class XpHerBuffer(ReplayBufferBase):
    """Hindsight Experience Replay over numpy (``device=None``) or torch on ``device``.

    The arguments are :class:`~goalenvs.her.buffer.HerReplayBuffer`'s (see
    :class:`~goalenvs.her.settings.BufferSettings`), with ``device``.
    """

    _NAME = "HerReplayBuffer"

    def __init__(
        self,
        buffer_size: int,
        observation_space: Any,
        action_space: Any,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = None,
        **settings: Any,
    ) -> None:
        checked = BufferSettings(buffer_size, observation_space, action_space, **settings)
        ops = _NumpyOps(checked.seed) if device is None else _TorchOps(device, checked.seed)
        self._adopt(_empty_state(checked, ops), compute_reward, compute_terminated)

    def _adopt(self, state: BufferState, compute_reward: object, terminated: object) -> None:
        if not isinstance(state, BufferState):
            raise TypeError(f"state must be a BufferState, got {type(state).__name__}")
        settings = state.settings
        lead = (settings.rows_per_env, settings.n_envs)
        for name, value in state.fields.items():
            if tuple(value.shape[:2]) != lead:
                raise ValueError(
                    f"state.fields[{name!r}] has shape {tuple(value.shape)}; expected its "
                    f"first two dimensions {lead} (rows_per_env, n_envs)"
                )
        ops = _NumpyOps() if state.device is None else _TorchOps(state.device)
        ops.set_rng_state(state.rng_state)
        self.ops, self.xp, self.device = ops, ops.xp, ops.device
        f = dict(state.fields)
        packed = _packed_names(settings)
        records = state.records
        if records is None:  # fields of their own (a file, a copy): packed side by side
            records = ops.zeros(
                (settings.rows_per_env, settings.n_envs, sum(_width(s) for _, s in packed)),
                np.float32,
            )
            for name, view in _views(records, packed).items():
                view[...] = f[name]
                f[name] = view
        else:  # its views (a pickle brings them back as arrays of their own: stale)
            f.update(_views(records, packed))
        self.records = records
        self._packed = _slices(packed)
        self._records_flat = _flat_view(records)
        keys = sorted(settings.observation_space.spaces)
        obs_dtypes = {key: f[f"obs/{key}"].dtype for key in keys}
        self._configure(settings, compute_reward, terminated, obs_dtypes, f["action"].dtype)
        self.fields, self.counters = f, state.counters
        self.steps_added = state.steps_added
        self.max_priority = state.max_priority
        self.priorities: Priorities | None = None
        if state.priorities is not None:
            face = TreePriorities if ops.xp is np else Priorities
            self.priorities = face(self, state.priorities)
        mix = settings.relabel_mix
        self._mix, self._thresholds = mix, ops.asarray(mix.thresholds(), np.float64)
        self._warmup_thresholds = ops.asarray(FUTURE_ONLY.thresholds(), np.float64)
        weights = settings.motion_weights
        self._motion_weights = None if weights is None else ops.asarray(weights, np.float64)
        self._envs = ops.arange(settings.n_envs)
        self._action_shape = (settings.n_envs, *settings.action_shape)
        # add(): the shapes it takes straight in (obs and next_obs by key, action, reward)
        # and which of them go into the records row, in its order.
        self._obs_keys = keys
        self._add_shapes = [self._obs_shapes[k] for k in keys] * 2
        self._add_shapes += [self._action_shape, (settings.n_envs,)]
        names = [f"obs/{k}" for k in keys] + [f"next_obs/{k}" for k in keys]
        names += ["action", "reward"]
        index = [names.index(name) for name in self._packed]
        self._pack_index = None if index == list(range(len(names))) else index
        self._unpacked_obs = [k for k in keys if f"obs/{k}" not in self._packed]
        self._action_packed = "action" in self._packed
        self._reshape_parts = any(
            len(shape) != 1 for _, _, shape in list(self._packed.values())[:-1]
        )
        self._no_flags = ops.zeros((settings.n_envs,), bool)
        self._all_false = self._no_flags.tobytes() if ops.xp is np else None
        self._rows = settings.rows_per_env
        self._motion = "motion" in f
        # No add before the one that overwrites counter _retire_from retires an episode
        # (numpy reads it; torch, which would have to read the device, masks every add).
        self._retire_from = ops.lowest(state.counters["sampleable_from"])
        self._bool = f["terminated"].dtype
        # Flat (rows * n_envs, ...) views of every field, gathered by row * n_envs + env.
        self._flat = {name: _flat_view(value) for name, value in f.items()}
        # What the host last read of the device (see _read_horizons): -1, nothing yet.
        self._no_overflow_before = -1
        self._nonempty_until = -1
        self._other_episode_until = -1

    def __setstate__(self, pickled: dict[str, Any]) -> None:
        # A pickle of goalenvs 148f048 or earlier holds the old numpy buffer's state.
        state = pickled.get("state")
        if not isinstance(state, BufferState):
            state = legacy_state(pickled)
        self._adopt(state, pickled["compute_reward"], pickled.get("compute_terminated"))

    # ------------------------------------------------------------------ state
    def state(self, *, truncate_in_progress: bool = False) -> BufferState:
        """The buffer's content, on its own arrays (no copy: ``state().copy()`` for a
        snapshot). With ``truncate_in_progress`` the episodes in progress end at their last
        stored transition, as truncations, in copies of the arrays that changes: the live
        buffer goes on with them."""
        state = self._state()
        if not truncate_in_progress:
            return state
        fields = dict(state.fields)
        for name in ("truncated", "episode_end"):
            fields[name] = copy.copy(fields[name]) if self.xp is np else fields[name].clone()
        counters = {
            name: value.copy() if self.xp is np else value.clone()
            for name, value in state.counters.items()
        }
        cut = dataclasses.replace(state, fields=fields, counters=counters)
        closed = type(self).from_state(cut, self.compute_reward, self.compute_terminated)
        closed.truncate_last_trajectory()
        return closed._state()

    def _state(self) -> BufferState:
        return BufferState(
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

    @property
    def rows(self) -> int:
        return self.settings.rows_per_env

    @property
    def n_transitions(self) -> int:
        """Transitions that can be sampled: those of complete, intact episodes (a host
        read on torch: for logs, not the inner loop)."""
        c = self.counters
        return int((c["sampleable_to"] - c["sampleable_from"]).sum())

    @property
    def episodes_in_progress(self) -> int:
        """Envs whose current episode has stored transitions but has not ended."""
        return int((self.counters["current_start"] < self.steps_added).sum())

    def __repr__(self) -> str:
        where = "" if self.device is None else f", device={str(self.device)!r}"
        return (
            f"{type(self).__name__}(buffer_size={self.buffer_size}, n_envs={self.n_envs}, "
            f"{self._relabelling_repr()}{where}, n_transitions={self.n_transitions})"
        )

    def can_sample(self) -> bool:
        """Whether a batch can be drawn (a complete episode, two for ``desired`` goals).
        It reads the device only when its last reading no longer vouches for it."""
        if self.steps_added > self._nonempty_until:
            self._read_horizons()
        if self.steps_added > self._nonempty_until:
            return False
        if self._needs_other_episode() and self.steps_added > self._other_episode_until:
            self._read_other_episode()
            return self.steps_added <= self._other_episode_until
        return True

    def _needs_other_episode(self) -> bool:
        warm = self.steps_added * self.n_envs < self.settings.goal_mix_warmup
        return "desired" in self._mix.sources and not warm

    def _read_horizons(self) -> None:
        """The one host read of add() and sample(): after it, no episode in progress can
        outgrow the ring before add number ``_no_overflow_before`` (an episode that
        starts at ``s`` has ``rows`` transitions after add ``s + rows - 1``), and the
        newest ended episode is intact while at most ``_nonempty_until`` adds have been
        made (its first row ``s`` is overwritten by add ``s + rows``); -1 when none has
        ended."""
        c, rows = self.counters, self.rows
        ended = c["sampleable_from"] < c["sampleable_to"]
        newest = self.xp.where(ended, c["newest_start"], -1).max()
        oldest_open = int(c["current_start"].min())
        self._no_overflow_before = oldest_open + rows
        self._nonempty_until = int(newest) + rows if int(newest) >= 0 else -1

    def _read_other_episode(self) -> None:
        """After it, two complete intact episodes are held while at most
        ``_other_episode_until`` adds have been made: the two newest ended episodes are
        among each env's newest and the one before it; the older stays intact until add
        ``start + rows`` overwrites its first row."""
        xp, f, c, rows = self.xp, self.fields, self.counters, self.rows
        ended = c["sampleable_from"] < c["sampleable_to"]
        newest = xp.where(ended, c["newest_start"], -1)
        has_previous = ended & (c["newest_start"] > c["sampleable_from"])
        previous_start = f["episode_start"][(c["newest_start"] - 1) % rows, self._envs]
        previous = xp.where(has_previous, previous_start, -1)
        starts = sorted(self.ops.to_numpy(xp.concatenate([newest, previous])).tolist())
        second = starts[-2] if len(starts) > 1 else -1
        self._other_episode_until = second + rows if second >= 0 else -1

    # ------------------------------------------------------------------ input checks
    def _convert(self, name: str, value: object, dtype: Any) -> Any:
        if is_tensor(value):
            if self.device is None:
                return value.detach().cpu().numpy()
            if value.device != self.device:
                raise ValueError(
                    f"{name} is a tensor on {value.device}, expected one on {self.device}"
                )
            return value
        return self.ops.asarray(np.asarray(value))

    def _priority_input(self, value: object) -> Any:
        array = self._convert("indices", value, None)
        return array.reshape(-1) if array.ndim == 2 and array.shape[1] == 1 else array

    def _priority_indices_are_integers(self, indices: Any) -> bool:
        return not (
            indices.dtype.is_floating_point
            if is_tensor(indices)
            else (not np.issubdtype(indices.dtype, np.integer))
        )

    def _priority_capacity(self) -> int:
        return self.rows * self.n_envs

    def _priority_of(self, indices: Any, td_errors: Any, capacity: int) -> tuple[object, ...]:
        if int(indices.min()) < 0 or int(indices.max()) >= capacity:
            return indices, None, True, False
        priority = self.xp.abs(self.ops.asarray(td_errors, np.float64)) + self.priority_eps
        return indices, priority, False, not bool(self.xp.isfinite(priority).all())

    def _priority_set(self, indices: Any, priority: Any) -> None:
        assert self.priorities is not None
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
        xp, ops, f, c = self.xp, self.ops, self.fields, self.counters
        rows, n, t = self._rows, self.n_envs, self.steps_added
        # The hot path: values of the stored shapes go straight into one records row;
        # any other goes through the careful checks, which coerce or explain. On numpy,
        # a mid-episode step's flags are recognized by their bytes (cheaper than any()).
        ending = True
        if self._all_false is not None and _all_false(terminated, truncated, self._all_false):
            ending = False
        else:
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
        row = t % rows
        if not self._write_packed(row, obs, next_obs, action, reward):
            obs = self._check_obs_fully("obs", obs)
            next_obs = self._check_obs_fully("next_obs", next_obs)
            action = self._check_action(action)
            reward = self._per_env("reward", reward, None)
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
        if ending:
            done = terminated | truncated
            if ops.may_hold(done):
                self._close(done, t)

    def _flags(self, name: str, value: Any) -> Any:
        """A step's ``terminated`` or ``truncated`` as ``(n_envs,)`` bools of this module."""
        if type(value) is type(self._no_flags) and value.shape == (self.n_envs,):
            return value if value.dtype == self._bool else value != 0
        return self._per_env(name, value, None) != 0

    def _write_packed(self, row: int, obs: Any, next_obs: Any, action: Any, reward: Any) -> bool:
        """Writes the packed fields of one add into records row ``row``, with one copy;
        False, writing nothing, when a value is not an array of its stored shape (the
        careful checks then coerce it or say why)."""
        keys = self._obs_keys
        try:
            values = [obs[k] for k in keys] + [next_obs[k] for k in keys] + [action, reward]
            if (
                len(obs) != len(keys)
                or len(next_obs) != len(keys)
                or [v.shape for v in values] != self._add_shapes
            ):
                return False
            values[-1] = reward.reshape(self.n_envs, 1)
            parts = values if self._pack_index is None else [values[i] for i in self._pack_index]
            if self._reshape_parts:
                parts = [part.reshape(self.n_envs, -1) for part in parts]
            self.ops.write_row(self.records, row, parts)
        except (KeyError, TypeError, AttributeError, RuntimeError, ValueError):
            return False
        return True

    def _close(self, done: Any, t: int) -> None:
        """Ends the episodes ``[current_start, t]`` of the envs where ``done``."""
        xp, f, c, rows = self.xp, self.fields, self.counters, self.rows
        start = c["current_start"]
        first = start % rows
        f["episode_end"][first, self._envs] = xp.where(
            done, t + 1, f["episode_end"][first, self._envs]
        )
        c["sampleable_to"][...] = xp.where(done, t + 1, c["sampleable_to"])
        c["newest_start"][...] = xp.where(done, start, c["newest_start"])
        if self.priorities is not None:
            self.priorities.closed(done, start, t)
        c["current_start"][...] = xp.where(done, t + 1, start)

    def truncate_last_trajectory(self) -> None:
        """Ends every episode in progress at its last stored transition, as a truncation."""
        c, f, t = self.counters, self.fields, self.steps_added
        open_ = c["current_start"] < t
        if not bool(open_.any()):
            return
        f["truncated"][(t - 1) % self.rows] |= open_
        self._close(open_, t - 1)
        self._no_overflow_before = self._nonempty_until = self._other_episode_until = -1

    def _write_info(self, key: str, row: int, value: Any) -> None:
        value = self._convert(f"infos[{key!r}]", value, None)
        store = self.fields.get(f"info/{key}")
        if store is None:
            shape = (self.rows, self.n_envs, *value.shape[1:])
            store = self.ops.zeros(shape, _numpy_dtype(value.dtype))
            self.fields[f"info/{key}"] = store
            self._flat[f"info/{key}"] = _flat_view(store)
        elif store.dtype != value.dtype:  # widened to a later value's (an int, then 0.75)
            old = _numpy_dtype(store.dtype)
            wider = np.result_type(old, _numpy_dtype(value.dtype))
            if wider != old:
                store = self.ops.asarray(store, wider)
                self.fields[f"info/{key}"] = store
                self._flat[f"info/{key}"] = _flat_view(store)
        store[row] = value.reshape(self.n_envs, *store.shape[2:])

    def counter_of_rows(self) -> Any:
        """The counter each row holds now: the newest ``t`` with ``t % rows == row``
        (negative for a row not written yet)."""
        rows, t = self.rows, self.steps_added
        last = (t - 1) % rows
        return (t - 1) - ((last - self.ops.arange(rows)) % rows)

    def save(self, path: str | os.PathLike) -> None:
        """Writes the buffer to ``path`` as an uncompressed ``.npz`` (no pickle), the same
        file on numpy and on torch; episodes in progress are written as truncated (the
        live buffer keeps them), atomically (a crash never leaves half a file)."""
        write_file(self.state(truncate_in_progress=True), path)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        compute_reward: object,
        compute_terminated: object = None,
        device: Any = "saved",
    ) -> XpHerBuffer:
        """Reads a file :meth:`save` wrote, where it was saved from (numpy, or its torch
        device), on numpy (``device=None``) or on ``device``; a file of another kind is
        the ValueError that names it."""
        return cls.from_state(read_file(path, device), compute_reward, compute_terminated)

    @property
    def generator(self) -> Any:
        """The torch generator of every draw (register it with a CUDA graph that captures
        :meth:`sample`); None on numpy, whose draws come from a numpy Generator."""
        return getattr(self.ops, "generator", None)

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int, device: Any = None) -> HerBatch:
        """``batch_size`` relabeled transitions; fresh arrays, which the next call leaves
        alone (tensors on ``device`` when given)."""
        batch = self._sample(check_batch_size(batch_size))
        return batch if device is None else _batch_on(batch, device)

    def _sample(self, B: int) -> HerBatch:
        xp, ops, f, s = self.xp, self.ops, self.fields, self.settings
        rows = self.rows
        if not self.can_sample():
            if self.steps_added > self._nonempty_until:
                raise RuntimeError(NO_EPISODE_YET)
            raise no_other_episode_error(self._mix, self.n_transitions)
        weights = None
        if self.priorities is None:
            env, counter = self._draw_uniform(B)
        else:
            row, env, mass, total = self.priorities.draw(B)
            counter = self.counter_of_rows()[row]
            weights = self._importance(mass, total, B)
        n = self.n_envs
        index = (counter % rows) * n + env
        at_index = self._gather(index)  # every packed field of the drawn rows, one take
        start = self._take("episode_start", index)
        end = self._take("episode_end", (start % rows) * n + env)
        relabel, goals = self._draw_goals(B, env, counter, start, end)
        own = at_index.get("obs/desired_goal")
        if own is None:
            own = self._take("obs/desired_goal", index)
        goals = xp.where(relabel.reshape(B, *([1] * (own.ndim - 1))), goals, own)
        # Every step k of every return, as one batch of steps * B: counter + k while it is
        # inside the episode (the last counter of the episode past its end: masked below).
        steps = s.n_step
        ks = xp.stack([counter + k for k in range(steps)])
        alive = ks < end
        step_index = (
            index if steps == 1 else ((xp.minimum(ks, end - 1) % rows) * n + env).reshape(-1)
        )
        at_step = at_index if steps == 1 else self._gather(step_index)
        achieved = self._field(at_step, "next_obs/achieved_goal", step_index)
        desired = xp.concatenate([goals] * steps)
        info = {key[5:]: self._take(key, step_index) for key in f if key.startswith("info/")}
        relabel_k = xp.concatenate([relabel] * steps)
        reward_k = xp.where(relabel_k, self._rewards(achieved, desired, info), at_step["reward"])
        done_k = self._take("terminated", step_index)
        if self.compute_terminated is not None:
            value = ops.asarray(_plain(self.compute_terminated(achieved, desired, info)), bool)
            value = value.reshape(()) if tuple(value.shape) == (1,) else value  # one value
            if value.ndim and tuple(value.shape) not in ((steps * B,), (steps * B, 1)):
                raise batch_shape_error("compute_terminated", tuple(value.shape), steps * B)
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
            discounts = ops.float32(gamma**summed)
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
            ops.float32(returns),
            next_observations,
            ops.float32(ended),
            ops.float32(weights) if weights is not None else ops.full((B,), 1.0, np.float32),
            index,
            discounts,
        )

    def _take(self, name: str, index: Any) -> Any:
        """Field ``name`` at the flat indices ``index``."""
        return self.ops.take(self._flat[name], index)

    def _gather(self, index: Any) -> dict[str, Any]:
        """Every packed field at the flat indices ``index``: one take of the records,
        then views of its columns (fresh arrays: no later call writes into them)."""
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

    def _sampleable_numbers(self) -> tuple[Any, Any, Any]:
        c = self.counters
        width = c["sampleable_to"] - c["sampleable_from"]
        cum = self.xp.cumsum(width, 0)
        return width, cum, cum[-1]

    def _locate(self, x: Any) -> tuple[Any, Any]:
        """The ``(env, counter)`` of the sampleable transitions numbered ``x``: the envs'
        ranges laid end to end. Widths (2, 0, 3) give cum (2, 2, 5); x = 3 lies in env 2
        (the first cum > 3), at sampleable_from[2] + 3 - 2."""
        width, cum, _ = self._sampleable_numbers()
        env = self.ops.searchsorted(cum, x)
        env = self.xp.minimum(env, self.ops.asarray(self.n_envs - 1))
        return env, x + (self.counters["sampleable_from"] - (cum - width))[env]

    def _draw_uniform(self, count: int) -> tuple[Any, Any]:
        _, _, total = self._sampleable_numbers()
        u = self.ops.uniform(count)
        x = self.xp.minimum(self.ops.to_int(u * total), total - 1)
        return self._locate(x)

    def _draw_goals(self, B: int, env: Any, counter: Any, start: Any, end: Any) -> tuple[Any, Any]:
        """Which transitions are relabeled, and each one's new goal (any goal on those
        that keep theirs)."""
        xp, ops = self.xp, self.ops
        rows = self.rows
        warm = self.steps_added * self.n_envs < self.settings.goal_mix_warmup
        thresholds = self._warmup_thresholds if warm else self._thresholds
        u = ops.uniform(B)
        relabel = u < thresholds[-1]
        source = ops.searchsorted(thresholds, u)  # position in RELABELLING; len: original
        # In-episode sources: a counter in [first, first + span).
        final, episode = RELABELLING.index("final"), RELABELLING.index("episode")
        first = xp.where(source == final, end - 1, xp.where(source == episode, start, counter))
        span = xp.where(source == final, 1, xp.where(source == episode, end - start, end - counter))
        span = xp.maximum(span, ops.asarray(1))
        pick = xp.minimum(ops.to_int(ops.uniform(B) * span), span - 1)
        goal_counter, goal_env = first + pick, env
        if "achieved" in self._mix.sources:
            other_env, other_counter = self._draw_uniform(B)
            chosen = source == RELABELLING.index("achieved")
            goal_counter = xp.where(chosen, other_counter, goal_counter)
            goal_env = xp.where(chosen, other_env, goal_env)
        goals = self._take("next_obs/achieved_goal", (goal_counter % rows) * self.n_envs + goal_env)
        if "desired" in self._mix.sources and not warm:
            other_env, other_counter = self._draw_other_episode(B, env, start, end)
            desired = self._take(
                "obs/desired_goal", (other_counter % rows) * self.n_envs + other_env
            )
            chosen = (source == RELABELLING.index("desired")).reshape(B, *[1] * (goals.ndim - 1))
            goals = xp.where(chosen, desired, goals)
        return relabel, goals

    def _draw_other_episode(self, B: int, env: Any, start: Any, end: Any) -> tuple[Any, Any]:
        """For each transition (of ``env``, in the episode ``[start, end)``), a transition
        drawn uniformly from every other sampleable episode. Its own episode occupies the
        numbers ``x0 .. x0 + T - 1`` of the envs' ranges laid end to end; a number ``y``
        uniform in ``[0, total - T)`` skips over them."""
        xp, ops = self.xp, self.ops
        width, cum, total = self._sampleable_numbers()
        length = end - start
        x0 = (cum - width)[env] + start - self.counters["sampleable_from"][env]
        others = xp.maximum(total - length, ops.asarray(1))
        y = xp.minimum(ops.to_int(ops.uniform(B) * others), others - 1)
        return self._locate(xp.where(y < x0, y, y + length))

    def _rewards(self, achieved: Any, desired: Any, info: dict[str, Any]) -> Any:
        """One ``compute_reward`` call for the whole batch; one reward per pair, never a
        broadcast scalar."""
        value = self.compute_reward(achieved, desired, info)
        value = self.ops.asarray(value if is_tensor(value) else np.asarray(value))
        count = achieved.shape[0]
        if tuple(value.shape) not in ((count,), (count, 1)):
            raise reward_shape_error(
                self.compute_reward, tuple(value.shape), count, tuple(achieved.shape)
            )
        return value.reshape(count)


# ---------------------------------------------------------------------- the file
FILE_FORMAT = "goalenvs.her.buffer"
FILE_VERSION = 3  # after the numpy buffer's 2 and the device buffer's 1


def write_file(state: BufferState, path: str | os.PathLike) -> None:
    """Writes ``state`` to ``path`` (see :meth:`XpHerBuffer.save`)."""

    def host(value: Any) -> np.ndarray:
        return value.detach().cpu().numpy() if is_tensor(value) else np.asarray(value)

    torch_rng = is_tensor(state.rng_state)
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **state.settings.to_meta(),
        "steps_added": state.steps_added,
        "max_priority": state.max_priority,
        "rng_state": None if torch_rng else state.rng_state,
        "device": None if state.device is None else str(state.device),
    }
    arrays: dict[str, Any] = {f"field__{name}": host(v) for name, v in state.fields.items()}
    arrays.update({f"counter__{name}": host(value) for name, value in state.counters.items()})
    if state.priorities is not None:
        arrays["priorities"] = host(state.priorities)
    if torch_rng:
        arrays["torch_generator"] = host(state.rng_state)
    arrays["meta"] = np.array(json.dumps(meta))
    atomic_write(path, lambda file: np.savez(file, **arrays))


def read_file(path: str | os.PathLike, device: Any = "saved") -> BufferState:
    """The state :func:`write_file` wrote to ``path``, where it was saved from
    (``"saved"``), as numpy arrays (``device=None``) or as tensors on ``device``, or the
    ValueError that names the file and what to do."""
    name = os.fspath(path)
    try:
        return _read_file(path, device)
    except ValueError as error:
        if name in str(error):
            raise
        failure: Exception = error
    except (OSError, EOFError, KeyError, zipfile.BadZipFile) as error:
        if isinstance(error, FileNotFoundError):
            raise
        failure = error
    # A member's array read lazily, after the archive opened: a corrupt member, a missing
    # entry.
    raise ValueError(
        f"{name} cannot be read as a HER buffer file ({type(failure).__name__}: {failure}): "
        "it is truncated, corrupt or not written by HerReplayBuffer.save"
    ) from None


def _read_file(path: str | os.PathLike, device: Any) -> BufferState:
    name = os.fspath(path)
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"{name} cannot be read as a HER buffer file ({type(error).__name__}): it is "
            "truncated, corrupt or not written by HerReplayBuffer.save (a device buffer "
            "file of goalenvs 148f048 or earlier is a torch file: load it there, or start "
            "with an empty buffer)"
        ) from None
    if not hasattr(data, "files"):  # a .npy file: one array
        raise ValueError(f"{name} is not a HER buffer file: it holds one array, not an .npz")
    with data:
        if "meta" not in data.files:  # a torch file: the old device buffer's?
            return _read_old_device_file(name, device)
        meta = json.loads(str(data["meta"]))
        kind = meta.get("format") if isinstance(meta, dict) else None
        if kind == _OLD_NUMPY_FORMAT and meta.get("version") == 2:
            arrays = {key: data[key] for key in data.files}
            return _read_old_numpy_file(name, arrays, meta, device)
        if kind != FILE_FORMAT or meta.get("version") != FILE_VERSION:
            raise ValueError(
                f"{name} is not a HER buffer file of this goalenvs (format {kind!r}, version "
                f"{meta.get('version') if isinstance(meta, dict) else None!r}; expected "
                f"{FILE_FORMAT!r} version {FILE_VERSION}): a file of goalenvs 148f048 or "
                "earlier loads there; here, start with an empty buffer"
            )
        try:
            settings = BufferSettings.from_meta(meta)
        except KeyError as error:
            raise ValueError(f"{name}: the metadata has no {error} entry") from None
        except ValueError as error:
            raise ValueError(f"{name}: {error}") from None
        if device == "saved":
            device = meta.get("device")
        ops = _NumpyOps() if device is None else _TorchOps(device)
        empty = _empty_state(settings, ops)
        fields = {}
        for key in data.files:
            if key.startswith("field__"):
                fields[key[7:]] = ops.asarray(data[key])
        counters = {key: ops.asarray(data[f"counter__{key}"]) for key in COUNTERS}
        for field, value in empty.fields.items():
            if field not in fields or tuple(fields[field].shape) != tuple(value.shape):
                raise ValueError(f"{name}: the field {field!r} is missing or of another shape")
        priorities = ops.asarray(data["priorities"]) if "priorities" in data.files else None
        held = data["priorities"] if priorities is not None else np.zeros(0)
        if not (np.isfinite(held) & (held >= 0)).all():
            raise ValueError(f"{name}: priorities hold negative or NaN values")
        rng_state: Any = meta.get("rng_state")
        if device is None:
            rng_state = rng_state or empty.rng_state
        elif "torch_generator" in data.files and ops.device.type == "cpu":
            import torch

            rng_state = torch.from_numpy(data["torch_generator"])
        else:  # another kind of generator: a fresh seed
            rng_state = empty.rng_state
    return BufferState(
        settings,
        ops.device,
        fields,
        counters,
        int(meta["steps_added"]),
        priorities,
        float(meta["max_priority"]),
        rng_state,
    )


# The files of goalenvs 148f048 and earlier: the numpy buffer's .npz (its own layout, an
# extra row per episode for the final observation) and the device buffer's torch file
# (this layout, packed). Both convert into a BufferState; files were saved with every
# episode in progress truncated, so every env starts a new episode after the load.
_OLD_NUMPY_FORMAT = "goalenvs.her.HerReplayBuffer"
_OLD_DEVICE_FORMAT = "goalenvs.her.DeviceHerReplayBuffer"


def _settings_of(name: str, meta: Mapping[str, Any]) -> BufferSettings:
    try:
        return BufferSettings.from_meta(meta)
    except KeyError as error:
        raise ValueError(f"{name}: the metadata has no {error} entry") from None
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def _as_state(
    settings: BufferSettings,
    device: Any,
    host: dict[str, Any],
    steps_added: int,
    max_priority: float,
    rng_state: Any,
) -> BufferState:
    """A state from numpy arrays ``host`` (fields and counters by name, ``priorities``),
    on numpy (``device`` None) or torch on ``device``."""
    ops = _NumpyOps() if device is None else _TorchOps(device)
    empty = _empty_state(settings, ops)
    fields = {key: ops.asarray(value) for key, value in host.items() if key in empty.fields}
    fields.update({k: ops.asarray(v) for k, v in host.items() if k.startswith("info/")})
    counters = {key: ops.asarray(host[key]) for key in COUNTERS}
    priorities = host.get("priorities")
    if settings.prioritized and priorities is None:
        priorities = np.zeros((settings.rows_per_env, settings.n_envs))
    priorities = None if priorities is None else ops.asarray(priorities, np.float64)
    if rng_state is None:
        rng_state = empty.rng_state
    return BufferState(
        settings, ops.device, fields, counters, steps_added, priorities, max_priority, rng_state
    )


def _read_old_numpy_file(name: str, data: Any, meta: dict[str, Any], device: Any) -> BufferState:
    """The state of a file (or pickle) of the old numpy buffer, in this layout: each
    env's sampleable counters ``[t_lo, t_hi)`` and the episode in progress after them
    ``[t_hi, t_count)`` (none in a file, which saved them truncated) copied to rows
    ``k % rows``."""
    device = None if device == "saved" else device  # it was saved from the host
    settings = _settings_of(name, meta)
    R, n = settings.rows_per_env, settings.n_envs
    steps = int(data["t_count"][0])
    empty = _empty_state(settings, _NumpyOps())
    host: dict[str, Any] = {key: np.zeros_like(value) for key, value in empty.fields.items()}
    lo, hi = data["t_lo"].astype(np.int64), data["t_hi"].astype(np.int64)
    offset_of, length_of = data["to_start"], data["ep_len"]
    transition_row = data["trans_row"]
    old = {f"obs/{key}": data[f"obs__{key}"] for key in settings.observation_space.spaces}
    old_infos = {key[6:]: data[key] for key in data if key.startswith("info__")}
    for key, value in old_infos.items():
        host[f"info/{key}"] = np.zeros((R, n, *value.shape[1:]), value.dtype)
    old_priorities = data.get("priorities")
    priorities = np.zeros((R, n)) if settings.prioritized else None
    newest = np.zeros(n, np.int64)
    for e in range(n):
        k = np.arange(lo[e], steps)
        if k.size == 0:
            continue
        row = transition_row[(k % R) * n + e].astype(np.int64)
        flat, next_flat = row * n + e, ((row + 1) % R) * n + e
        complete = k < hi[e]
        start = np.where(complete, k - offset_of[flat], hi[e])
        first = start[complete]
        end = first + length_of[((row[complete] - offset_of[flat[complete]]) % R) * n + e]
        host["episode_end"][first % R, e] = end
        at = k % R
        for key, values in old.items():
            host[key][at, e] = values[flat]
            host["next_" + key][at, e] = values[next_flat]
        host["action"][at, e] = data["actions"][flat]
        host["reward"][at, e] = data["rewards"][flat]
        host["terminated"][at, e] = data["terminated"][flat]
        host["truncated"][at, e] = data["truncated"][flat]
        host["episode_start"][at, e] = start
        for key, value in old_infos.items():
            host[f"info/{key}"][at, e] = value[flat]
        newest[e] = first[-1] if first.size else 0
        if priorities is not None and old_priorities is not None:
            leaf = old_priorities[flat]
            if settings.priority == "goal_motion":
                # The old leaves hold each episode's (motion + eps) ** alpha: its path.
                alpha = settings.alpha
                path = leaf ** (1 / alpha) - settings.priority_eps if alpha > 0 else 0 * leaf
                host["motion"][at, e] = np.maximum(path, 0.0)
            else:
                priorities[at, e] = leaf
    host.update(
        current_start=hi.copy(),
        sampleable_from=lo,
        sampleable_to=hi,
        newest_start=newest,
        priorities=priorities,
    )
    rng_state = meta.get("rng_state") if device is None else None
    max_priority = float(meta.get("max_priority", 1.0))
    return _as_state(settings, device, host, steps, max_priority, rng_state)


def legacy_state(pickled: Mapping[str, Any]) -> BufferState:
    """The state of a numpy buffer pickled by goalenvs 148f048 or earlier: its
    ``{"state": HerBufferState}`` (see :mod:`goalenvs.her.buffer_state`), or the bare
    ``__dict__`` that 0.1.0 pickled; episodes in progress stay in progress."""
    old = pickled.get("state")
    if old is not None:
        storage, settings = old.storage, old.settings
        steps, priorities = old.steps_added, old.priorities
        max_priority, rng_state = old.max_priority, old.rng_state
    else:  # 0.1.0: the buffer's own attributes
        names = ("_records", "_terminated", "_truncated", "_infos", "_to_start", "_ep_len")
        names += ("_trans_row", "_ep_start", "_valid_lo", "_t_lo", "_t_hi", "_skip")
        storage = HerStorage(*(pickled[name] for name in names))
        settings = BufferSettings(
            pickled["buffer_size"],
            pickled["observation_space"],
            pickled["action_space"],
            n_envs=pickled["n_envs"],
            n_sampled_goal=pickled["n_sampled_goal"],
            goal_selection_strategy=pickled["goal_selection_strategy"],
            handle_timeout_termination=pickled["handle_timeout_termination"],
            info_keys=pickled["info_keys"],
            prioritized=pickled.get("prioritized", False),
            alpha=pickled.get("alpha", 0.6),
            beta=pickled.get("_beta", 0.4),
            priority_eps=pickled.get("priority_eps", 1e-6),
        )
        tree = pickled.get("_tree")
        steps, priorities = int(pickled["_t"]), None if tree is None else tree.leaves
        max_priority = float(pickled.get("_max_priority", 1.0))
        rng_state = dict(pickled["_rng"].bit_generator.state)
    records = storage.records
    data: dict[str, Any] = {
        f"obs__{key[4:]}": records[key] for key in records.dtype.names if key[:4] == "obs/"
    }
    data.update({f"info__{key}": value for key, value in storage.infos.items()})
    data.update(
        actions=records["action"],
        rewards=records["reward"],
        terminated=storage.terminated,
        truncated=storage.truncated,
        to_start=storage.offset_in_episode,
        ep_len=storage.episode_length,
        trans_row=storage.transition_row,
        t_lo=storage.sampleable_from,
        t_hi=storage.sampleable_to,
        t_count=[steps],
    )
    if priorities is not None:
        data["priorities"] = np.asarray(priorities)
    meta = {**settings.to_meta(), "rng_state": rng_state, "max_priority": max_priority}
    return _read_old_numpy_file("a pickled HerReplayBuffer", data, meta, None)


def _read_old_device_file(name: str, device: Any) -> BufferState:
    """The state of a file of the old device buffer: its packed records unpacked."""
    import torch

    try:
        data = torch.load(name, map_location="cpu", weights_only=True)
        meta, tensors = json.loads(data["meta"]), data["tensors"]
    except Exception as error:  # torch raises many kinds on a file that is not its own
        raise ValueError(
            f"{name} is not a HER buffer file ({type(error).__name__}): it is truncated, "
            "corrupt or not written by HerReplayBuffer.save; save the buffer again (or "
            "start with an empty one)"
        ) from None
    if meta.get("format") != _OLD_DEVICE_FORMAT or meta.get("version") != 1:
        raise ValueError(
            f"{name} is not a HER buffer file this goalenvs reads (format "
            f"{meta.get('format')!r}, version {meta.get('version')!r})"
        )
    settings = _settings_of(name, meta)
    R, n = settings.rows_per_env, settings.n_envs
    spaces_ = settings.observation_space.spaces
    host: dict[str, Any] = {}
    names = [f"{side}/{key}" for side in ("obs", "next_obs") for key in sorted(spaces_)]
    shapes = [tuple(spaces_[field.split("/")[1]].shape or ()) for field in names]
    dtypes = [np.dtype(spaces_[field.split("/")[1]].dtype) for field in names]
    names += ["action", "reward"]
    shapes += [settings.action_shape, ()]
    dtypes += [np.dtype(settings.action_dtype), np.dtype(np.float32)]
    records, at = tensors["records"].numpy(), 0
    for field, shape, dtype in zip(names, shapes, dtypes, strict=True):
        if dtype == np.float32:  # packed side by side in records, as the old layout had
            size = int(np.prod(shape))
            host[field] = records[:, :, at : at + size].reshape(R, n, *shape).copy()
            at += size
        else:
            side, _, key = field.partition("/")
            host[field] = tensors[f"{side}__{key}"].numpy()
    meta_rows = tensors["row_meta"].numpy()
    host["terminated"] = tensors["terminated"].numpy()
    host["truncated"] = tensors["truncated"].numpy()
    start, episode = meta_rows[..., 0], meta_rows[..., 1]
    host["episode_start"] = start.copy()
    end = np.zeros((R, n), np.int64)
    old_end = tensors["episode_end"].numpy()
    envs = np.broadcast_to(np.arange(n), (R, n))
    end[start % R, envs] = old_end[episode % R, envs]
    host["episode_end"] = end
    for key, value in tensors.items():
        if key.startswith("info__"):
            host[f"info/{key[6:]}"] = value.numpy()
    if "priorities" in tensors:
        if settings.priority == "goal_motion":  # the old rows held the path so far
            host["motion"] = tensors["priorities"].numpy().astype(np.float64)
        else:
            host["priorities"] = tensors["priorities"].numpy()
    host.update(
        current_start=tensors["episode_start"].numpy(),
        sampleable_from=tensors["t_lo"].numpy(),
        sampleable_to=tensors["t_hi"].numpy(),
        newest_start=tensors["newest_start"].numpy(),
    )
    if device == "saved":
        device = meta.get("device")
    generator = tensors.get("generator")
    same_kind = device is not None and str(meta.get("device", "")).split(":")[0] == str(
        resolve_device(device).type
    )
    rng_state = generator if same_kind and generator is not None else None
    max_priority = float(tensors["max_priority"]) if "max_priority" in tensors else 1.0
    return _as_state(settings, device, host, int(meta["t"]), max_priority, rng_state)


def _all_false(terminated: Any, truncated: Any, all_false: bytes) -> bool:
    """Whether both flags are numpy bool arrays of ``n_envs`` False values, ``all_false``
    being the bytes of one: add()'s test on every mid-episode step. Anything else (a flag
    set, another type or dtype or size) is False, and add() reads the flags with care."""
    try:
        return (
            terminated.dtype == np.bool_
            and truncated.dtype == np.bool_
            and terminated.tobytes() == all_false
            and truncated.tobytes() == all_false
        )
    except AttributeError:
        return False


def _flat_view(value: Any) -> Any:
    """``value`` of shape ``(rows, n_envs, ...)`` as ``(rows * n_envs, ...)``, no copy."""
    return value.reshape(value.shape[0] * value.shape[1], *value.shape[2:])


def _batch_on(batch: HerBatch, device: Any) -> HerBatch:
    """``batch`` as torch tensors on ``device`` (numpy arrays without a copy on the CPU)."""
    import torch

    def move(value: Any) -> Any:
        if value is None:
            return None
        tensor = value if is_tensor(value) else torch.from_numpy(value)
        return tensor.to(device)

    return HerBatch(
        {key: move(value) for key, value in batch.observations.items()},
        move(batch.actions),
        move(batch.rewards),
        {key: move(value) for key, value in batch.next_observations.items()},
        move(batch.dones),
        move(batch.weights),
        move(batch.indices),
        move(batch.discounts),
    )


def _plain(value: Any) -> Any:
    """A goal function's result as an array or tensor."""
    return value if is_tensor(value) else np.asarray(value)


def _numpy_dtype(dtype: Any) -> Any:
    """A numpy dtype for a numpy dtype or a torch one."""
    if isinstance(dtype, np.dtype):
        return dtype
    return np.dtype(str(dtype).removeprefix("torch."))


# Where this stands (branch buffer-wip), and what is left before it can land:
# - Done here: the storage, add, the episode bookkeeping and its host reads (none in
#   sample once can_sample said yes), the goal mix, the terminated/truncated rule, n-step
#   returns in one compute_reward call, priorities (sum tree / cumsum), update_priorities,
#   state, copy, truncate_in_progress, one file format, the two old formats read into it;
#   HerReplayBuffer / DeviceHerReplayBuffer are its faces and sb3.py reads its storage.
# - Tests: tests/her still has ~111 failures that reach old internals (state().storage,
#   _tree, the records layout) or pin the old draws (test_buffer_pinned: re-pin the
#   digests, keep its files loading, as test_xp_buffer_files does); merge
#   test_buffer_backends.py and test_buffer_same_rules.py into test_xp_buffer_backends.py
#   (parametrized over numpy and torch already); tests/train/test_train_prioritized.py
#   reads _tree; benchmarks/her_buffer.py's floor reads state().storage.records.
# - Speed (same machine, same load, 1e5 transitions): numpy add 11-13 us against the old
#   numpy buffer's 3-4 us (SB3's ~8: add >= 2x needs <= 4), numpy sample(2048) on par,
#   sample(256) 1.2-1.4x; torch sample(2048) on the CPU 1.2-1.4x the old device buffer's
#   (the figure asks <= 1.1x). Both old buffers packed the float32 fields of a row into
#   one records array (one write per add, one gather per batch): do that here.
# - Not yet: widening an info store to a later value's dtype, the 0.1.0 pickle layout
#   (_state_from_legacy), a CUDA run of the capture tests, docs/buffer.md.
