"""Where a benchmark's figures come from: the machine, its load, the versions, the command.

Every script under benchmarks/ that prints a figure also writes it, with :func:`run_info`,
to ``benchmarks/results/``; ``benchmarks/report.py`` builds the docs' tables from those
files.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

PACKAGES = (
    "goalenvs",
    "numpy",
    "torch",
    "gymnasium",
    "stable-baselines3",
    "gymnasium-robotics",
    "mujoco",
    "panda-gym",
    "highway-env",
)


def versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    """The installed version of each package in ``names`` that is installed."""
    found = {"python": platform.python_version()}
    for name in names:
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


def machine() -> str:
    """The machine in words: architecture, cores, processor."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        if names:
            cpu = names[0]
    return f"{platform.machine()}, {os.cpu_count()} cores, {cpu}"


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 0.01."""
    return [round(x, 2) for x in os.getloadavg()]


def run_info(**extra: Any) -> dict[str, Any]:
    """Metadata for one result record: date (UTC), command, machine, load, versions.

    ``extra`` entries are added (and win over the defaults)."""
    return {
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(),
        "load": load(),
        "versions": versions(),
        **extra,
    }


def append_jsonl(path: str | Path, record: dict[str, Any]) -> Path:
    """Appends ``record`` as one JSON line to ``path`` (relative paths under RESULTS)."""
    target = Path(path)
    if not target.is_absolute():
        target = RESULTS / target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a") as f:
        f.write(json.dumps(record, sort_keys=False) + "\n")
    return target


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file (relative paths under RESULTS)."""
    source = Path(path)
    if not source.is_absolute():
        source = RESULTS / source
    return [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
