"""The default a user's own env trains with (the ``one_cpu`` preset), on the user envs of
tests/user_envs/, over seeds: does it reach their success within minutes on a CPU?

Each run is ``goalenvs train FILE.py:Class --seed S`` as a user types it (in a folder
holding a copy of the env's file, niced), with no preset or schedule flag: the preset is
the one ``goalenvs train`` picks. One JSON line per run goes to
``benchmarks/results/user_envs.jsonl``: the env steps and seconds at which eval success
first reached the mark, the best and last success, the time the run's first line
estimated and the time it took, with the commit, the machine and its load.

    python benchmarks/user_envs.py --seeds 0 1 2 3 4
    python benchmarks/user_envs.py table
"""

from __future__ import annotations

import argparse
import csv
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import append_jsonl, child_env, read_jsonl, run_info  # noqa: E402

RESULTS_FILE = "user_envs.jsonl"
MARK = 0.9  # eval success counted as the env's success
USER_ENVS = ROOT / "tests" / "user_envs"
# (file, the spec a user trains, extra flags): a user's envs as they write them
ENVS = (
    ("reach2d_env.py", "reach2d_env.py:Reach2D", ()),
    ("noframes_env.py", "noframes_env.py:Reach", ()),
    ("cursor_env.py", "cursor_env.py:CursorEnv", ("--max-episode-steps", "50")),
)
ESTIMATE = re.compile(r"about (\d+(?:\.\d+)?) (s|minutes|hours) on this machine")  # all epochs


def commit() -> str:
    """The checkout's commit (short), with ``+`` when its tracked files differ from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=ROOT).returncode != 0
    return head + ("+" if dirty else "")


def estimated_seconds(first_line: str) -> float | None:
    """The seconds the run's first line estimated, or None when it gave none."""
    found = ESTIMATE.search(first_line)
    if found is None:
        return None
    scale = {"s": 1, "minutes": 60, "hours": 3600}[found.group(2)]
    return float(found.group(1)) * scale


def train_one(file: str, spec: str, flags: Sequence[str], seed: int) -> dict[str, Any]:
    """One run of ``spec`` from a user's folder; its record."""
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(USER_ENVS / file, Path(folder) / file)
        argv = ["nice", "-n", "19", sys.executable, "-m", "goalenvs", "train", spec, *flags]
        argv += ["--seed", str(seed), "--out", "run", "--quiet"]
        start = time.perf_counter()
        done = subprocess.run(
            argv, capture_output=True, text=True, cwd=folder, env=child_env(ROOT), timeout=1800
        )
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{spec} seed {seed} failed:\n{done.stdout}\n{done.stderr}")
        with open(Path(folder) / "run" / "progress.csv") as f:
            rows = list(csv.DictReader(f))
    first_line = done.stdout.splitlines()[0]
    success = [float(row["eval_success"]) for row in rows]
    reached = next((row for row in rows if float(row["eval_success"]) >= MARK), None)
    return {
        "env": spec,
        "flags": list(flags),
        "seed": seed,
        "preset": first_line.split("preset ")[1].split(":")[0],
        "mark": MARK,
        "env_steps_to_mark": None if reached is None else int(reached["env_steps"]),
        "seconds_to_mark": None if reached is None else float(reached["wall_time"]),
        "best_success": max(success),
        "last_success": success[-1],
        "epochs": len(rows),
        "env_steps": int(rows[-1]["env_steps"]),
        "estimated_seconds": estimated_seconds(first_line),
        "seconds": round(seconds, 1),
        "first_line": first_line,
        "eval_success": success,
    }


def table(records: list[dict[str, Any]]) -> str:
    """One row per env: the runs that reached the mark, and the median and most seconds."""
    lines = ["env | runs at the mark | env steps to it (median) | s to it (median, most)"]
    for _, spec, _ in ENVS:
        runs = [r for r in records if r["env"] == spec]
        if not runs:
            continue
        met = [r for r in runs if r["seconds_to_mark"] is not None]
        steps = sorted(r["env_steps_to_mark"] for r in met)
        secs = sorted(r["seconds_to_mark"] for r in met)
        middle = f"{steps[len(steps) // 2]:,}" if steps else "-"
        timing = f"{secs[len(secs) // 2]:.1f}, {secs[-1]:.1f}" if secs else "-"
        lines.append(f"{spec} | {len(met)}/{len(runs)} | {middle} | {timing}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Trains each user env over ``--seeds`` and appends the records; ``table`` prints them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", choices=["run", "table"], default="run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args(argv)
    if args.what == "table":
        print(table(read_jsonl(RESULTS_FILE)))
        return 0
    version = commit()
    records = []
    for file, spec, flags in ENVS:
        for seed in args.seeds:
            record = {**run_info(commit=version), **train_one(file, spec, flags, seed)}
            append_jsonl(RESULTS_FILE, record)
            records.append(record)
            print(
                f"{spec} seed {seed}: {MARK} at {record['env_steps_to_mark']} env steps, "
                f"{record['seconds_to_mark']} s; estimated {record['estimated_seconds']} s, "
                f"took {record['seconds']} s",
                flush=True,
            )
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
