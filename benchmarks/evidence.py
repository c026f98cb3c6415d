"""Where a benchmark's figures come from: the machine, its load, the versions, the command.

Every script under benchmarks/ that prints a figure also writes it, with :func:`run_info`,
to ``benchmarks/results/``; ``benchmarks/report.py`` builds the docs' tables from those
files. A script that only prints is recorded through this module's command line::

    python benchmarks/evidence.py record checker.log -- python benchmarks/checker.py

which runs the command and writes its output to ``benchmarks/results/checker.log`` between
two lines of JSON (:func:`read_record` reads them back): the first with the commit, date,
command, machine, load and versions, the last with the load at the end and the seconds
taken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
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


def machine() -> dict[str, Any]:
    """The machine as a result file records it (goalenvs' ``describe_machine``): the CPU
    model, the cores usable under the affinity and the container's CPU quota, the host's
    cores, the quota, torch's version, bfloat16 instructions, the CUDA device, the
    platform."""
    from goalenvs.train.machine import describe_machine

    return describe_machine()


def machine_words(machine: str | dict[str, Any]) -> str:
    """A result file's ``machine`` in words: older files wrote a sentence, kept as it is;
    a :func:`machine` dict reads ``AMD EPYC, 2 of 64 cores usable, torch 2.13.0+cpu,
    bf16``."""
    if isinstance(machine, str):
        return machine
    cores, total = machine.get("cores", "?"), machine.get("cores_total")
    words = [
        str(machine.get("cpu", "?")),
        f"{cores} cores" if total in (None, cores) else f"{cores} of {total} cores usable",
    ]
    if "torch" in machine:
        words.append(f"torch {machine['torch']}")
    if "cpu_bf16" in machine:
        words.append("bf16" if machine["cpu_bf16"] else "no bf16 instructions")
    gpu = machine.get("cuda") or machine.get("gpu")
    if gpu:
        words.append(str(gpu))
    return ", ".join(words)


def load() -> list[float]:
    """The 1-, 5- and 15-minute load averages, rounded to 0.01."""
    return [round(x, 2) for x in os.getloadavg()]


def child_env(*first: str | Path, **extra: str) -> dict[str, str]:
    """The environment of a child process that imports goalenvs from the folders ``first``
    (the checkout under test first): they lead PYTHONPATH and whatever it held stays after
    them, so packages found through it (a machine without the project's install) are still
    found. ``extra`` variables are set too."""
    held = os.environ.get("PYTHONPATH")
    path = os.pathsep.join([*(str(folder) for folder in first), *filter(None, [held])])
    return {**os.environ, "PYTHONPATH": path, **extra}


def commit() -> str:
    """The checkout's commit (short hash), ``+`` where its tracked files differ from it:
    the tree a record measured. Records written under benchmarks/results/ by an earlier
    benchmark do not count: they are not the code measured. "" outside a git checkout."""
    root = RESULTS.parent.parent
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True)
    if head.returncode != 0:
        return ""
    code = ["--", ".", f":!{RESULTS.relative_to(root).as_posix()}"]
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", *code], cwd=root, capture_output=True)
    return head.stdout.decode().strip() + ("+" if dirty.returncode == 1 else "")


def run_info(**extra: Any) -> dict[str, Any]:
    """Metadata for one result record: the commit of the tree measured, date (UTC),
    command, machine, load, versions.

    ``extra`` entries are added (and win over the defaults)."""
    return {
        "commit": commit(),
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "command": " ".join(["python", *sys.argv]),
        "machine": machine(),
        "load": load(),
        "versions": versions(),
        **extra,
    }


def portable(record: Any, folders: dict[Path, str]) -> Any:
    """``record`` (anything JSON holds) with each absolute folder of this machine written as
    the short name given in ``folders`` (a run folder as ``runs/<name>``), and the
    checkout's own path as ``.``: a result file names what ran, not where on whose disk."""
    text = json.dumps(record)
    named = {**folders, RESULTS.parent.parent: "."}
    # Deepest first: a folder inside another is named before the outer one takes its path.
    for folder, name in sorted(named.items(), key=lambda item: -len(str(item[0]))):
        # Whole path components only: /x/runs/a names runs, /x/runs/a.toml stays itself.
        escaped = re.escape(json.dumps(str(folder))[1:-1])
        text = re.sub(escaped + r'(?=/|"|\s)', name.replace("\\", r"\\"), text)
    return json.loads(text)


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


RECORD_MARK = "# evidence: "


def record(name: str, command: Sequence[str]) -> Path:
    """Runs ``command``, writes its stdout to ``RESULTS/name`` between a JSON line of
    :func:`run_info` and one of the load at the end and the seconds; returns the path.
    Fails, writing nothing, when the command fails."""
    info = run_info(command=" ".join(command))
    start = time.perf_counter()
    result = subprocess.run(list(command), capture_output=True, text=True)
    seconds = round(time.perf_counter() - start, 1)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {result.returncode}: {result.stderr[-2000:]}"
        )
    end = {"load_after": load(), "seconds": seconds}
    target = RESULTS / name
    target.parent.mkdir(parents=True, exist_ok=True)
    body = result.stdout if result.stdout.endswith("\n") else result.stdout + "\n"
    target.write_text(f"{RECORD_MARK}{json.dumps(info)}\n{body}{RECORD_MARK}{json.dumps(end)}\n")
    return target


def read_record(path: str | Path) -> tuple[dict[str, Any], str]:
    """A file written by :func:`record`: (its run_info with load_after and seconds, the
    command's output)."""
    source = Path(path)
    if not source.is_absolute():
        source = RESULTS / source
    first, *body, last = source.read_text().splitlines()
    if not (first.startswith(RECORD_MARK) and last.startswith(RECORD_MARK)):
        raise ValueError(f"{source} was not written by evidence.record (no {RECORD_MARK!r} lines)")
    info = json.loads(first.removeprefix(RECORD_MARK))
    info.update(json.loads(last.removeprefix(RECORD_MARK)))
    return info, "\n".join(body) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``record NAME -- COMMAND...``: runs COMMAND and saves its output under results/."""
    parser = argparse.ArgumentParser(description="Record a command's output with its run info.")
    commands = parser.add_subparsers(dest="action", required=True)
    record_parser = commands.add_parser("record", help="run a command, save its output")
    record_parser.add_argument("name", help="the file under benchmarks/results/")
    record_parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("record needs a command after --")
    print(record(args.name, command))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
