"""Saving and loading a :class:`~goalenvs.her.device_buffer.DeviceHerReplayBuffer`.

A saved device buffer is one ``torch.save`` archive of CPU tensors and plain metadata,
readable with ``torch.load(weights_only=True)``: ``{"meta": JSON text, "tensors": {name:
tensor}}``, the tensors being the buffer's ``_state`` (episodes in progress written as
truncated, from copies of the bookkeeping), its separate field stores, its info stores, the
generator's state and the largest priority.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import zipfile
from typing import TYPE_CHECKING, Any

from goalenvs.core.io import atomic_write
from goalenvs.her.common import version_error
from goalenvs.her.settings import BufferSettings

if TYPE_CHECKING:
    from goalenvs.her.device_buffer import DeviceHerReplayBuffer

FILE_FORMAT = "goalenvs.her.DeviceHerReplayBuffer"
FILE_VERSION = 1

# The bookkeeping that truncating the episodes in progress rewrites (a save works on
# copies of these).
_BOOKKEEPING = (
    "truncated",
    "episode_end",
    "episode_start",
    "episode_count",
    "t_hi",
    "newest_start",
)


def save_device_buffer(buffer: DeviceHerReplayBuffer, path: str | os.PathLike) -> None:
    """Writes ``buffer`` to ``path`` (see :meth:`DeviceHerReplayBuffer.save`)."""
    import torch

    live = buffer._state
    buffer._state = {k: v.clone() if k in _BOOKKEEPING else v for k, v in live.items()}
    try:
        buffer.truncate_last_trajectory()
        tensors = {k: v.cpu() for k, v in buffer._state.items() if v is not None}
    finally:
        buffer._state = live
    tensors.update({f"info__{k}": v.cpu() for k, v in buffer._infos.items()})
    tensors.update({f"{side}__{key}": v.cpu() for side, key, v in buffer._separate})
    tensors["generator"] = buffer._generator.get_state()
    tensors["max_priority"] = buffer._max_priority.cpu()
    meta = {
        "format": FILE_FORMAT,
        "version": FILE_VERSION,
        **BufferSettings.to_meta(buffer),
        "t": buffer._t,
        "device": str(buffer.device),
    }
    data = {"meta": json.dumps(meta), "tensors": tensors}
    atomic_write(path, lambda file: torch.save(data, file))


def load_device_buffer(
    cls: type[DeviceHerReplayBuffer],
    path: str | os.PathLike,
    compute_reward: Any,
    compute_terminated: Any,
    device: Any,
) -> DeviceHerReplayBuffer:
    """Reads a buffer of class ``cls`` from ``path`` onto ``device`` (see
    :meth:`DeviceHerReplayBuffer.load`)."""
    name = os.fspath(path)
    meta, tensors = _read(path)
    buffer = cls(
        compute_reward=compute_reward,
        compute_terminated=compute_terminated,
        device=meta["device"] if device is None else device,
        **BufferSettings.arguments_from_meta(meta),
    )
    _restore(buffer, name, meta, tensors)
    return buffer


def _read(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, Any]]:
    """The metadata and the tensors of the file at ``path``, or the ValueError that says
    why it is not a device HER buffer file this code reads."""
    import torch

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
            "DeviceHerReplayBuffer.save"
        ) from None
    try:
        meta = json.loads(data["meta"])
        tensors = data["tensors"]
        if meta["format"] != FILE_FORMAT:
            raise ValueError(f"format {meta['format']!r}")
    except (TypeError, KeyError, ValueError) as error:
        raise ValueError(
            f"{name} is not a goalenvs device HER buffer file ({error}); expected a file "
            f"of format {FILE_FORMAT!r}"
        ) from None
    if meta.get("version") != FILE_VERSION:
        raise version_error(name, "device HER buffer", meta.get("version"), FILE_VERSION)
    return meta, tensors


def _restore(
    buffer: DeviceHerReplayBuffer, name: str, meta: dict[str, Any], tensors: dict[str, Any]
) -> None:
    """Copies the saved tensors into the fresh ``buffer``, checking each one's shape."""
    import torch

    targets = {k: v for k, v in buffer._state.items() if v is not None}
    targets.update({f"{side}__{key}": v for side, key, v in buffer._separate})
    targets["max_priority"] = buffer._max_priority
    for key, target in targets.items():
        stored = tensors.get(key)
        if not isinstance(stored, torch.Tensor):
            raise ValueError(f"{name}: device HER buffer file has no {key!r} tensor")
        if stored.shape != target.shape or stored.dtype != target.dtype:
            raise ValueError(
                f"{name}: {key} has shape {tuple(stored.shape)} dtype {stored.dtype}, "
                f"expected shape {tuple(target.shape)} dtype {target.dtype}"
            )
        target.copy_(stored)
    for key in buffer.info_keys:
        stored = tensors.get(f"info__{key}")
        if stored is not None:
            buffer._infos[key] = stored.to(buffer.device)
    buffer._t = int(meta["t"])
    buffer._no_overflow_before = buffer._nonempty_until = -1  # read them again
    # A generator state belongs to its device type: on another one, draws start afresh.
    state = tensors.get("generator")
    if isinstance(state, torch.Tensor) and torch.device(meta["device"]).type == (
        buffer.device.type
    ):
        buffer._generator.set_state(state)
