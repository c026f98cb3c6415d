"""Only for unpickling: the numpy buffer's state classes of goalenvs 148f048 and earlier.

A stable-baselines3 model's ``save_replay_buffer`` pickles its buffer, and a pickle names
the classes it holds: one saved then refers to these two by this module's path. Unpickled,
they are read into today's buffer by :func:`goalenvs.her.xp_buffer.legacy_state`.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class HerStorage(NamedTuple):
    """The old numpy buffer's arrays, in their pickled order."""

    records: Any
    terminated: Any
    truncated: Any
    infos: Any
    offset_in_episode: Any
    episode_length: Any
    transition_row: Any
    episode_start: Any
    intact_start: Any
    sampleable_from: Any
    sampleable_to: Any
    episodes_closed: Any


class HerBufferState:
    """The old numpy buffer's state: ``settings``, ``storage`` (a :class:`HerStorage`),
    ``steps_added``, ``priorities``, ``max_priority`` and ``rng_state``, as pickled."""

    settings: Any
    storage: HerStorage
    steps_added: int
    priorities: Any
    max_priority: float
    rng_state: Any
