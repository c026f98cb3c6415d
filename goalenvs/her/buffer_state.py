"""The public state of a :class:`~goalenvs.her.buffer.HerReplayBuffer`: its storage by name.

:meth:`HerReplayBuffer.state` returns a :class:`HerBufferState`,
:meth:`HerReplayBuffer.from_state` rebuilds a buffer from one, and
:mod:`goalenvs.her.buffer_file` writes one to a file and reads it back. The state holds
everything the buffer holds but its goal functions: the settings, the arrays
(:class:`HerStorage`), the count of ``add`` calls, the priorities and the sampling
generator's state.

Storage
-------
Each parallel env writes its own *stream* of ``rows_per_env = buffer_size // n_envs``
rows, used as a ring. A row holds one observation (every key of the observation Dict, in
the space's dtype) and the transition taken from it (action, reward, terminated,
truncated and the declared info values). An episode of ``T`` transitions occupies
``T + 1`` consecutive rows: row ``t`` holds ``obs_t`` and transition ``t``, and the next
observation of transition ``t`` is simply row ``t + 1``, so ``next_obs`` is never stored
twice. The extra last row holds the episode's final observation and no transition.

The streams are interleaved: row ``r`` of env ``e`` is element ``r * n_envs + e`` (its
*flat row*) of every per-row array, so that envs which write the same row (all of them,
while their episodes end together, as under a time limit) store a step with one slice per
array. The observation keys, the action and the reward of a row live together in one
record of a structured array (``records``, fields ``obs/KEY``, ``action``, ``reward``):
sampling gathers whole records in one pass. The flags and the info values are separate
arrays.

Every stream counts rows and transitions with *unwrapped* counters that only grow (the
physical row is ``counter % rows_per_env``): ``episode_start`` (first row of the episode
in progress), ``intact_start`` (first row of the oldest intact episode) and the range of
sampleable transitions ``[sampleable_from, sampleable_to)``. An env's next row is
``steps_added + episodes_closed[env]``: one row per transition added, plus one per closed
episode for its final observation. When a write would overwrite a row at or after
``intact_start``, the whole oldest episode leaves the sampleable range first, so a
half-overwritten episode is never sampled.

Three int32 per-row arrays make sampling and relabeling pure index arithmetic:
``transition_row[k]`` is the physical row of the stream's transition ``k`` (a ring too),
``offset_in_episode[row]`` the row's offset in its episode, and ``episode_length[row]``
(at the episode's first row, written when the episode ends) its number of transitions.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from goalenvs.her.settings import BufferSettings

__all__ = ["HerBufferState", "HerStorage", "record_dtype"]


def record_dtype(settings: BufferSettings) -> np.dtype:
    """The dtype of one record: the observation keys (``obs/KEY``, in the space's order),
    the action and the reward."""
    fields: list[tuple[str, Any, tuple[int, ...]]] = [
        (f"obs/{key}", space.dtype, tuple(space.shape or ()))
        for key, space in settings.observation_space.spaces.items()
    ]
    fields += [("action", settings.action_dtype, settings.action_shape), ("reward", np.float32, ())]
    return np.dtype(fields, align=True)


class HerStorage(NamedTuple):
    """The arrays of a numpy HER buffer, by name (see the module docstring).

    Per-row arrays have ``rows_per_env * n_envs`` elements, indexed by flat row
    ``row * n_envs + env``; per-env arrays have ``n_envs``.
    """

    #: Per row: the observation keys, the action and the reward (see :func:`record_dtype`).
    records: np.ndarray
    #: Per row, bool: the transition ended its episode by termination / by truncation.
    terminated: np.ndarray
    truncated: np.ndarray
    #: Info key -> per-row values; a key's array is made at the first ``add``, in the
    #: dtype of its values.
    infos: dict[str, np.ndarray]
    #: Per row, int32: the row's offset in its episode (written when the episode ends).
    offset_in_episode: np.ndarray
    #: Per row, int32: at an episode's first row, its number of transitions.
    episode_length: np.ndarray
    #: Per stream transition ``k`` (at ``k % rows_per_env``), int32: its physical row.
    transition_row: np.ndarray
    #: Per env, int64, unwrapped: the first row of the episode in progress.
    episode_start: np.ndarray
    #: Per env, int64, unwrapped: the first row of the oldest intact episode.
    intact_start: np.ndarray
    #: Per env, int64: the stream's sampleable transitions are ``[from, to)``.
    sampleable_from: np.ndarray
    sampleable_to: np.ndarray
    #: Per env, int64: episodes the env has closed (each took a row for its final
    #: observation).
    episodes_closed: np.ndarray

    @property
    def observations(self) -> dict[str, np.ndarray]:
        """Observation key -> its per-row values: views of ``records``."""
        names = self.records.dtype.names or ()
        return {name[4:]: self.records[name] for name in names if name.startswith("obs/")}

    @property
    def actions(self) -> np.ndarray:
        """The per-row actions: a view of ``records``."""
        return self.records["action"]

    @property
    def rewards(self) -> np.ndarray:
        """The per-row stored rewards: a view of ``records``."""
        return self.records["reward"]

    def copy(self) -> HerStorage:
        """A storage of copies of every array."""
        return self.with_copied_bookkeeping()._replace(
            records=self.records.copy(),
            infos={key: value.copy() for key, value in self.infos.items()},
        )

    def with_copied_bookkeeping(self) -> HerStorage:
        """A storage that shares ``records`` and ``infos`` and copies every other array:
        what closing episodes writes, so that closing them in it leaves this one alone."""
        copies = {name: getattr(self, name).copy() for name in self._fields if name not in _SHARED}
        return self._replace(infos=dict(self.infos), **copies)


_SHARED = ("records", "infos")


@dataclasses.dataclass(frozen=True)
class HerBufferState:
    """Everything a :class:`~goalenvs.her.buffer.HerReplayBuffer` holds but its goal
    functions.

    Returned by :meth:`HerReplayBuffer.state` with the buffer's own arrays (no copy: it
    changes as the buffer does; :meth:`copy` for a snapshot), taken by
    :meth:`HerReplayBuffer.from_state` without a copy.
    """

    #: The settings, with the live ``beta``.
    settings: BufferSettings
    storage: HerStorage
    #: ``add`` calls so far (each stored one transition per env).
    steps_added: int
    #: Per flat row, float64: ``priority ** alpha`` of the row's transition while it can be
    #: sampled, 0 otherwise; None unless ``settings.prioritized``.
    priorities: np.ndarray | None
    #: The largest priority seen so far: what new transitions start at.
    max_priority: float
    #: The sampling generator's ``bit_generator.state``.
    rng_state: dict[str, object]

    @classmethod
    def empty(cls, settings: BufferSettings, rng_state: dict[str, object]) -> HerBufferState:
        """The state of a new buffer: zeroed storage, no transition added."""
        n = settings.n_envs
        total = settings.rows_per_env * n

        def per_env() -> np.ndarray:
            return np.zeros(n, dtype=np.int64)

        storage = HerStorage(
            records=np.zeros(total, record_dtype(settings)),
            terminated=np.zeros(total, dtype=bool),
            truncated=np.zeros(total, dtype=bool),
            infos={},
            offset_in_episode=np.zeros(total, dtype=np.int32),
            episode_length=np.zeros(total, dtype=np.int32),
            transition_row=np.zeros(total, dtype=np.int32),
            episode_start=per_env(),
            intact_start=per_env(),
            sampleable_from=per_env(),
            sampleable_to=per_env(),
            episodes_closed=per_env(),
        )
        priorities = np.zeros(total) if settings.prioritized else None
        return cls(settings, storage, 0, priorities, 1.0, rng_state)

    def copy(self) -> HerBufferState:
        """A state of copies of every array (a snapshot of a live buffer's state)."""
        return dataclasses.replace(
            self,
            storage=self.storage.copy(),
            priorities=None if self.priorities is None else self.priorities.copy(),
            rng_state=_copy_nested(self.rng_state),
        )

    def check(self) -> None:
        """Raises a ValueError naming the first array whose shape or dtype does not match
        the settings, or a counter out of its range."""
        settings = self.settings
        n, total = settings.n_envs, settings.rows_per_env * settings.n_envs
        expected: dict[str, tuple[tuple[int, ...], np.dtype]] = {
            "records": ((total,), record_dtype(settings)),
            "terminated": ((total,), np.dtype(bool)),
            "truncated": ((total,), np.dtype(bool)),
            "offset_in_episode": ((total,), np.dtype(np.int32)),
            "episode_length": ((total,), np.dtype(np.int32)),
            "transition_row": ((total,), np.dtype(np.int32)),
        }
        for name in ("episode_start", "intact_start", "sampleable_from", "sampleable_to"):
            expected[name] = ((n,), np.dtype(np.int64))
        expected["episodes_closed"] = ((n,), np.dtype(np.int64))
        for name, (shape, dtype) in expected.items():
            _check_array(f"storage.{name}", getattr(self.storage, name), shape, dtype)
        for key, values in self.storage.infos.items():
            if key not in settings.info_keys:
                raise ValueError(f"storage.infos has {key!r}, not one of {settings.info_keys}")
            if not isinstance(values, np.ndarray) or values.shape[:1] != (total,):
                raise ValueError(f"storage.infos[{key!r}] must be an array of {total} rows")
        if settings.prioritized:
            if self.priorities is None:
                raise ValueError("priorities is None for a prioritized buffer")
            _check_array("priorities", self.priorities, (total,), np.dtype(np.float64))
        elif self.priorities is not None:
            raise ValueError("priorities must be None for a buffer that is not prioritized")
        if self.steps_added < 0 or (self.storage.episodes_closed < 0).any():
            raise ValueError(
                f"steps_added {self.steps_added} and episodes_closed "
                f"{self.storage.episodes_closed[:8]} must not be negative"
            )


def _check_array(name: str, value: object, shape: tuple[int, ...], dtype: np.dtype) -> None:
    if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype != dtype:
        got = (
            f"shape {value.shape} dtype {value.dtype}"
            if isinstance(value, np.ndarray)
            else type(value).__name__
        )
        raise ValueError(f"{name} has {got}, expected shape {shape} dtype {dtype}")


def _copy_nested(value: object) -> Any:
    """A copy of nested dicts of plain values (a bit generator's state)."""
    if isinstance(value, dict):
        return {key: _copy_nested(item) for key, item in value.items()}
    return value
