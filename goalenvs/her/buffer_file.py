"""The file of a :class:`~goalenvs.her.buffer.HerReplayBuffer`: its
:class:`~goalenvs.her.buffer_state.HerBufferState` as one uncompressed ``.npz`` (no pickle).

The archive holds a JSON ``meta`` entry (format, version, the settings, the sampling
generator's state, the largest priority) and one array per store: ``obs__KEY``,
``actions``, ``rewards``, ``terminated``, ``truncated``, ``info__KEY``, ``priorities`` and
the bookkeeping under their file names (``to_start``, ``ep_len``, ``trans_row`` per row;
``head``, ``ep_start``, ``valid_lo``, ``t_count``, ``t_lo``, ``t_hi`` per env, where an env's
``head`` is its next row and ``t_count`` the transitions it added).
"""

from __future__ import annotations

import dataclasses
import json
import os
import zipfile
import zlib
from typing import Any

import numpy as np

from goalenvs.core.io import atomic_write
from goalenvs.her.buffer_state import HerBufferState
from goalenvs.her.common import version_error
from goalenvs.her.settings import BufferSettings

__all__ = ["FILE_FORMAT", "FILE_VERSION", "read_buffer_file", "write_buffer_file"]

FILE_FORMAT = "goalenvs.her.HerReplayBuffer"
FILE_VERSION = 2

# File name -> HerStorage field of the bookkeeping arrays stored as they are.
_STORED = {
    "terminated": "terminated",
    "truncated": "truncated",
    "to_start": "offset_in_episode",
    "ep_len": "episode_length",
    "trans_row": "transition_row",
    "ep_start": "episode_start",
    "valid_lo": "intact_start",
    "t_lo": "sampleable_from",
    "t_hi": "sampleable_to",
}


def write_buffer_file(state: HerBufferState, path: str | os.PathLike) -> None:
    """Writes ``state`` to ``path``, atomically (see :meth:`HerReplayBuffer.save`)."""
    storage = state.storage
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **state.settings.to_meta(),
        "rng_state": state.rng_state,
        "max_priority": state.max_priority,
    }
    n = state.settings.n_envs
    arrays: dict[str, Any] = {f"obs__{k}": v for k, v in storage.observations.items()}
    if state.priorities is not None:
        arrays["priorities"] = state.priorities
    arrays.update({f"info__{k}": v for k, v in storage.infos.items()})
    arrays["actions"] = storage.actions
    arrays["rewards"] = storage.rewards
    arrays.update({name: getattr(storage, field) for name, field in _STORED.items()})
    arrays["head"] = state.steps_added + storage.episodes_closed
    arrays["t_count"] = np.full(n, state.steps_added, dtype=np.int64)
    atomic_write(path, lambda file: np.savez(file, meta=np.array(json.dumps(meta)), **arrays))


def read_buffer_file(path: str | os.PathLike) -> HerBufferState:
    """The state :func:`write_buffer_file` wrote to ``path``, or the ValueError that names
    the file and says why it is not one this code reads."""
    try:
        data = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
        raise _unreadable(path, error) from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(
            f"{os.fspath(path)} is not a goalenvs HER buffer file: it holds one array, "
            "not the .npz archive HerReplayBuffer.save writes"
        )
    try:
        return _from_archive(path, data)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise _unreadable(path, error) from None
    finally:
        data.close()


def _from_archive(path: Any, data: Any) -> HerBufferState:
    name = os.fspath(path)
    files = set(data.files)
    if "meta" not in files:
        raise ValueError(
            f"{name} is not a goalenvs HER buffer file: it has no 'meta' entry "
            f"(found {sorted(files)[:8]})"
        )
    try:
        meta = json.loads(str(data["meta"]))
    except (ValueError, TypeError):
        raise ValueError(f"{name}: unreadable 'meta' entry") from None
    if not isinstance(meta, dict) or meta.get("format") != FILE_FORMAT:
        raise ValueError(
            f"{name} is not a goalenvs HER buffer file: format "
            f"{meta.get('format') if isinstance(meta, dict) else meta!r}, "
            f"expected {FILE_FORMAT!r}"
        )
    if meta.get("version") != FILE_VERSION:
        raise version_error(name, "HER buffer", meta.get("version"), FILE_VERSION)
    try:
        settings = BufferSettings.from_meta(meta)
    except KeyError as error:
        raise ValueError(f"{name}: the metadata has no {error} entry") from None
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    state = HerBufferState.empty(settings, meta["rng_state"])
    storage = state.storage
    targets = {f"obs__{k}": v for k, v in storage.observations.items()}
    targets["actions"] = storage.actions
    targets["rewards"] = storage.rewards
    targets.update({file_name: getattr(storage, field) for file_name, field in _STORED.items()})
    for entry, target in targets.items():
        _restore(name, data, entry, target)
    n = settings.n_envs
    head, t_count = np.zeros(n, np.int64), np.zeros(n, np.int64)
    _restore(name, data, "head", head)
    _restore(name, data, "t_count", t_count)
    if (t_count != t_count[0]).any() or (head < t_count).any():
        raise ValueError(
            f"{name}: t_count {t_count[:8]} and head {head[:8]} are not those of a buffer "
            "that adds one transition per env at a time"
        )
    steps_added = int(t_count[0])
    storage.episodes_closed[:] = head - steps_added
    for key in settings.info_keys:
        entry = f"info__{key}"
        if entry in files:
            stored = data[entry]
            if stored.shape[:1] != (settings.rows_per_env * n,):
                raise ValueError(
                    f"{name}: {entry} has shape {stored.shape}, expected "
                    f"{settings.rows_per_env * n} rows"
                )
            storage.infos[key] = stored.copy()
    priorities = state.priorities
    if priorities is not None:
        _restore(name, data, "priorities", priorities)
        if not (np.isfinite(priorities).all() and (priorities >= 0).all()):
            raise ValueError(f"{name}: priorities hold negative or NaN values")
    return dataclasses.replace(
        state, steps_added=steps_added, max_priority=float(meta.get("max_priority", 1.0))
    )


def _unreadable(path: Any, error: BaseException) -> ValueError:
    return ValueError(
        f"{os.fspath(path)} cannot be read as a HER buffer file ({type(error).__name__}: "
        f"{error}): it is truncated, corrupt or not written by HerReplayBuffer.save; "
        "save the buffer again (or start with an empty one)"
    )


def _restore(name: str, data: Any, entry: str, target: np.ndarray) -> None:
    """Copies the archive's ``entry`` into ``target``, or raises the ValueError that
    names the file and what differs."""
    if entry not in data.files:
        raise ValueError(f"{name}: HER buffer file has no {entry!r} entry (another layout?)")
    stored = data[entry]
    if stored.shape != target.shape or stored.dtype != target.dtype:
        raise ValueError(
            f"{name}: {entry} has shape {stored.shape} dtype {stored.dtype}, "
            f"expected shape {target.shape} dtype {target.dtype}"
        )
    target[...] = stored
