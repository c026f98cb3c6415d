"""The HER buffer's state (:class:`BufferState`) and the array modules it is written over
(:class:`NumpyOps`, :class:`TorchOps`: the few operations numpy and torch spell
differently). :class:`HerStorage` and :class:`HerBufferState` are only for unpickling the
state classes of goalenvs 148f048 and earlier (read by
:func:`goalenvs.her.buffer_file.legacy_state`).
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from goalenvs.core.backend import is_tensor, resolve_device, torch_dtype
from goalenvs.her.settings import BufferSettings

__all__ = ["COUNTERS", "BufferState", "HerBufferState", "HerStorage", "NumpyOps", "TorchOps"]


class NumpyOps:
    """The operations numpy and torch spell differently, numpy's way (``take``: a gather
    along the first axis; ``take_rows(value, rows)``: ``value[rows[i, j], j]``;
    ``may_hold(mask)``: whether ``mask`` may have a true element, exact where that costs
    no host read; ``lowest(value)``: ``value.min()`` where that costs no device read)."""

    device: Any = None
    xp = np
    zeros: Callable[..., Any] = staticmethod(np.zeros)
    full: Callable[..., Any] = staticmethod(np.full)
    asarray: Callable[..., Any] = staticmethod(np.asarray)
    to_int = staticmethod(lambda value: value.astype(np.int64))
    searchsorted = staticmethod(lambda sorted_, values: sorted_.searchsorted(values, "right"))
    norm = staticmethod(lambda value: np.linalg.norm(value, axis=1))
    take_rows = staticmethod(lambda value, rows: np.take_along_axis(value, rows, 0))
    cast = staticmethod(lambda value, dtype: value.astype(dtype))
    arange: Callable[..., Any] = staticmethod(np.arange)
    to_numpy: Callable[..., np.ndarray] = staticmethod(np.asarray)
    may_hold = staticmethod(lambda mask: bool(mask.any()))
    lowest = staticmethod(lambda value: int(value.min()))

    def __init__(self, seed: Any = None) -> None:
        self.rng = np.random.default_rng(seed)

    def uniform(self, count: int) -> Any:
        return self.rng.random(count)

    @staticmethod
    def take(value: Any, index: Any) -> Any:
        # np.take copies a strided source whole first: a view of the records is indexed.
        return value.take(index, 0) if value.flags.c_contiguous else value[index]

    def write_row(self, records: Any, row: int, parts: list[Any]) -> None:
        """Writes ``parts`` (each ``(n_envs, k)``) side by side into ``records[row]``;
        arrays of another module or device raise before anything is written."""
        np.concatenate(parts, axis=1, out=records[row])

    def rng_state(self) -> Any:
        return dict(self.rng.bit_generator.state)

    def set_rng_state(self, state: Any) -> None:
        self.rng.bit_generator.state = dict(state)


class TorchOps(NumpyOps):
    """:class:`NumpyOps` for tensors on the torch device ``device``; every draw comes from
    :attr:`generator`, so a CUDA graph that registers it replays fresh draws."""

    to_int = staticmethod(lambda value: value.long())
    take_rows = staticmethod(lambda value, rows: value.gather(0, rows))
    # index_select on one index: several times faster than indexing by two.
    take = staticmethod(lambda value, index: value.index_select(0, index))
    cast = staticmethod(lambda value, dtype: value.to(dtype))
    to_numpy = staticmethod(lambda value: value.detach().cpu().numpy())
    may_hold = staticmethod(lambda mask: True)  # torch masks its writes instead
    lowest = staticmethod(lambda value: 0)

    def __init__(self, device: Any, seed: Any = None) -> None:
        import torch

        self.xp, self.device = torch, resolve_device(device)
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

    def searchsorted(self, sorted_: Any, values: Any) -> Any:
        return self.xp.searchsorted(sorted_, values, right=True)

    def write_row(self, records: Any, row: int, parts: list[Any]) -> None:
        joined = self.xp.cat(parts, 1)  # the first columns (the caller writes the flags)
        records[row, :, : joined.shape[1]] = joined

    def arange(self, n: int) -> Any:
        return self.xp.arange(n, device=self.device)

    def norm(self, value: Any) -> Any:
        return self.xp.linalg.vector_norm(value, dim=1)

    def rng_state(self) -> Any:
        return self.generator.get_state()

    def set_rng_state(self, state: Any) -> None:
        self.generator.set_state(state)


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
    #: ``(rows, n_envs, width)`` float32, when the float32 fields (:func:`packed_names`),
    #: the flags and the episode starts are views of it (:func:`field_views`); None, or
    #: another width (a pickle of goalenvs 1a3bdcd or earlier): the fields are their own.
    records: Any = None

    def copy(self) -> BufferState:
        """A copy that shares no array with this state."""

        def fresh(value: Any) -> Any:
            if isinstance(value, dict):  # the fields, the counters, numpy's generator state
                return {name: fresh(item) for name, item in value.items()}
            return value.clone() if is_tensor(value) else copy.deepcopy(value)

        arrays = {k: getattr(self, k) for k in ("fields", "counters", "priorities", "rng_state")}
        return dataclasses.replace(self, **fresh(arrays), records=None)


#: Per env: where its episode in progress starts, its sampleable counters [from, to),
#: and where its newest complete episode starts.
COUNTERS = ("current_start", "sampleable_from", "sampleable_to", "newest_start")


def packed_names(settings: BufferSettings) -> list[tuple[str, tuple[int, ...]]]:
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


def empty_state(settings: BufferSettings, ops: NumpyOps) -> BufferState:
    rows, n = settings.rows_per_env, settings.n_envs
    packed = packed_names(settings)
    records = ops.zeros((rows, n, record_width(packed)), np.float32)
    fields: dict[str, Any] = field_views(records, packed)
    for key, space in settings.observation_space.spaces.items():
        if np.dtype(space.dtype) != np.float32:
            for side in ("obs", "next_obs"):
                shape = (rows, n, *(space.shape or ()))
                fields[f"{side}/{key}"] = ops.zeros(shape, np.dtype(space.dtype))
    if "action" not in fields:
        fields["action"] = ops.zeros((rows, n, *settings.action_shape), settings.action_dtype)
    fields["episode_end"] = ops.zeros((rows, n), np.int64)
    if settings.priority == "goal_motion":
        fields["motion"] = ops.zeros((rows, n), np.float64)
    counters = {name: ops.zeros((n,), np.int64) for name in COUNTERS}
    priorities = ops.zeros((rows, n), np.float64) if settings.prioritized else None
    rng = ops.rng_state()
    return BufferState(settings, ops.device, fields, counters, 0, priorities, 1.0, rng, records)


def field_views(
    records: Any, packed: list[tuple[str, tuple[int, ...]]], flags: bool = True
) -> dict[str, Any]:
    """The fields ``packed`` as views of ``records`` ``(rows, n_envs, width)``, and (with
    ``flags``) ``terminated``, ``truncated`` and ``episode_start`` after them: the flags
    the first two bytes of one column, the start an int64 in the last two (8-byte aligned:
    the width is even)."""
    rows, n = records.shape[:2]
    slices = packed_slices(packed)
    views = {
        name: records[:, :, lo:hi].reshape(rows, n, *shape)
        for name, (lo, hi, shape) in slices.items()
    }
    if flags:
        as_ = torch_dtype if is_tensor(records) else np.dtype
        floats = slices["reward"][1]
        flag_bytes = records[:, :, floats : floats + 1].view(as_(np.bool_))
        views["terminated"], views["truncated"] = flag_bytes[..., 0], flag_bytes[..., 1]
        views["episode_start"] = records[:, :, -2:].view(as_(np.int64))[..., 0]
    return views


def record_width(packed: list[tuple[str, tuple[int, ...]]]) -> int:
    """The columns of a records row: the float32 fields', the flags' and the start's."""
    floats = sum(int(np.prod(shape)) for _, shape in packed)
    return floats + 4 - floats % 2


def packed_slices(packed: list[tuple[str, tuple[int, ...]]]) -> dict[str, tuple[int, int, tuple]]:
    """Each packed field's columns ``[lo, hi)`` in a records row, and its shape."""
    out, at = {}, 0
    for name, shape in packed:
        size = int(np.prod(shape))
        out[name] = (at, at + size, shape)
        at += size
    return out


def flat_view(value: Any) -> Any:
    """``value`` of shape ``(rows, n_envs, ...)`` as ``(rows * n_envs, ...)``, no copy."""
    return value.reshape(value.shape[0] * value.shape[1], *value.shape[2:])


def numpy_dtype(dtype: Any) -> Any:
    """A numpy dtype for a numpy dtype or a torch one."""
    if isinstance(dtype, np.dtype):
        return dtype
    return np.dtype(str(dtype).removeprefix("torch."))


# The classes of pickles of goalenvs 148f048 and earlier.
#: The old numpy buffer's arrays, in their pickled order.
HerStorage = collections.namedtuple(
    "HerStorage",
    "records terminated truncated infos offset_in_episode episode_length transition_row "
    "episode_start intact_start sampleable_from sampleable_to episodes_closed",
)


class HerBufferState:
    """The old numpy buffer's state: ``settings``, ``storage`` (a :class:`HerStorage`),
    ``steps_added``, ``priorities``, ``max_priority`` and ``rng_state``, as pickled."""

    settings: Any
    storage: HerStorage
    steps_added: int
    priorities: Any
    max_priority: float
    rng_state: Any
