"""Saving and loading a :class:`~goalenvs.her.buffer.HerReplayBuffer`.

A saved buffer is one uncompressed ``.npz`` (no pickle): a JSON ``meta`` entry (format,
version, the settings, the sampling generator's state, the largest priority) and one array
per store (``obs__KEY``, ``info__KEY``, ``priorities`` and the bookkeeping arrays of
``HerReplayBuffer._state_arrays``). Episodes in progress are written as truncated, from a
copy of the bookkeeping, so the live buffer goes on as it was.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from goalenvs.core.io import atomic_write
from goalenvs.her.common import version_error
from goalenvs.her.settings import BufferSettings

if TYPE_CHECKING:
    from goalenvs.her.buffer import HerReplayBuffer

FILE_FORMAT = "goalenvs.her.HerReplayBuffer"
FILE_VERSION = 2


def save_buffer(buffer: HerReplayBuffer, path: str | os.PathLike) -> None:
    """Writes ``buffer`` to ``path`` (see :meth:`HerReplayBuffer.save`)."""
    snapshot = buffer._closed_copy()
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **BufferSettings.to_meta(buffer),
        "rng_state": buffer._rng.bit_generator.state,
        "max_priority": buffer._max_priority,
    }
    arrays: dict[str, Any] = {f"obs__{k}": v for k, v in snapshot._obs.items()}
    if snapshot._tree is not None:
        arrays["priorities"] = snapshot._tree.leaves
    arrays.update({f"info__{k}": v for k, v in snapshot._infos.items()})
    arrays.update(snapshot._state_arrays())
    atomic_write(path, lambda file: np.savez(file, meta=np.array(json.dumps(meta)), **arrays))


def load_buffer(
    cls: type[HerReplayBuffer],
    path: str | os.PathLike,
    compute_reward: Any,
    compute_terminated: Any,
) -> HerReplayBuffer:
    """Reads a buffer of class ``cls`` from ``path`` (see :meth:`HerReplayBuffer.load`)."""
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
        return _from_archive(cls, path, data, compute_reward, compute_terminated)
    except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as error:
        raise _unreadable(path, error) from None
    finally:
        data.close()


def _from_archive(
    cls: type[HerReplayBuffer], path: Any, data: Any, compute_reward: Any, compute_terminated: Any
) -> HerReplayBuffer:
    files = set(data.files)
    if "meta" not in files:
        raise ValueError(
            f"{os.fspath(path)} is not a goalenvs HER buffer file: it has no 'meta' "
            f"entry (found {sorted(files)[:8]})"
        )
    try:
        meta = json.loads(str(data["meta"]))
    except (ValueError, TypeError):
        raise ValueError(f"{os.fspath(path)}: unreadable 'meta' entry") from None
    if not isinstance(meta, dict) or meta.get("format") != FILE_FORMAT:
        raise ValueError(
            f"{os.fspath(path)} is not a goalenvs HER buffer file: format "
            f"{meta.get('format') if isinstance(meta, dict) else meta!r}, "
            f"expected {FILE_FORMAT!r}"
        )
    if meta.get("version") != FILE_VERSION:
        raise version_error(os.fspath(path), "HER buffer", meta.get("version"), FILE_VERSION)
    buffer = cls(
        compute_reward=compute_reward,
        compute_terminated=compute_terminated,
        **BufferSettings.arguments_from_meta(meta),
    )
    expected = {f"obs__{k}": v for k, v in buffer._obs.items()}
    state = buffer._state_arrays()  # head and t_count are fresh arrays, read below
    expected.update(state)
    for name, target in expected.items():
        _restore(path, data, name, target)
    t_count = state["t_count"]
    if (t_count != t_count[0]).any() or (state["head"] < t_count).any():
        raise ValueError(
            f"{os.fspath(path)}: t_count {t_count[:8]} and head {state['head'][:8]} are "
            "not those of a buffer that adds one transition per env at a time"
        )
    buffer._t = int(t_count[0])
    buffer._skip[:] = state["head"] - buffer._t
    np.equal(state["head"], buffer._ep_start, out=buffer._starting)
    buffer._n_starting = int(buffer._starting.sum())
    for key in buffer.info_keys:
        name = f"info__{key}"
        if name in files:
            stored = data[name]
            if stored.shape[:1] != (buffer.rows_per_env * buffer.n_envs,):
                raise ValueError(
                    f"{os.fspath(path)}: {name} has shape {stored.shape}, expected "
                    f"{buffer.rows_per_env * buffer.n_envs} rows"
                )
            buffer._infos[key] = stored.copy()
    if buffer._tree is not None:
        leaves = np.zeros(buffer._tree.capacity)
        _restore(path, data, "priorities", leaves)
        if not (np.isfinite(leaves).all() and (leaves >= 0).all()):
            raise ValueError(f"{os.fspath(path)}: priorities hold negative or NaN values")
        buffer._tree.set_all(leaves)
        buffer._max_priority = float(meta["max_priority"])
    buffer._summarize()
    state = meta["rng_state"]
    buffer._rng = np.random.Generator(getattr(np.random, state["bit_generator"])())
    buffer._rng.bit_generator.state = state
    return buffer


def _unreadable(path: Any, error: BaseException) -> ValueError:
    return ValueError(
        f"{os.fspath(path)} cannot be read as a HER buffer file ({type(error).__name__}: "
        f"{error}): it is truncated, corrupt or not written by HerReplayBuffer.save; "
        "save the buffer again (or start with an empty one)"
    )


def _restore(path: Any, data: Any, name: str, target: np.ndarray) -> None:
    if name not in data.files:
        raise ValueError(
            f"{os.fspath(path)}: HER buffer file has no {name!r} entry (another layout?)"
        )
    stored = data[name]
    if stored.shape != target.shape or stored.dtype != target.dtype:
        raise ValueError(
            f"{os.fspath(path)}: {name} has shape {stored.shape} dtype {stored.dtype}, "
            f"expected shape {target.shape} dtype {target.dtype}"
        )
    target[...] = stored
