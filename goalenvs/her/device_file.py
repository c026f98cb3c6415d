"""The file of a :class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer`: its
:class:`~goalenvs.her.device_state.DeviceBufferState` as one ``torch.save`` archive of CPU
tensors and plain metadata, readable with ``torch.load(weights_only=True)``.

The archive is ``{"meta": JSON text, "tensors": {name: tensor}}``. The metadata holds the
format, the version, the settings, the count of adds (``t``) and the device the buffer was
saved from; the tensors are the storage's under their file names (``records``,
``row_meta`` with the episode's first counter and number of each row, ``terminated`` and
``truncated`` as bool tensors, ``episode_end``, ``priorities``, the per-env
``episode_start``, ``episode_count``, ``t_lo``, ``t_hi``, ``newest_start``, the separate
fields as ``obs__KEY``, ``next_obs__KEY``, ``action__``, the infos as ``info__KEY``), the
generator's state and the largest priority.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from typing import Any

import torch

from goalenvs.core.backend import resolve_device
from goalenvs.core.io import atomic_write
from goalenvs.core.types import DeviceLike
from goalenvs.her.common import version_error
from goalenvs.her.device_state import (
    META_EPISODE,
    META_START,
    META_TERMINATED,
    META_TRUNCATED,
    DeviceBufferState,
    DeviceStorage,
)
from goalenvs.her.settings import BufferSettings

__all__ = ["FILE_FORMAT", "FILE_VERSION", "read_device_file", "write_device_file"]

FILE_FORMAT = "goalenvs.her.DeviceHerReplayBuffer"
FILE_VERSION = 1

# File name -> DeviceStorage field of the tensors stored as they are.
_STORED = {
    "records": "records",
    "episode_end": "episode_end",
    "episode_start": "episode_start",
    "episode_count": "episode_count",
    "t_lo": "sampleable_from",
    "t_hi": "sampleable_to",
    "newest_start": "newest_start",
}


def _separate_file_name(field: str) -> str:
    """The file name of a separate field: ``obs/KEY`` -> ``obs__KEY``, ``action`` ->
    ``action__``."""
    side, _, key = field.partition("/")
    return f"{side}__{key}"


def write_device_file(state: DeviceBufferState, path: str | os.PathLike) -> None:
    """Writes ``state`` to ``path``, atomically (see :meth:`DeviceHerReplayBuffer.save`)."""
    storage = state.storage
    tensors = {name: getattr(storage, field).cpu() for name, field in _STORED.items()}
    tensors["row_meta"] = storage.row_meta[..., [META_START, META_EPISODE]].cpu()
    tensors["terminated"] = storage.row_meta[..., META_TERMINATED].bool().cpu()
    tensors["truncated"] = storage.row_meta[..., META_TRUNCATED].bool().cpu()
    if storage.priorities is not None:
        tensors["priorities"] = storage.priorities.cpu()
    tensors.update({f"info__{k}": v.cpu() for k, v in storage.infos.items()})
    tensors.update({_separate_file_name(k): v.cpu() for k, v in storage.separate.items()})
    if state.generator_state is not None:
        tensors["generator"] = state.generator_state.cpu()
    tensors["max_priority"] = state.max_priority.cpu()
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **state.settings.to_meta(),
        "t": state.steps_added,
        "device": str(state.device),
    }
    data = {"meta": json.dumps(meta), "tensors": tensors}
    atomic_write(path, lambda file: torch.save(data, file))


def read_device_file(path: str | os.PathLike, device: DeviceLike = None) -> DeviceBufferState:
    """The state :func:`write_device_file` wrote to ``path``, on ``device`` (None: the
    device it was saved from), or the ValueError that names the file and says why it is
    not one this code reads. On a device of another type than the saved one, the
    generator's state does not apply: draws start from a fresh seed."""
    name = os.fspath(path)
    meta, tensors = _read(path)
    try:
        settings = BufferSettings.from_meta(meta)
        saved_device = torch.device(meta["device"])
        steps_added = int(meta["t"])
    except KeyError as error:
        raise ValueError(f"{name}: the metadata has no {error} entry") from None
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None
    target = resolve_device(saved_device if device is None else device)
    generator_state = tensors.get("generator")
    if not isinstance(generator_state, torch.Tensor) or saved_device.type != target.type:
        generator_state = None
    empty = DeviceBufferState.empty(settings, target, generator_state)
    storage = empty.storage
    targets = {file_name: getattr(storage, field) for file_name, field in _STORED.items()}
    targets.update({_separate_file_name(k): v for k, v in storage.separate.items()})
    if storage.priorities is not None:
        targets["priorities"] = storage.priorities
    targets["max_priority"] = empty.max_priority
    for key, target_tensor in targets.items():
        target_tensor.copy_(_stored(name, tensors, key, target_tensor.shape, target_tensor.dtype))
    rows_envs = tuple(storage.episode_end.shape)
    storage.row_meta[..., [META_START, META_EPISODE]] = _stored(
        name, tensors, "row_meta", (*rows_envs, 2), torch.int64
    ).to(target)
    for key, column in (("terminated", META_TERMINATED), ("truncated", META_TRUNCATED)):
        flags = _stored(name, tensors, key, rows_envs, torch.bool)
        storage.row_meta[..., column] = flags.to(target)
    infos = {}
    for key in settings.info_keys:
        stored = tensors.get(f"info__{key}")
        if stored is not None:
            infos[key] = stored.to(target)
    storage = DeviceStorage(**{**storage._asdict(), "infos": infos})
    return DeviceBufferState(settings, storage, steps_added, empty.max_priority, generator_state)


def _read(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and the tensors of the file at ``path``, or the ValueError that says
    why it is not a device HER buffer file this code reads."""
    name = os.fspath(path)
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except (
        OSError,
        RuntimeError,
        EOFError,
        ValueError,
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        io.UnsupportedOperation,
    ) as error:
        raise ValueError(
            f"{name} cannot be read as a device HER buffer file ({type(error).__name__}: "
            f"{str(error)[:200]}): it is truncated, corrupt or not written by "
            "DeviceHerReplayBuffer.save; save the buffer again (or start with an empty one)"
        ) from None
    try:
        meta = json.loads(data["meta"])
        tensors = data["tensors"]
        if meta["format"] != FILE_FORMAT:
            raise ValueError(f"format {meta['format']!r}")
        if not isinstance(tensors, dict):
            raise TypeError(f"'tensors' is a {type(tensors).__name__}, not a dict")
    except (TypeError, KeyError, ValueError) as error:
        raise ValueError(
            f"{name} is not a goalenvs device HER buffer file ({error}); expected a file "
            f"of format {FILE_FORMAT!r}"
        ) from None
    if meta.get("version") != FILE_VERSION:
        raise version_error(name, "device HER buffer", meta.get("version"), FILE_VERSION)
    return meta, tensors


def _stored(
    name: str, tensors: dict[str, object], key: str, shape: Any, dtype: torch.dtype
) -> torch.Tensor:
    """The file's tensor ``key``, checked against the expected shape and dtype."""
    stored = tensors.get(key)
    if not isinstance(stored, torch.Tensor):
        raise ValueError(f"{name}: device HER buffer file has no {key!r} tensor")
    if tuple(stored.shape) != tuple(shape) or stored.dtype != dtype:
        raise ValueError(
            f"{name}: {key} has shape {tuple(stored.shape)} dtype {stored.dtype}, "
            f"expected shape {tuple(shape)} dtype {dtype}"
        )
    return stored
