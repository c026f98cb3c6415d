"""The ``goalenvs`` command as a user runs it, in a subprocess of this checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_goalenvs(*args: str, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``python -m goalenvs ARGS`` from this checkout, wherever the suite was started:
    this checkout first on PYTHONPATH (replacing it would lose packages found through it),
    and without PYTHONUNBUFFERED, which unbuffers C's stdout too (a pipe block-buffers it
    for users)."""
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    env.pop("PYTHONUNBUFFERED", None)
    return subprocess.run(
        [sys.executable, "-m", "goalenvs", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def refused(capsys, *argv: str) -> str:
    """The one error line ``goalenvs ARGV`` (run in this process) exits 2 with."""
    from goalenvs.cli import main

    rc, err = main(list(argv)), capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"goalenvs {argv[0]}: error: "), err
    return err
