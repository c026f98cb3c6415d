"""Checkpoints: tensors and plain metadata, written atomically, loaded without running code.

A checkpoint is a dict saved with ``torch.save``::

    {"format": "goalenvs-her-checkpoint", "version": 1,
     "metadata": {env_id, env_kwargs, algo, gamma, observation_space, action_space,
                  config, epoch, env_steps, success_rate, best_success_rate, ...},
     "policy":   {"normalizer": state_dict, "actor" | "q": state_dict},
     "training": {critic, targets, optimizers}}        # only in policy_latest.pt

It loads with ``torch.load(weights_only=True)``, which refuses any pickled object, so
loading a policy from an untrusted file cannot execute code; it is written atomically.

Every torch file goalenvs writes here carries the sha256 of its own bytes as the comment
of its zip archive (which torch ignores): ``goalenvs-sha256:`` and the hex digest of the
file as written with an empty comment. :func:`load_torch_file` checks it first, so a file
changed at any byte is refused in one line; a file without a comment (written before
goalenvs wrote checksums) loads as before."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import pickle
import shutil
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from gymnasium import spaces

# The one atomic write and space codec of the package (the replay buffers use them too).
from goalenvs.core.io import atomic_write, is_temporary, space_from_json, space_to_json

FORMAT = "goalenvs-her-checkpoint"
VERSION = 1


# The checksum in the zip comment: the end-of-central-directory record (22 bytes, its
# last two the comment's length) ends the archive, the comment follows it.
_SEAL = b"goalenvs-sha256:"
_COMMENT_SIZE = len(_SEAL) + 64
_END_RECORD = b"PK\x05\x06"
_END_SIZE = 22


class CheckpointError(ValueError):
    """A file is not a readable goalenvs checkpoint (corrupt, foreign, changed, or unsafe)."""


def space_to_dict(space: spaces.Space) -> dict[str, object]:
    """Plain description of a space (what a checkpoint stores): :func:`space_to_json`."""
    return space_to_json(space, "a checkpoint")


def space_from_dict(data: dict[str, object]) -> spaces.Space:
    """Inverse of :func:`space_to_dict` (a :class:`CheckpointError` for an unknown type)."""
    return space_from_json(data, "checkpoint metadata", CheckpointError)


def save_checkpoint(
    path: str | os.PathLike,
    metadata: Mapping[str, object],
    policy: Mapping[str, object],
    training: Mapping[str, object] | None = None,
) -> Path:
    """Writes a checkpoint atomically. ``policy`` and ``training`` map names to modules,
    optimizers or state dicts; ``metadata`` holds plain values only."""
    path = Path(path)
    _check_plain(metadata, "metadata")
    payload: dict[str, object] = {
        "format": FORMAT,
        "version": VERSION,
        "metadata": metadata,
        "policy": {name: _state(obj) for name, obj in policy.items()},
    }
    if training is not None:
        payload["training"] = {name: _state(obj) for name, obj in training.items()}
    return save_torch_file(path, payload)


def save_torch_file(path: str | os.PathLike, data: object) -> Path:
    """``torch.save(data)`` written atomically to ``path``, sealed with its sha256."""
    archive = io.BytesIO()
    torch.save(data, archive)
    sealed = seal(archive.getvalue())
    return atomic_write(path, lambda f: f.write(sealed))


def seal(archive: bytes) -> bytes:
    """``archive``, a zip without a comment, with the sha256 of its bytes as its comment."""
    if archive[-_END_SIZE : -_END_SIZE + 4] != _END_RECORD or archive[-2:] != b"\0\0":
        raise ValueError("seal expects a zip archive without a comment, as torch.save writes")
    digest = hashlib.sha256(archive).hexdigest().encode("ascii")
    return archive[:-2] + _COMMENT_SIZE.to_bytes(2, "little") + _SEAL + digest


def check_seal(data: bytes, path: str | os.PathLike) -> bool:
    """Whether the bytes ``data`` of ``path`` carry a checksum that matches (False: no
    comment, an older file); a :class:`CheckpointError` naming ``path`` when not."""
    if data[-_END_SIZE : -_END_SIZE + 4] == _END_RECORD and data[-2:] == b"\0\0":
        return False
    end = len(data) - _COMMENT_SIZE - _END_SIZE
    digest = data[-64:]
    if (
        end >= 0
        and data[end : end + 4] == _END_RECORD
        and data[end + 20 : end + 22] == _COMMENT_SIZE.to_bytes(2, "little")
        and data[end + _END_SIZE : -64] == _SEAL
    ):
        unsealed = data[: end + 20] + b"\0\0"
        if hmac.compare_digest(hashlib.sha256(unsealed).hexdigest().encode("ascii"), digest):
            return True
    raise CheckpointError(
        f"{str(path)!r} was changed or corrupted after goalenvs wrote it: its bytes do not "
        "match the sha256 checksum saved in it"
    )


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


def _state(obj: object) -> object:
    return obj.state_dict() if hasattr(obj, "state_dict") else obj


def _unpickler_reason(exc: Exception) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if "Unsupported" in line]
    return lines[0] if lines else str(exc).splitlines()[0]


def error_summary(exc: BaseException) -> str:
    """``"TypeName: first line of the message"``, for errors that quote what went wrong."""
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def load_torch_file(
    path: Path, map_location: str | torch.device = "cpu", what: str = "checkpoint"
) -> object:
    """``torch.load(path, weights_only=True)`` of a file whose checksum matches; a
    :class:`CheckpointError` naming ``path`` and the cause when it cannot be read."""
    unreadable = f"{str(path)!r} is not a readable {what} (truncated, corrupt, or not a torch file)"
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{unreadable}: {error_summary(exc)}") from None
    if not _is_zip(data):
        # torch.save writes a zip archive; anything else is cut short or another format.
        raise CheckpointError(f"{unreadable}: it is not a torch zip archive")
    check_seal(data, path)
    try:
        return torch.load(io.BytesIO(data), map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        raise CheckpointError(
            f"refusing to load {str(path)!r}: it holds pickled Python objects, which could run "
            "code when loaded; goalenvs checkpoints hold only tensors and plain metadata "
            f"({_unpickler_reason(exc)})"
        ) from None
    except Exception as exc:
        raise CheckpointError(f"{unreadable}: {error_summary(exc)}") from None


def _check_version(path: Path, what: str, found: object, version: int) -> None:
    """A :class:`CheckpointError` naming ``path`` when its ``what`` version is not ours."""
    if found != version:
        raise CheckpointError(
            f"{str(path)!r} has {what} version {found!r}; this goalenvs reads version {version}"
        )


def _is_zip(data: bytes) -> bool:
    """Whether ``data`` ends as a zip archive does (``is_zipfile`` raises on some)."""
    try:
        return zipfile.is_zipfile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError):
        return False


def read_checkpoint(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Loads and validates a checkpoint; raises :class:`CheckpointError` when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    data = load_torch_file(path, map_location)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = sorted(data)[:8] if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(
            f"{str(path)!r} is a torch file but not a goalenvs checkpoint: expected a dict with "
            f"'format': {FORMAT!r}, found {found}"
        )
    _check_version(path, "checkpoint", data.get("version"), VERSION)
    for key in ("metadata", "policy"):
        if not isinstance(data.get(key), dict):
            raise CheckpointError(f"{str(path)!r} lacks its {key!r} section")
    return data


# --------------------------------------------------------------------------- crash safety
#
# A run folder's resumable state is one unit per finished epoch (checkpoints/epoch_N/:
# policy.pt, state_rankR.pt, buffer_rankR.npz, manifest.json written last). A reader
# trusts only a unit whose manifest names its epoch and lists files of the sizes found,
# and falls back to the previous unit when the newest is damaged (as Orbax does).

UNIT_FORMAT = "goalenvs-run-checkpoint"
UNIT_VERSION = 1
STATE_FORMAT = "goalenvs-random-state"
MANIFEST = "manifest.json"
CHECKPOINTS = "checkpoints"
_UNIT_PREFIX = "epoch_"


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Writes ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_copy(source: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Copies ``source`` to ``path`` atomically: a copy, not a hard link, so that a user
    who overwrites policy_latest.pt in place does not damage the unit --resume reads."""
    source = Path(source)
    return atomic_write(path, lambda f: f.write(source.read_bytes()))


def unit_dir(run_dir: str | os.PathLike, epoch: int) -> Path:
    """The folder of epoch ``epoch``'s unit."""
    return Path(run_dir) / CHECKPOINTS / f"{_UNIT_PREFIX}{epoch:06d}"


def unit_epochs(run_dir: str | os.PathLike) -> list[int]:
    """Epochs that have a unit folder (committed or not), newest first."""
    root = Path(run_dir) / CHECKPOINTS
    if not root.is_dir():
        return []
    units = [c.name for c in root.iterdir() if c.is_dir() and c.name.startswith(_UNIT_PREFIX)]
    numbers = [name[len(_UNIT_PREFIX) :] for name in units]
    return sorted((int(number) for number in numbers if number.isdigit()), reverse=True)


def commit_unit(unit: Path, epoch: int, extra: dict[str, object]) -> Path:
    """Writes the manifest of ``unit`` (every file with its size, and the plain values of
    ``extra``): the last write of an epoch, which commits it."""
    files = {
        p.name: {"size": p.stat().st_size}
        for p in sorted(unit.iterdir())
        if p.is_file() and p.name != MANIFEST and not p.name.startswith(".")
    }
    manifest = {"format": UNIT_FORMAT, "version": UNIT_VERSION, "epoch": int(epoch)}
    manifest = {**manifest, "files": files, **extra}
    return atomic_write_text(unit / MANIFEST, json.dumps(manifest, indent=1) + "\n")


def read_manifest(unit: Path) -> dict[str, Any]:
    """The manifest of a committed unit; a :class:`CheckpointError` naming the file when
    the unit is not committed or does not match it."""
    path = unit / MANIFEST
    if not path.is_file():
        raise CheckpointError(f"{str(unit)!r} is not committed: it has no {MANIFEST}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{str(path)!r} is not readable JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != UNIT_FORMAT:
        raise CheckpointError(f"{str(path)!r} is not a goalenvs checkpoint manifest")
    _check_version(path, "manifest", manifest.get("version"), UNIT_VERSION)
    epoch = int(unit.name[len(_UNIT_PREFIX) :])
    if manifest.get("epoch") != epoch:
        raise CheckpointError(
            f"{str(path)!r} names epoch {manifest.get('epoch')!r} but sits in the folder of "
            f"epoch {epoch}"
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise CheckpointError(f"{str(path)!r} lists no files")
    for name, entry in files.items():
        file = unit / name
        if not file.is_file():
            raise CheckpointError(f"{str(file)!r} is missing (listed in {MANIFEST})")
        size = file.stat().st_size
        if size != entry.get("size"):
            raise CheckpointError(
                f"{str(file)!r} has {size} bytes, its manifest says {entry.get('size')} "
                "(truncated or overwritten)"
            )
    return manifest


def remove_debris(run_dir: str | os.PathLike) -> list[Path]:
    """Removes what killed writes left in a run folder (temporary files, units without a
    manifest, files a manifest does not list) while no worker writes; returns them."""
    run_dir = Path(run_dir)
    removed: list[Path] = []

    def remove(path: Path) -> None:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
        removed.append(path)

    folders = [f for f in (run_dir, run_dir / CHECKPOINTS) if f.is_dir()]
    for p in [p for folder in folders for p in folder.iterdir()]:
        if p.is_file() and is_temporary(p):
            remove(p)
    for epoch in unit_epochs(run_dir):
        unit = unit_dir(run_dir, epoch)
        manifest_path = unit / MANIFEST
        if not manifest_path.is_file():
            remove(unit)
            continue
        try:
            listed = set(json.loads(manifest_path.read_text(encoding="utf-8"))["files"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue  # a damaged manifest: the resume reports it and falls back
        for p in unit.iterdir():
            if p.name != MANIFEST and p.name not in listed:
                remove(p)
    return removed
