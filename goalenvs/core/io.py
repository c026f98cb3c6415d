"""What goalenvs writes to disk and to the console: one atomic write (buffers and
checkpoints), one space<->JSON codec, the name of the ``goalenvs`` command, and stdout kept
for what a program reads (:func:`stdout_to_stderr`). Imports nothing else from goalenvs.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from gymnasium import spaces

_TMP_SUFFIX = ".tmp"


def is_temporary(path: Path) -> bool:
    """Whether ``path`` names a temporary file of an atomic write (left by a cut one)."""
    return path.name.startswith(".") and _TMP_SUFFIX in path.name


def temporary_name(path: Path) -> Path:
    """The temporary file an atomic write of ``path`` goes through (same folder)."""
    return path.with_name(f".{path.name}.{os.getpid()}{_TMP_SUFFIX}")


def fsync_dir(folder: str | os.PathLike) -> None:
    """Makes a rename inside ``folder`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows: folders cannot be opened; NTFS journals the rename
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _commit(path: Path, tmp: Path, produce: Callable[[Path], Any]) -> Path:
    """``produce(tmp)`` writes the temporary file; it is fsynced and renamed to ``path``,
    and removed if anything failed before the rename."""
    try:
        produce(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)
    return path


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], Any]) -> Path:
    """Calls ``write(file)`` on a temporary file, fsyncs it and renames it to ``path``.

    A kill at any moment leaves either the old ``path`` or the new one, never a mix; the
    temporary file of a killed write is removed by :func:`remove_debris` at the next start.
    """

    def produce(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            write(f)

    path = Path(path)
    return _commit(path, temporary_name(path), produce)


def atomic_write_file(path: str | os.PathLike, save: Callable[[Path], Any]) -> Path:
    """As :func:`atomic_write` for a writer that takes a path (``save(temporary_path)``).

    The temporary name keeps the suffix of ``path`` (``np.savez`` would append ``.npz``).
    """
    path = Path(path)
    tmp = temporary_name(path)
    return _commit(path, tmp.with_name(tmp.name + path.suffix), save)


# --------------------------------------------------------------------------- spaces as JSON


def space_to_json(space: spaces.Space, where: str = "a JSON file") -> dict[str, object]:
    """A plain JSON description of a Box, Discrete, MultiBinary or Dict space (of those).

    What checkpoints and replay-buffer files store, read back by :func:`space_from_json`.
    Box bounds are nested lists in the space's dtype; a MultiBinary carries its ``n`` as
    given (``5`` and ``[5]`` are different spaces) and its ``shape``. ``where`` names the
    file in the error for another space.
    """
    if isinstance(space, spaces.Dict):
        items = space.spaces.items()
        return {"type": "Dict", "spaces": {k: space_to_json(v, where) for k, v in items}}
    if isinstance(space, spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "low": space.low.tolist(),
            "high": space.high.tolist(),
            "dtype": str(space.dtype),
        }
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {
            "type": "MultiBinary",
            "n": np.asarray(space.n).tolist(),
            "shape": list(space.shape),
        }
    raise TypeError(
        f"cannot describe {space} in {where}: expected a Box, Discrete, MultiBinary or a Dict "
        "of them"
    )


def space_from_json(
    data: Mapping[str, Any],
    where: str = "a space description",
    error: type[Exception] = ValueError,
) -> spaces.Space:
    """The space :func:`space_to_json` describes, and the two older descriptions.

    Checkpoints wrote Box bounds as flat float64 lists and a MultiBinary by its ``shape``;
    replay-buffer files wrote nested bounds and a MultiBinary by its ``n``: both load.
    An unknown ``type`` raises ``error`` naming it and ``where`` it was found.
    """
    kind = data.get("type")
    if kind == "Dict":
        return spaces.Dict({k: space_from_json(v, where, error) for k, v in data["spaces"].items()})
    if kind == "Box":
        shape = tuple(data["shape"])
        dtype = np.dtype(data.get("dtype", "float32"))
        low = np.asarray(data["low"], dtype=dtype).reshape(shape)
        high = np.asarray(data["high"], dtype=dtype).reshape(shape)
        return spaces.Box(low, high, shape, dtype=dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiBinary":
        return spaces.MultiBinary(data["n"] if "n" in data else list(data["shape"]))
    raise error(f"unknown space type {kind!r} in {where}")


# --------------------------------------------------------------------------- the command


def command_name() -> str:
    """How to type the ``goalenvs`` command here, for the next commands the CLI prints:
    ``goalenvs`` when that is the console script beside this Python (or none is
    installed), else the script's path (``.venv/bin/goalenvs`` after ``make demo``)."""
    script = Path(sys.executable).with_name("goalenvs")
    found = shutil.which("goalenvs")
    if not script.is_file() or (found is not None and Path(found).samefile(script)):
        return "goalenvs"
    relative = os.path.relpath(script)
    return shlex.quote(relative if not relative.startswith("..") else str(script))


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Sends stdout to stderr while it is entered: Python's ``sys.stdout`` and file
    descriptor 1, which C libraries write to (pybullet's banner), so that what a command
    prints for a program to read (JSON) stays alone on stdout. Every stdout buffer is
    flushed before fd 1 is given back."""
    _flush_stdout()
    try:
        saved: int | None = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no file descriptor 1 (a GUI launcher): Python's stdout only
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _flush_stdout()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def _flush_stdout() -> None:
    """Flushes Python's stdout streams and C's (``fflush(NULL)``): C's stdout is
    block-buffered on a pipe, and what the env printf'd would otherwise reach fd 1 at
    exit, after the JSON."""
    for stream in (sys.stdout, sys.__stdout__):
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):  # closed or detached
                stream.flush()
    with contextlib.suppress(OSError, AttributeError, TypeError):  # no C library to load
        ctypes.CDLL(None).fflush(None)
