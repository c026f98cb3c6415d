"""The small runs the tests train (TINY, reach_config) and what they read of a run folder."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from goalenvs.agents.ddpg import DDPGConfig

# One epoch of two short cycles on two envs, small networks, quiet.
TINY = dict(hidden_sizes=(16, 16), num_envs=2, epochs=1, n_cycles=2, n_batches=2, batch_size=16,
            n_eval_episodes=2, verbose=False)  # fmt: skip
ENVS = Path(__file__).resolve().parent / "worker_envs.py"
# PointReach built from its class: no native twin, so it steps one sub-env at a time.
REACH = f"{ENVS}:FailingReach"


def reach_config(tmp_path: Path, **kwargs: Any) -> DDPGConfig:
    """A short quiet DDPG run on :data:`REACH` (episodes of 10 steps, 4 envs) on the CPU."""
    base = dict(
        env_id=REACH,
        env_kwargs={"max_episode_steps": 10},
        epochs=1,
        n_cycles=1,
        num_envs=4,
        n_batches=1,
        batch_size=16,
        hidden_sizes=(16,),
        n_eval_episodes=2,
        device="cpu",
        verbose=False,
        out=str(tmp_path / "run"),
    )
    return DDPGConfig(**{**base, **kwargs})


def progress(run: Path, untimed: bool = False) -> list[dict[str, str]]:
    """The rows of ``run``'s progress.csv; ``untimed``: without the columns that time the
    run, which differ between two runs of the same numbers."""
    with open(Path(run) / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    timed = ("wall_time", "steps_per_s", "time_")
    return [{k: v for k, v in row.items() if not (untimed and k.startswith(timed))} for row in rows]
