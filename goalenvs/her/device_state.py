"""The public state of a :class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer`: its
storage tensors by name.

:meth:`DeviceHerReplayBuffer.state` returns a :class:`DeviceBufferState`,
:meth:`DeviceHerReplayBuffer.from_state` rebuilds a buffer from one, and
:mod:`goalenvs.her.device_file` writes one to a file and reads it back. The state holds
everything the buffer holds but its goal functions: the settings, the tensors
(:class:`DeviceStorage`), the count of ``add`` calls and the generator's state.

Storage
-------
A time-major ring of ``rows = buffer_size // n_envs`` rows: every per-row tensor has shape
``(rows, n_envs, ...)``. A vector env steps all its envs together, so each ``add`` writes
the same row, ``t % rows``, for every env, where ``t`` counts the ``add`` calls
(unwrapped: it only grows). A row holds one transition per env, with both of its
observations: unlike the numpy buffer there is no extra row for an episode's final
observation, at the price of storing each observation twice (the rows of an env would no
longer line up across envs otherwise).

The float32 fields of a row (observation keys, next observation keys, action, reward; the
usual case: all of them) lie side by side in one ``records`` tensor (see
:func:`record_layout`), so that a row is written with one copy and a batch read with one
gather; a field of another dtype gets a tensor of its own in ``separate``. Beside the
transition, ``row_meta`` holds four ints per row: the counter ``t`` of its episode's first
transition, the number of its episode among its env's episodes, and its terminated and
truncated flags (0 or 1), again gathered at once. ``episode_end[m % rows, env]`` holds one
past the counter of the last transition of the env's episode ``m``, written when the
episode ends (an episode spans at least one row, so the ``rows`` newest episode numbers of
an env never collide modulo ``rows``).

An env's episodes follow each other without gaps, so its sampleable transitions are one
range of counters ``[sampleable_from, sampleable_to)``: ``sampleable_to`` is the end of its
newest complete episode and ``sampleable_from`` the start of its oldest intact one. When
an ``add`` is about to overwrite the first row of that oldest episode, ``sampleable_from``
jumps to its end, the next episode's start: the whole episode leaves at once, so a partly
overwritten episode is never sampled, and neither is an episode in progress (its
transitions are at or after ``sampleable_to``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
import torch

from goalenvs.core.backend import torch_dtype
from goalenvs.her.settings import BufferSettings

__all__ = [
    "META_EPISODE",
    "META_START",
    "META_TERMINATED",
    "META_TRUNCATED",
    "DeviceBufferState",
    "DeviceStorage",
    "RecordField",
    "record_layout",
]

# The columns of row_meta.
META_START, META_EPISODE, META_TERMINATED, META_TRUNCATED = range(4)


class RecordField(NamedTuple):
    """Where one stored field lives: columns ``[start, stop)`` of ``records``, or its own
    tensor ``separate[name]`` (``start == stop == -1``)."""

    #: ``"obs/KEY"``, ``"next_obs/KEY"``, ``"action"`` or ``"reward"``.
    name: str
    #: The shape of one env's value.
    shape: tuple[int, ...]
    dtype: torch.dtype
    start: int
    stop: int

    @property
    def in_records(self) -> bool:
        """Whether the field is a slice of ``records`` (float32) rather than separate."""
        return self.start >= 0


def record_layout(settings: BufferSettings) -> tuple[RecordField, ...]:
    """Every stored field of a row, in the records' column order: the observation keys
    (sorted: a space read back from a saved file lists its keys sorted), the next
    observation's, the action and the reward; the float32 ones side by side in
    ``records``, each other one separate."""
    spaces_ = settings.observation_space.spaces
    fields = [
        (f"{side}/{key}", tuple(spaces_[key].shape or ()), torch_dtype(spaces_[key].dtype))
        for side in ("obs", "next_obs")
        for key in sorted(spaces_)
    ]
    fields += [
        ("action", settings.action_shape, torch_dtype(settings.action_dtype)),
        ("reward", (), torch.float32),
    ]
    layout, at = [], 0
    for name, shape, dtype in fields:
        if dtype == torch.float32:
            size = int(np.prod(shape))
            layout.append(RecordField(name, shape, dtype, at, at + size))
            at += size
        else:
            layout.append(RecordField(name, shape, dtype, -1, -1))
    return tuple(layout)


class DeviceStorage(NamedTuple):
    """The tensors of a device HER buffer, by name (see the module docstring); all on one
    device. Per-row tensors have shape ``(rows, n_envs, ...)``, per-env ones ``(n_envs,)``
    (int64)."""

    #: Per row, float32: the fields of :func:`record_layout` that are float32, side by side.
    records: torch.Tensor
    #: Field name -> per-row values, for the fields of another dtype.
    separate: dict[str, torch.Tensor]
    #: Per row, int64: the episode's first counter, the episode's number, terminated,
    #: truncated (columns ``META_*``).
    row_meta: torch.Tensor
    #: Info key -> per-row values; a key's tensor is made at the first ``add``.
    infos: dict[str, torch.Tensor]
    #: Per (episode number % rows, env), int64: one past the episode's last counter.
    episode_end: torch.Tensor
    #: Per row, float32: ``priority ** alpha`` (used only where the row can be sampled);
    #: None unless prioritized.
    priorities: torch.Tensor | None
    #: Per env: the counter of the first transition of the episode in progress.
    episode_start: torch.Tensor
    #: Per env: episodes ended so far.
    episode_count: torch.Tensor
    #: Per env: the sampleable transitions are the counters ``[from, to)``.
    sampleable_from: torch.Tensor
    sampleable_to: torch.Tensor
    #: Per env: the first counter of the newest ended episode, -1 before the first.
    newest_start: torch.Tensor
    #: 0-d int64: the ``add`` calls so far, on the device (what prioritized sampling reads,
    #: so that a captured CUDA graph sees the count of each replay).
    steps_added: torch.Tensor

    @property
    def device(self) -> torch.device:
        """The device every tensor lives on."""
        return self.records.device

    def apply(self, function: Any) -> DeviceStorage:
        """A storage of ``function(tensor)`` for every tensor (None stays None)."""
        values: dict[str, Any] = {}
        for name in self._fields:
            value = getattr(self, name)
            if isinstance(value, dict):
                values[name] = {key: function(item) for key, item in value.items()}
            else:
                values[name] = None if value is None else function(value)
        return DeviceStorage(**values)

    def with_cloned_bookkeeping(self) -> DeviceStorage:
        """A storage that shares the stored fields (records, separate fields, infos,
        priorities) and clones the episode bookkeeping: what ending episodes writes, so
        that ending them in it leaves this one alone."""
        shared = ("records", "separate", "infos", "priorities")
        clones = {name: getattr(self, name).clone() for name in self._fields if name not in shared}
        return self._replace(separate=dict(self.separate), infos=dict(self.infos), **clones)


@dataclasses.dataclass(frozen=True)
class DeviceBufferState:
    """Everything a :class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer` holds but its
    goal functions.

    Returned by :meth:`DeviceHerReplayBuffer.state` with the buffer's own tensors (no copy:
    it changes as the buffer does; :meth:`copy` for a snapshot), taken by
    :meth:`DeviceHerReplayBuffer.from_state` without a copy.
    """

    #: The settings, with the live ``beta``.
    settings: BufferSettings
    storage: DeviceStorage
    #: ``add`` calls so far (each stored one transition per env).
    steps_added: int
    #: 0-d float32: the largest priority seen so far, what new transitions start at.
    max_priority: torch.Tensor
    #: The sampling generator's ``get_state()`` (a CPU uint8 tensor), of a generator of
    #: ``storage.device``'s type; None: draws start from a fresh seed.
    generator_state: torch.Tensor | None

    @property
    def device(self) -> torch.device:
        """The device the tensors live on."""
        return self.storage.device

    @classmethod
    def empty(
        cls, settings: BufferSettings, device: torch.device, generator_state: torch.Tensor | None
    ) -> DeviceBufferState:
        """The state of a new buffer on ``device``: zeroed storage, no transition added."""
        n, rows = settings.n_envs, settings.rows_per_env

        def zeros(*shape: int, dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros((rows, n, *shape), dtype=dtype, device=device)

        def per_env(value: int = 0) -> torch.Tensor:
            return torch.full((n,), value, dtype=torch.int64, device=device)

        layout = record_layout(settings)
        width = max((field.stop for field in layout), default=0)
        storage = DeviceStorage(
            records=zeros(width, dtype=torch.float32),
            separate={f.name: zeros(*f.shape, dtype=f.dtype) for f in layout if not f.in_records},
            row_meta=zeros(4, dtype=torch.int64),
            infos={},
            episode_end=zeros(dtype=torch.int64),
            priorities=zeros(dtype=torch.float32) if settings.prioritized else None,
            episode_start=per_env(),
            episode_count=per_env(),
            sampleable_from=per_env(),
            sampleable_to=per_env(),
            newest_start=per_env(-1),
            steps_added=torch.zeros((), dtype=torch.int64, device=device),
        )
        max_priority = torch.ones((), dtype=torch.float32, device=device)
        return cls(settings, storage, 0, max_priority, generator_state)

    def copy(self) -> DeviceBufferState:
        """A state of clones of every tensor (a snapshot of a live buffer's state)."""
        return dataclasses.replace(
            self,
            storage=self.storage.apply(torch.clone),
            max_priority=self.max_priority.clone(),
            generator_state=None if self.generator_state is None else self.generator_state.clone(),
        )

    def to(self, device: Any) -> DeviceBufferState:
        """This state on ``device`` (the tensors copied there unless already on it); on a
        device of another type the generator's state does not apply and is dropped."""
        device = torch.device(device)
        same_type = device.type == self.device.type
        return dataclasses.replace(
            self,
            storage=self.storage.apply(lambda tensor: tensor.to(device)),
            max_priority=self.max_priority.to(device),
            generator_state=self.generator_state if same_type else None,
        )

    def check(self) -> None:
        """Raises a ValueError naming the first tensor whose shape, dtype or device does
        not match the settings, or a counter out of its range."""
        settings, storage = self.settings, self.storage
        n, rows, device = settings.n_envs, settings.rows_per_env, storage.device
        layout = record_layout(settings)
        width = max((field.stop for field in layout), default=0)
        expected: dict[str, tuple[Any, tuple[int, ...], torch.dtype]] = {
            "records": (storage.records, (rows, n, width), torch.float32),
            "row_meta": (storage.row_meta, (rows, n, 4), torch.int64),
            "episode_end": (storage.episode_end, (rows, n), torch.int64),
            "steps_added": (storage.steps_added, (), torch.int64),
            "max_priority": (self.max_priority, (), torch.float32),
        }
        for name in ("episode_start", "episode_count", "sampleable_from", "sampleable_to"):
            expected[name] = (getattr(storage, name), (n,), torch.int64)
        expected["newest_start"] = (storage.newest_start, (n,), torch.int64)
        for field in layout:
            if not field.in_records:
                tensor = storage.separate.get(field.name)
                expected[f"separate[{field.name!r}]"] = (
                    tensor,
                    (rows, n, *field.shape),
                    field.dtype,
                )
        if settings.prioritized:
            expected["priorities"] = (storage.priorities, (rows, n), torch.float32)
        elif storage.priorities is not None:
            raise ValueError("priorities must be None for a buffer that is not prioritized")
        for name, (tensor, shape, dtype) in expected.items():
            _check_tensor(name, tensor, shape, dtype, device)
        for key, values in storage.infos.items():
            if key not in settings.info_keys:
                raise ValueError(f"storage.infos has {key!r}, not one of {settings.info_keys}")
            if not isinstance(values, torch.Tensor) or tuple(values.shape[:2]) != (rows, n):
                raise ValueError(
                    f"storage.infos[{key!r}] must be a tensor of shape ({rows}, {n}, ...)"
                )
            if values.device != device:
                raise ValueError(f"storage.infos[{key!r}] is on {values.device}, not {device}")
        if self.steps_added < 0:
            raise ValueError(f"steps_added must not be negative, got {self.steps_added}")


def _check_tensor(
    name: str, value: object, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> None:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a tensor, got {type(value).__name__}")
    if tuple(value.shape) != shape or value.dtype != dtype or value.device != device:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)} dtype {value.dtype} on {value.device}, "
            f"expected shape {shape} dtype {dtype} on {device}"
        )
