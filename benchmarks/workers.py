"""One worker against two on FetchPush-v4: the same preset, the same budget each.

Three configurations, one after the other, each for ``--budget`` seconds from launch:

    1 worker      python -m goalenvs train ENV ...
    2 workers     torchrun --standalone --nproc-per-node 2 -m goalenvs train ENV ...
    2 nodes       torchrun --nnodes 2 --nproc-per-node 1 --node-rank {0,1}
                      --master-addr 127.0.0.1 --master-port P -m goalenvs train ENV ...
                  (two launchers rendezvousing over TCP, as two machines would)

With W workers every cycle collects on W x num_envs envs and each gradient step averages
W batches (gradients all-reduced with gloo), so per gradient step W times the data is
collected and sampled. The table reports the trainer's own counters over its own
``wall_time`` (training and evaluation, not the ~30 s of start-up).

    python benchmarks/workers.py --budget 480            # the three runs, 8 min each
    python benchmarks/workers.py --only 1 2              # some of them
    python benchmarks/workers.py --from-log              # the table from the kept logs

Logs (progress.csv per configuration and the machine load) go to
``benchmarks/results/fetch/workers_*.csv``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's goalenvs, also for the launched trainers

from evidence import child_env  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "fetch"
CONFIGS = {
    "1": "1 worker",
    "2": "2 workers (--nproc-per-node 2)",
    "2n": "2 nodes (--nnodes 2, 127.0.0.1)",
}
TARGETS = (0.5, 0.9)


def free_port() -> int:
    """A TCP port nobody listens on now (for the 2-node rendezvous)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def commands(key: str, train_args: list[str]) -> list[list[str]]:
    """The launcher command lines of one configuration (one per 'machine')."""
    python = [sys.executable]
    run = ["-m", "goalenvs", "train", *train_args]
    torchrun = [*python, "-m", "torch.distributed.run"]
    if key == "1":
        return [[*python, *run]]
    if key == "2":
        return [[*torchrun, "--standalone", "--nproc-per-node", "2", *run]]
    port = str(free_port())
    return [
        [*torchrun, "--nnodes", "2", "--nproc-per-node", "1", "--node-rank", str(rank),
         "--master-addr", "127.0.0.1", "--master-port", port, *run]
        for rank in (0, 1)
    ]  # fmt: skip


def launch(key: str, train_args: list[str], budget: float) -> list[float]:
    """Runs one configuration for ``budget`` seconds, then SIGTERM to every launcher
    (torchrun passes it on; the trainer stops after the cycle, committed epochs stay).
    Returns the 1-minute load averages sampled every 10 s meanwhile."""
    env = child_env(ROOT, OMP_NUM_THREADS="1")
    env.pop("MUJOCO_GL", None)
    procs = []
    for command in commands(key, train_args):
        print(" ".join(command[1:]), flush=True)
        procs.append(subprocess.Popen(command, cwd=ROOT, env=env))
    loads: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10.0):
            loads.append(os.getloadavg()[0])

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    deadline = time.monotonic() + budget
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(1.0)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    done.set()
    sampler.join()
    return loads


def read_progress(path: Path) -> list[dict[str, float]]:
    """The rows of a progress.csv as floats."""
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def summary(key: str, rows: list[dict[str, float]], meta: dict) -> list[str]:
    """One table row: throughput and time/env steps to each target."""
    minutes = meta["budget"] / 60
    if not rows:
        return [CONFIGS[key], "0", "-", "-", "-", "-"] + ["no epoch finished"] * len(TARGETS)
    last = rows[-1]
    wall = last["wall_time"]
    sampled = last["updates"] * meta["batch_size"] * meta["workers"]
    cells = [
        CONFIGS[key],
        f"{last['epoch']:.0f}",
        f"{last['env_steps'] / wall:.1f}",
        f"{last['updates'] / wall:.1f}",
        f"{sampled / wall:,.0f}",
        f"{max(r['eval_success'] for r in rows):.2f}",
    ]
    for target in TARGETS:
        hit = next((r for r in rows if r["eval_success"] >= target), None)
        cells.append(
            f"not reached in {minutes:.0f} min ({last['env_steps']:,.0f} steps)"
            if hit is None
            else f"{hit['wall_time']:.0f} s, {hit['env_steps']:,.0f} steps"
        )
    cells.append(f"{sum(meta['loads']) / max(len(meta['loads']), 1):.1f}")
    return cells


def table(keys: list[str]) -> str:
    """Markdown table of the kept logs of ``keys``."""
    head = ["workers", "epochs", "env steps/s", "gradient steps/s", "sampled transitions/s"]
    head += ["best eval success", *(f"to {t}" for t in TARGETS), "load (1-min avg)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key in keys:
        meta_path = RESULTS / f"workers_{key}.json"
        if not meta_path.exists():
            continue
        meta = json.loads(meta_path.read_text())
        csv_path = RESULTS / f"workers_{key}.csv"
        rows = read_progress(csv_path) if csv_path.exists() else []
        lines.append("| " + " | ".join(summary(key, rows, meta)) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="gymnasium_robotics:FetchPush-v4")
    parser.add_argument("--preset", default="fetch_push")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds per run")
    parser.add_argument("--cycles", type=int, default=25, help="cycles per epoch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    parser.add_argument("--from-log", action="store_true", help="print the kept table only")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        raise SystemExit(f"--budget must be > 0 seconds, got {args.budget}")
    if args.cycles <= 0:
        raise SystemExit(f"--cycles must be a positive integer, got {args.cycles}")
    if not args.from_log:
        from goalenvs.train.presets import resolve_config

        batch_size = resolve_config(args.env, args.preset).batch_size
        RESULTS.mkdir(parents=True, exist_ok=True)
        for key in args.only:
            out = Path(tempfile.mkdtemp(prefix=f"workers_{key}_")) / "run"
            train_args = [args.env, "--preset", args.preset, "--seed", str(args.seed)]
            train_args += ["--cycles", str(args.cycles), "--quiet", "--out", str(out)]
            loads = launch(key, train_args, args.budget)
            progress = out / "progress.csv"
            target = RESULTS / f"workers_{key}.csv"
            if progress.exists():
                shutil.copyfile(progress, target)
            elif target.exists():
                target.unlink()
            meta = {
                "env": args.env,
                "preset": args.preset,
                "cycles": args.cycles,
                "budget": args.budget,
                "seed": args.seed,
                "workers": 1 if key == "1" else 2,
                "batch_size": batch_size,
                "loads": loads,
            }
            (RESULTS / f"workers_{key}.json").write_text(json.dumps(meta) + "\n")
    print(table(args.only))


if __name__ == "__main__":
    main()
