"""Per-seed margins behind the seeded learning tests.

The learning tests of tests/train/ (``test_ddpg_her_reaches_90_percent_on_point_reach``,
``test_agent_learns_point_reach_and_its_policy_loads``) train one seed with the
``point_reach`` preset for a few epochs; the margin they leave is the first epoch at
which each of seeds 0-4 reaches the threshold. This script trains that config per seed
(no early stop), one torch thread, and appends one JSON line per run to
``benchmarks/results/seed_margins.jsonl`` (per-epoch eval success, first epoch >= the
threshold, machine, load, versions).

    python benchmarks/seed_margins.py --algos ddpg sac td3 --seeds 0 1 2 3 4 --epochs 12
    python benchmarks/seed_margins.py --algos ddpg --precision bf16 fp32 --threshold 0.95
    python benchmarks/seed_margins.py --algos dqn --precision bf16 fp32   # 8-bit flipping
    python benchmarks/seed_margins.py table

Each record names the precision its updates ran in (``--precision``: "bf16" autocast
runs on any CPU, natively where it has bfloat16 instructions) and the env steps at which
eval success first reached each of 0.9 and 0.95. ``dqn`` trains the learning test's
8-bit flipping config (10 cycles of 16 envs x 8 steps an epoch), the others the
``point_reach`` preset.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import append_jsonl, read_jsonl, run_info  # noqa: E402

RESULTS_FILE = "seed_margins.jsonl"
THRESHOLD = 0.9


def learning_test_config(algo: str, **kwargs: Any) -> Any:
    """The config a learning test of tests/train/test_train_learning.py trains: ``dqn`` on
    8-bit flipping, any other algorithm with the ``point_reach`` preset."""
    from goalenvs.agents.dqn import DQNConfig
    from goalenvs.train.presets import resolve_config

    if algo == "dqn":
        bits = dict(env_id="goalenvs/BitFlipping-v0", env_kwargs={"n_bits": 8}, n_cycles=10)
        return DQNConfig(**bits, n_eval_episodes=20, **kwargs)
    return resolve_config("goalenvs/PointReach-v0", algo=algo, **kwargs)


def run(algo: str, seed: int, epochs: int, precision: str = "fp32", threshold: float = 0.9) -> dict:
    """Trains a learning test's config with ``algo`` for ``epochs`` epochs (no early stop)
    in ``precision`` and returns its record: per-epoch eval success, the first epoch >=
    ``threshold`` and the env steps at 0.9 and 0.95."""
    import torch

    from goalenvs.train.trainer import train

    torch.set_num_threads(1)
    info = run_info()  # load at the start
    with tempfile.TemporaryDirectory() as tmp:
        config = learning_test_config(
            algo,
            seed=seed,
            epochs=epochs,
            stop_success=None,
            device="cpu",
            precision=precision,
            verbose=False,
            out=str(Path(tmp) / "run"),
        )
        result = train(config)
    curve = [round(float(r["eval_success"]), 4) for r in result.history]
    steps = [int(r["env_steps"]) for r in result.history]
    first = next((i + 1 for i, s in enumerate(curve) if s >= threshold), None)
    at = {
        f"env_steps_to_{mark}": next(
            (n for n, s in zip(steps, curve, strict=True) if s >= mark), None
        )
        for mark in (0.9, 0.95)
    }
    return {
        "preset": "bit_flipping_8" if algo == "dqn" else "point_reach",
        "env_id": config.env_id,
        "precision": precision,
        **at,
        "algo": algo,
        "seed": seed,
        "epochs": epochs,
        "env_steps_per_epoch": result.env_steps // max(result.epochs, 1),
        "threshold": threshold,
        "first_epoch_at_threshold": first,
        "best_success": max(curve) if curve else None,
        "eval_success": curve,
        "wall_time": round(result.wall_time, 1),
        **info,
        "load_after": run_info()["load"],
    }


def row_name(record: dict) -> str:
    """The table row a record belongs to: its algorithm, with its precision and threshold
    (records from before the precision was recorded name their algorithm alone)."""
    name = record["algo"]
    if "precision" in record:
        name += f" {record['precision']}, first >= {record['threshold']:g}"
    return name


def shown(records: list[dict]) -> dict[tuple[str, int], dict]:
    """The records the table shows: the latest per (row, seed)."""
    return {(row_name(r), r["seed"]): r for r in records}


def table(records: list[dict]) -> str:
    """Markdown: per algorithm, the first epoch >= THRESHOLD for each seed (latest record)."""
    latest = shown(records)
    algos = sorted({a for a, _ in latest})
    seeds = sorted({s for _, s in latest})
    lines = [
        "| algo | " + " | ".join(f"seed {s}" for s in seeds) + " | best (min over seeds) |",
        "|---" * (len(seeds) + 2) + "|",
    ]
    for algo in algos:
        rows = [latest.get((algo, s)) for s in seeds]
        cells = [str(r["first_epoch_at_threshold"] or "-") if r else "" for r in rows]
        best = min(r["best_success"] for r in rows if r)
        lines.append(f"| {algo} | " + " | ".join(cells) + f" | {best:.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: train (default) or print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", nargs="?", default="run", choices=["run", "table"])
    parser.add_argument("--algos", nargs="+", default=["ddpg", "sac", "td3"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--precision", nargs="+", default=["fp32"], choices=["bf16", "fp32"])
    parser.add_argument("--threshold", type=float, default=THRESHOLD)
    args = parser.parse_args(argv)
    if args.action == "run":
        for algo in args.algos:
            for precision in args.precision:
                for seed in args.seeds:
                    record = run(algo, seed, args.epochs, precision, args.threshold)
                    append_jsonl(RESULTS_FILE, record)
                    print(
                        algo,
                        precision,
                        seed,
                        record["first_epoch_at_threshold"],
                        record["eval_success"],
                    )
    print(table(read_jsonl(RESULTS_FILE)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
