"""panda-gym's PandaReach-v3 and PandaPush-v3 trained by ``goalenvs train`` with its
default preset for them (goalenvs/train/presets/panda.toml), for a wall-clock budget.

Each epoch (2,000 env steps) ends with the trainer's own evaluation: 20 deterministic
episodes on separately seeded envs, success = ``info["is_success"]`` at the episode's
end. The clock counts everything from the trainer's construction (evaluations included).

    python benchmarks/panda.py run --env PandaReach-v3 --seed 0 --budget 300
    python benchmarks/panda.py run --env PandaPush-v3 --seed 0 --budget 1500
    python benchmarks/panda.py table [--plot]     # every logged run

Every run appends one JSON line (its curve, the load average) to
benchmarks/results/panda.jsonl.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from curves import curve_cells, load_cell, load_runs, plot_runs  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "panda.jsonl"
IMAGE = ROOT / "docs" / "images" / "panda.png"
ENVS = ("PandaReach-v3", "PandaPush-v3")


class _BudgetSpentError(Exception):
    pass


def run(env: str, seed: int, budget: float) -> dict[str, Any]:
    """One run of ``goalenvs train panda_gym:ENV`` (its preset), logged when it ends."""
    import torch

    # The first Adam imports torch._dynamo (seconds): before the clock starts.
    import torch._dynamo

    from goalenvs.train.presets import resolve_config
    from goalenvs.train.trainer import train

    torch.set_num_threads(1)
    env_id = f"panda_gym:{env}"
    config = resolve_config(env_id, seed=seed, verbose=False)
    config.out = str(ROOT / "runs" / f"panda-bench-{env}-s{seed}-{os.getpid()}")
    start = time.perf_counter()
    curve: list[tuple[float, int, float]] = []
    load_before = os.getloadavg()[0]

    def callback(row: dict) -> None:
        curve.append((time.perf_counter() - start, int(row["env_steps"]), row["eval_success"]))
        print(f"  {env} seed {seed}: {curve[-1]}", flush=True)
        if curve[-1][0] > budget:
            raise _BudgetSpentError

    with contextlib.suppress(_BudgetSpentError):
        train(config, callback=callback)
    row = {
        "env": env,
        "seed": seed,
        "budget": budget,
        "preset": "panda",
        "curve": curve,
        "load": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def table(rows: list[dict]) -> str:
    """One line per run: env steps and seconds to 0.5 / 0.9, best and final success."""
    lines = [
        "| env | seed | budget, s | env steps | to 0.5: steps / s | to 0.9: steps / s | "
        "best | final success | load avg |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=lambda r: (ENVS.index(r["env"]), r["seed"], r["date"])):
        if row["curve"]:
            cells = [row["env"], str(row["seed"]), *curve_cells(row), load_cell(row)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    """Eval success against seconds and env steps, one line per run."""
    # Markers: a PandaReach run is a single evaluation (it stops at 1.0).
    plot_runs(
        rows,
        path,
        group=lambda row: (ENVS.index(row["env"]), row["env"]),
        title="panda-gym, goalenvs DDPG+HER (panda preset)",
        time_label="wall-clock seconds",
        style="o-",
        legend_loc="center right",
    )


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run`` or ``table``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="one env, one seed")
    one.add_argument("--env", choices=ENVS, required=True)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--budget", type=float, default=600.0, help="wall-clock seconds")
    report = sub.add_parser("table", help="the table of every logged run")
    report.add_argument("--plot", action="store_true", help=f"also write {IMAGE.name}")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.env, args.seed, args.budget)
    rows = load_runs(RESULTS)
    if rows is None:
        print(f"no runs logged in {RESULTS}")
        return 1
    print(table(rows))
    if args.command == "table" and args.plot:
        plot(rows, IMAGE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
