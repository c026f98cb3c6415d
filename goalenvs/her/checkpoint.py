"""Checkpoints: tensors and plain metadata, written atomically, loaded without running code.

A checkpoint is a dict saved with ``torch.save``::

    {"format": "goalenvs-her-checkpoint", "version": 1,
     "metadata": {env_id, env_kwargs, algo, gamma, observation_space, action_space,
                  config, epoch, env_steps, success_rate, best_success_rate, ...},
     "policy":   {"normalizer": state_dict, "actor" | "q": state_dict},
     "training": {critic, targets, optimizers}}        # only in policy_latest.pt

It loads with ``torch.load(weights_only=True)``, which refuses any pickled object, so
loading a policy from an untrusted file cannot execute code. Files are written to a
temporary name and renamed over the target, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

FORMAT = "goalenvs-her-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A file is not a readable goalenvs checkpoint (corrupt, foreign, or unsafe)."""


def space_to_dict(space: spaces.Space) -> dict[str, Any]:
    """Plain description of a Box or Discrete space (what a checkpoint stores)."""
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "low": np.asarray(space.low, dtype=np.float64).reshape(-1).tolist(),
            "high": np.asarray(space.high, dtype=np.float64).reshape(-1).tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "shape": list(space.shape)}
    raise TypeError(f"cannot describe {space} in a checkpoint (Box, Discrete, MultiBinary only)")


def space_from_dict(data: dict[str, Any]) -> spaces.Space:
    """Inverse of :func:`space_to_dict`."""
    kind = data.get("type")
    if kind == "Box":
        shape = tuple(data["shape"])
        dtype = np.dtype(data.get("dtype", "float32"))
        low = np.asarray(data["low"], dtype=dtype).reshape(shape)
        high = np.asarray(data["high"], dtype=dtype).reshape(shape)
        return spaces.Box(low, high, shape, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(list(data["shape"]))
    raise CheckpointError(f"unknown space type {kind!r} in checkpoint metadata")


def save_checkpoint(
    path: str | os.PathLike,
    metadata: dict[str, Any],
    policy: dict[str, Any],
    training: dict[str, Any] | None = None,
) -> Path:
    """Writes a checkpoint atomically (temporary file, then ``os.replace``).

    ``policy`` and ``training`` map names to modules or optimizers (their state dicts are
    stored) or to state dicts. ``metadata`` must hold plain values only.
    """
    path = Path(path)
    _check_plain(metadata, "metadata")
    payload: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "metadata": metadata,
        "policy": {name: _state(obj) for name, obj in policy.items()},
    }
    if training is not None:
        payload["training"] = {name: _state(obj) for name, obj in training.items()}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _check_plain(value: Any, where: str) -> None:
    """Rejects anything ``torch.load(weights_only=True)`` would refuse to read back."""
    if value is None or type(value) in (bool, int, float, str):
        return
    if type(value) in (list, tuple):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(f"{where} has a non-string key {key!r}")
            _check_plain(item, f"{where}[{key!r}]")
        return
    raise TypeError(
        f"{where} is a {type(value).__name__}; checkpoint metadata holds only None, bool, int, "
        "float, str, lists and dicts"
    )


def _state(obj: Any) -> Any:
    return obj.state_dict() if hasattr(obj, "state_dict") else obj


def _unpickler_reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if "Unsupported" in line]
    return lines[0] if lines else str(exc).splitlines()[0]


def read_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Loads and validates a checkpoint; raises :class:`CheckpointError` when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    if not zipfile.is_zipfile(path):
        # torch.save writes a zip archive; anything else is cut short or another format.
        raise CheckpointError(
            f"{str(path)!r} is not a readable checkpoint (truncated, corrupt, or not a torch "
            "file): it is not a torch zip archive"
        )
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"refusing to load {str(path)!r}: it holds pickled Python objects, which could run "
            "code when loaded; goalenvs checkpoints hold only tensors and plain metadata "
            f"({_unpickler_reason(exc)})"
        ) from None
    except Exception as exc:
        raise CheckpointError(
            f"{str(path)!r} is not a readable checkpoint (truncated, corrupt, or not a torch "
            f"file): {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = sorted(data)[:8] if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(
            f"{str(path)!r} is a torch file but not a goalenvs checkpoint: expected a dict with "
            f"'format': {FORMAT!r}, found {found}"
        )
    if data.get("version") != VERSION:
        raise CheckpointError(
            f"{str(path)!r} has checkpoint version {data.get('version')!r}; this goalenvs "
            f"reads version {VERSION}"
        )
    for key in ("metadata", "policy"):
        if not isinstance(data.get(key), dict):
            raise CheckpointError(f"{str(path)!r} lacks its {key!r} section")
    return data
