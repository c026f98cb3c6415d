"""A long run holds: its memory stays flat beside the replay buffer's filling, and a
SIGKILL in its second hour loses nothing a resume cannot continue.

Trains ``goalenvs train ENV`` (the env's preset, ``--save-buffer``) for ``--minutes``,
reading the resident memory of the trainer and its worker processes once a minute, kills
it with SIGKILL at ``--kill-at`` minutes, resumes the run folder with ``--resume`` and
trains on to the end. Then checks that progress.csv holds every epoch once, in order,
with env steps adding up across the kill, and writes the record (memory samples, the
kill, the epochs before and after, the buffer's expected size) as one JSON line to
``benchmarks/results/long_run.jsonl``.

    python benchmarks/long_run.py --env gymnasium_robotics:FetchSlide-v4 --minutes 120 \\
        --kill-at 75 --out /data/runs/slide_long
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import child_env, machine, portable  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "long_run.jsonl"


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and its descendants, in MB (Linux /proc)."""
    pids, total = [pid], 0
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
        pids += [int(child) for child in children]
    return total / 1024


def epochs(run: Path) -> list[dict[str, str]]:
    """progress.csv's rows (none before the first epoch)."""
    path = run / "progress.csv"
    if not path.is_file():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def buffer_megabytes(config: dict[str, Any]) -> float:
    """The arrays of the run's full numpy replay buffer, in MB: the part of the memory that
    grows until the buffer is full. Built empty for the env's spaces (untouched pages cost
    nothing); the info values it keeps (one float64 a row per key) are counted as well."""
    import goalenvs.envspec
    from goalenvs.her.buffer import HerReplayBuffer

    env = goalenvs.envspec.make(config["env_id"], **config["env_kwargs"])
    try:
        buffer = HerReplayBuffer(
            config["buffer_size"],
            env.observation_space,
            env.action_space,
            compute_reward=env.unwrapped.compute_reward,
            n_envs=config["num_envs"],
        )
        state = buffer.state()
        own = [v for v in state.fields.values() if not np.shares_memory(v, state.records)]
        arrays = state.records.nbytes + sum(v.nbytes for v in own)
        rows = state.records.shape[0] * state.records.shape[1]
        infos = len(config.get("info_keys") or ("is_success",)) * 8 * rows
        return (arrays + infos) / 1e6
    finally:
        env.close()


def train_until(command: list[str], seconds: float, start: float, samples: list) -> int | None:
    """Runs ``command`` for up to ``seconds``, sampling memory once a minute into
    ``samples`` (minutes since ``start``, MB, load); returns its exit code, or None when
    it was still running (it is then SIGKILLed)."""
    env = child_env(ROOT, OMP_NUM_THREADS="1")
    env.pop("MUJOCO_GL", None)
    proc = subprocess.Popen(command, env=env)
    deadline = time.time() + seconds
    next_sample = time.time()
    while time.time() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        if time.time() >= next_sample:
            minute = (time.time() - start) / 60
            samples.append([round(minute, 1), round(tree_rss_mb(proc.pid), 1), os.getloadavg()[0]])
            next_sample += 60
        time.sleep(1.0)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gymnasium_robotics:FetchSlide-v4")
    parser.add_argument("--minutes", type=float, default=120.0, help="the whole run")
    parser.add_argument("--kill-at", type=float, default=75.0, help="minute of the SIGKILL")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True, help="the run folder")
    args = parser.parse_args(argv)
    if not 0 < args.kill_at < args.minutes:
        raise SystemExit(f"--kill-at must be inside the run (0 < {args.kill_at} < {args.minutes})")
    base = [sys.executable, "-m", "goalenvs", "train"]
    first = [*base, args.env, "--seed", str(args.seed), "--save-buffer", "--quiet"]
    first += ["--epochs", "1000", "--out", str(args.out)]
    samples: list[list[float]] = []
    start = time.time()
    code = train_until(first, args.kill_at * 60, start, samples)
    if code is not None:
        raise SystemExit(f"the run ended by itself (exit {code}) before the kill")
    before = epochs(args.out)
    killed_at = (time.time() - start) / 60
    rest = (args.minutes - killed_at) * 60
    code = train_until([*base, "--resume", str(args.out), "--quiet"], rest, start, samples)
    after = epochs(args.out)
    numbers = [int(row["epoch"]) for row in after]
    steps = [int(row["env_steps"]) for row in after]
    per_epoch = steps[0] if steps else 0
    config = json.loads((args.out / "config.json").read_text())
    record: dict[str, Any] = {
        "benchmark": "long_run",
        "env_id": args.env,
        "seed": args.seed,
        "minutes": args.minutes,
        "killed_at_minute": round(killed_at, 1),
        "epochs_committed_before_kill": len(before),
        "epochs_at_end": len(after),
        "epochs_in_order_once": numbers == list(range(1, len(numbers) + 1)),
        "env_steps_add_up": steps == [per_epoch * e for e in numbers],
        "resumed_exit": code,
        "rss_mb": samples,  # [minute, MB of the trainer and its workers, load average]
        "buffer_size": config["buffer_size"],
        "buffer_mb": round(buffer_megabytes(config), 1),
        "config": config,
        "machine": machine(),
        "command": " ".join(sys.argv),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    record = portable(record, {args.out.resolve().parent: "runs"})
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k not in ("rss_mb", "config")}))
    return 0 if record["epochs_in_order_once"] and record["env_steps_add_up"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
