"""The same benchmarks on two versions of goalenvs, in one run: did a change move a figure?

A change that should not alter speed (a reorganisation of the package, a new error check)
is measured here against the commit it started from. Both versions run on the same
machine, at the same load, in alternating rounds, each in a fresh process that imports
the version under test (``PYTHONPATH``), so the load of a shared machine falls on both
alike. The benchmark code is this checkout's for both sides and uses only public names,
so the two sides run the very same measurement.

    python benchmarks/before_after.py --before 3a037c0            # against the working tree
    python benchmarks/before_after.py --before v0.1 --after HEAD --rounds 3
    python benchmarks/before_after.py --before 3a037c0 --parts envs buffer

Parts (every figure is per round; the table gives the best round of each side):

- ``envs``: ``benchmarks/envs.py``'s measurement of every env case: one env, gymnasium's
  SyncVectorEnv at 256 envs and the native twin at 256 and 4096 envs, in steps per CPU
  second (best of that script's interleaved rounds);
- ``buffer``: our HerReplayBuffer on ``benchmarks/her_buffer.py``'s Fetch-like episodes
  (16 envs): CPU microseconds per ``add`` of one vector step over a fill of
  ``BUFFER_TRANSITIONS``, and per ``sample`` of 256 and 2048, on numpy and on torch
  (``DeviceHerReplayBuffer`` on the CPU, fed the same steps as tensors);
- ``point_reach``: DDPG+HER on PointReach-v0 with the demo's settings, seeds 0-2: the
  env steps and the wall seconds to the first evaluation at 0.95 (what
  ``benchmarks/train.py --tasks point_reach`` measures). The env steps are the same on
  both sides when the numerics did not move; the seconds carry the machine's noise.
- ``training``: ``goalenvs train`` itself, as a user runs it, on FetchPush-v4 (its preset,
  bf16 updates) and PointReach-v0 (its preset, fp32): env steps per wall second from the
  end of the first epoch to the end of the last, so that startup is left out. The
  precision is named on both sides, so that a changed default does not pass for speed;
- ``suite``: the wall seconds of each version's own test suite (``pytest -q``, as
  ``make test`` runs it) in a full checkout of that version, and its test count.

The same revision on both sides (``--before 3a037c0 --after 3a037c0``) measures the
noise band: how far two runs of the very same code land apart on this machine, which is
how far a ratio must move before it says anything.

A version is a git revision (checked out with ``git archive`` into a temporary folder)
or ``.``, the working tree as it is. Results are appended to
``benchmarks/results/before_after.jsonl`` with the machine, the load and the command.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
PARTS = ("envs", "buffer", "point_reach", "training", "suite")
BUFFER_TRANSITIONS = 1_000_000
BUFFER_ENVS = 16
POINT_REACH_SEEDS = (0, 1, 2)
POINT_REACH_BUDGET = 180.0  # seconds a seed; the demo reaches 0.95 in well under a minute
# goalenvs train runs of the training part: (name, env id, flags)
TRAINING_RUNS = (
    (
        "FetchPush-v4",
        "gymnasium_robotics:FetchPush-v4",
        ["--preset", "fetch_push", "--precision", "bf16", "--epochs", "3"],
    ),
    (
        "PointReach-v0",
        "goalenvs/PointReach-v0",
        ["--preset", "point_reach", "--precision", "fp32", "--epochs", "8"],
    ),
)


# --------------------------------------------------------------------------- workers
# Each runs in a fresh process whose goalenvs is the version under test, and prints one
# JSON object: {metric name: value}.


def envs_worker() -> dict[str, float]:
    """Steps per CPU second of every env case and mode (``benchmarks/envs.py``)."""
    import envs

    result = {}
    for case in envs.CASES:
        for env_id, mode, n, rate in envs.measure(case):
            result[f"{env_id.split('/')[-1]} {mode} {n} (steps/s)"] = rate
    return result


def buffer_worker() -> dict[str, float]:
    """CPU microseconds per add and per sample of our buffer on Fetch-like episodes."""
    os.environ["GOALENVS_BENCH_TRANSITIONS"] = str(BUFFER_TRANSITIONS)
    import her_buffer
    import numpy as np
    import torch

    torch.set_num_threads(1)
    steps = her_buffer.episode_steps(BUFFER_ENVS, np.random.default_rng(0))
    add, sample, _ = her_buffer.build("goalenvs", BUFFER_ENVS)
    n_steps = BUFFER_TRANSITIONS // BUFFER_ENVS
    start = time.process_time()
    for i in range(n_steps):
        add(steps[i % len(steps)])
    result = {"buffer add, 16 envs (us/step)": (time.process_time() - start) / n_steps * 1e6}
    for batch in (256, 2048):
        seconds = her_buffer.best_time(lambda b=batch: sample(b), 40_000 // batch + 40)
        result[f"buffer sample {batch} (us)"] = seconds * 1e6
    # The torch buffer on the CPU, fed the same steps as tensors.
    from goalenvs.her import DeviceHerReplayBuffer

    space = her_buffer.fetch_like_env()().observation_space

    def reward(achieved: Any, desired: Any, info: Any) -> Any:
        return -((achieved - desired).norm(dim=-1) > 0.05).float()

    device = DeviceHerReplayBuffer(
        BUFFER_TRANSITIONS,
        space,
        her_buffer.fetch_like_env()().action_space,
        reward,
        n_envs=BUFFER_ENVS,
        seed=0,
        device="cpu",
    )
    tensors = [
        (
            {k: torch.from_numpy(v) for k, v in obs.items()},
            {k: torch.from_numpy(v) for k, v in next_obs.items()},
            torch.from_numpy(action),
            torch.from_numpy(rewards),
            torch.from_numpy(terminated),
            torch.from_numpy(truncated),
        )
        for obs, next_obs, action, rewards, truncated, _, terminated in steps
    ]
    start = time.process_time()
    for i in range(n_steps):
        device.add(*tensors[i % len(tensors)])
    result["torch buffer (CPU) add, 16 envs (us/step)"] = (
        (time.process_time() - start) / n_steps * 1e6
    )
    for batch in (256, 2048):
        seconds = her_buffer.best_time(lambda b=batch: device.sample(b), 40_000 // batch + 40)
        result[f"torch buffer (CPU) sample {batch} (us)"] = seconds * 1e6
    return result


def point_reach_worker() -> dict[str, float]:
    """Env steps and wall seconds of the demo's DDPG+HER to 0.95 on PointReach-v0."""
    import train as bench_train

    from goalenvs.demo import point_reach_config

    result = {}
    for seed in POINT_REACH_SEEDS:
        config = point_reach_config(seed=seed, stop_success=1.0)
        summary = bench_train.run_goalenvs(config, POINT_REACH_BUDGET, 0.95)
        result[f"PointReach seed {seed} env steps to 0.95"] = summary["steps_to_target"]
        result[f"PointReach seed {seed} seconds to 0.95"] = summary["time_to_target"]
    return result


def training_worker() -> dict[str, float]:
    """Env steps per wall second of ``goalenvs train`` runs, from the first epoch's end on."""
    result = {}
    for name, env_id, flags in TRAINING_RUNS:
        with tempfile.TemporaryDirectory(prefix="goalenvs-before-after-") as folder:
            out = Path(folder) / "run"
            command = [sys.executable, "-m", "goalenvs", "train", env_id, *flags]
            command += ["--seed", "0", "--quiet", "--out", str(out)]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode != 0:
                raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
            with open(out / "progress.csv", newline="") as file:
                rows = list(csv.DictReader(file))
        if len(rows) < 2:
            raise SystemExit(f"{name}: {len(rows)} epoch(s) in progress.csv; 2 or more needed")
        steps = float(rows[-1]["env_steps"]) - float(rows[0]["env_steps"])
        seconds = float(rows[-1]["wall_time"]) - float(rows[0]["wall_time"])
        result[f"train {name} (env steps/s)"] = steps / seconds
    return result


def part_precision(part: str) -> dict[str, str] | str | None:
    """The arithmetic of a part's updates, as its record names it: the training part's
    runs pin theirs by flag, ``point_reach`` trains the point_reach preset (fp32); the env
    and buffer parts and the suite train no network (None)."""
    if part == "training":
        return {name: flags[flags.index("--precision") + 1] for name, _, flags in TRAINING_RUNS}
    return "fp32" if part == "point_reach" else None


def suite_worker() -> dict[str, float]:
    """Wall seconds and test count of the version's own suite, run from its checkout."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        env=dict(os.environ, SDL_AUDIODRIVER="dummy"),
    )
    seconds = time.perf_counter() - start
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    if done.returncode != 0:
        raise SystemExit(f"the suite failed: {tail}\n{done.stdout[-3000:]}")
    found = re.search(r"(\d+) passed", tail)
    passed = int(found.group(1)) if found else 0
    return {"suite (wall s)": seconds, "suite tests passed": passed}


WORKERS = {
    "envs": envs_worker,
    "buffer": buffer_worker,
    "point_reach": point_reach_worker,
    "training": training_worker,
    "suite": suite_worker,
}
# Whether a larger figure is better (rates) or worse (times, steps).
HIGHER_IS_BETTER = {
    "envs": True,
    "buffer": False,
    "point_reach": False,
    "training": True,
    "suite": False,
}
# Parts that need the version's whole checkout (its tests and docs), not its package only.
WHOLE_CHECKOUT = {"suite"}


# --------------------------------------------------------------------------- driver


def checkout(version: str, folder: Path, whole: bool = False) -> Path:
    """The folder whose ``goalenvs`` package is ``version`` (extracted into ``folder``, one
    per side, so both sides may name the same revision): the working tree for ``.``.
    ``whole``: the revision's every file (tests, docs, benchmarks), not only the package."""
    if version == ".":
        return ROOT
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", version, *([] if whole else ["goalenvs"])],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def run_part(part: str, package_root: Path) -> dict[str, float]:
    """One worker in a fresh process importing goalenvs from ``package_root``."""
    from evidence import child_env

    env = child_env(package_root, BENCH)
    env.setdefault("SDL_VIDEODRIVER", "dummy")
    done = subprocess.run(
        [sys.executable, __file__, "--worker", part],
        env=env,
        cwd=package_root,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{part} on {package_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_of(rounds: list[dict[str, float]], higher_is_better: bool) -> dict[str, float]:
    """Per metric, the best value over the rounds (None values, a target never reached, skipped)."""
    pick = max if higher_is_better else min
    best: dict[str, float] = {}
    for values in rounds:
        for name, value in values.items():
            if value is None:
                continue
            best[name] = value if name not in best else pick(best[name], value)
    return best


def table(before: dict[str, float], after: dict[str, float]) -> str:
    """A markdown table: metric, before, after, after / before."""
    lines = ["| metric | before | after | after / before |", "|---|---:|---:|---:|"]
    for name in before.keys() | after.keys():
        b, a = before.get(name), after.get(name)
        ratio = f"{a / b:.3f}" if a is not None and b else "-"
        lines.append(f"| {name} | {_fmt(b)} | {_fmt(a)} | {ratio} |")
    head, rows = lines[:2], sorted(lines[2:])
    return "\n".join(head + rows)


def _fmt(value: float | None) -> str:
    if value is None:
        return "not reached"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main(argv: list[str] | None = None) -> int:
    """Runs the chosen parts on both versions in alternating rounds and prints the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", help="git revision of the first side (required)")
    parser.add_argument("--after", default=".", help="git revision, or . for the working tree")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side (default 2)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--worker", choices=PARTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker]()))
        return 0
    if not args.before:
        parser.error("--before: a git revision is required (e.g. --before HEAD~3)")
    sys.path.insert(0, str(BENCH))
    from evidence import append_jsonl, run_info

    into = Path(tempfile.mkdtemp(prefix="goalenvs-before-after-"))
    try:
        whole = any(part in WHOLE_CHECKOUT for part in args.parts)
        roots = {
            side: checkout(getattr(args, side), into / side, whole) for side in ("before", "after")
        }
        record: dict[str, Any] = run_info(
            before=args.before, after=args.after, rounds=args.rounds, parts={}
        )
        for part in args.parts:
            rounds: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
            for round_ in range(args.rounds):
                # Alternate which side goes first, so that a drift of the load in time
                # does not always favour the same side.
                order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
                for side in order:
                    rounds[side].append(run_part(part, roots[side]))
                    print(f"{part}: {side} round {round_ + 1} done", file=sys.stderr)
            best = {side: best_of(r, HIGHER_IS_BETTER[part]) for side, r in rounds.items()}
            record["parts"][part] = {"rounds": rounds, "best": best}
            if part_precision(part) is not None:
                record["parts"][part]["precision"] = part_precision(part)
            print(f"\n### {part} ({'higher' if HIGHER_IS_BETTER[part] else 'lower'} is better)")
            print(table(best["before"], best["after"]))
        print("\nsaved to", append_jsonl("before_after.jsonl", record))
    finally:
        shutil.rmtree(into, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
