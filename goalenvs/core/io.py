"""What goalenvs writes to disk and to the console: one atomic write and the name of the
``goalenvs`` command.

The atomic write: a file is written beside its destination, flushed, fsynced and
renamed over it, so a kill at any moment leaves the old file or the new one, never a mix.

The replay buffers' ``save`` and the training checkpoints both write through
:func:`atomic_write`; its temporary files (``.NAME.PID.tmp``) are what
:func:`goalenvs.train.checkpoint.remove_debris` clears after a killed write. Imports
nothing else from goalenvs.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

_TMP_SUFFIX = ".tmp"


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
