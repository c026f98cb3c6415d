"""What the pre-training checks cost beside a run's first epoch.

``goalenvs train`` runs the cheap checks of ``goalenvs check`` before its first step
(:mod:`goalenvs.checker.preflight`). This script measures, per env, the checks' seconds
(the median of ``--rounds`` runs on one env built as the trainer builds it) and the
first epoch of a run with the env's preset (``Trainer``, one epoch, the preset's
schedule, its own wall time as progress.csv records it), and appends one JSON line per env
to ``benchmarks/results/preflight.jsonl`` with the machine and the load.

    python benchmarks/preflight.py
    python benchmarks/preflight.py --envs goalenvs/PointReach-v0 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import append_jsonl, run_info  # noqa: E402

RESULTS_FILE = "preflight.jsonl"
ENVS = (
    "gymnasium_robotics:FetchPush-v4",
    "goalenvs/Parking-v0",
    "highway_env:parking-v0",
    "goalenvs/PointReach-v0",
)


def measure(env_id: str, rounds: int) -> dict:
    """The checks' seconds (each round, and the median) and the first epoch's seconds."""
    import torch

    from goalenvs.checker.preflight import preflight
    from goalenvs.train.envs import validate_training_env
    from goalenvs.train.presets import resolve_config
    from goalenvs.train.trainer import Trainer

    info = run_info()
    with tempfile.TemporaryDirectory() as tmp:
        config = resolve_config(
            env_id, epochs=1, verbose=False, device="cpu", out=str(Path(tmp) / "run")
        )
        needs_length = config.rollout_steps is None or config.gamma is None
        env = validate_training_env(env_id, config.make_kwargs(), config.algo)
        seconds = []
        try:
            for _ in range(rounds):
                start = time.perf_counter()
                result = preflight(env, seed=config.seed, needs_length=needs_length)
                seconds.append(round(time.perf_counter() - start, 4))
        finally:
            env.close()
        threads = torch.get_num_threads()
        trainer = Trainer(config)
        epoch = trainer.run().history[0]
        torch.set_num_threads(threads)
    first_epoch = float(epoch["wall_time"])
    median = statistics.median(seconds)
    return {
        "env_id": env_id,
        "checks": [r.id for r in result.report.results],
        "preflight_seconds": seconds,
        "preflight_median_s": median,
        "first_epoch_s": round(first_epoch, 2),
        "first_epoch_env_steps": int(epoch["env_steps"]),
        "ratio": round(median / first_epoch, 4),
        "precision": trainer.plan.precision,  # the first epoch's updates
        **info,
        "load_after": run_info()["load"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Measures each env and prints one line per env."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    for env_id in args.envs:
        record = measure(env_id, args.rounds)
        append_jsonl(RESULTS_FILE, record)
        print(
            f"{env_id}: checks {record['preflight_median_s']:.2f} s (median of "
            f"{args.rounds}), first epoch {record['first_epoch_s']:.1f} s of "
            f"{record['first_epoch_env_steps']:,} env steps: {100 * record['ratio']:.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
