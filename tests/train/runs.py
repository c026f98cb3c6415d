"""The smallest run the tests train, and what they read back from a run folder."""

from __future__ import annotations

import csv
from pathlib import Path

# One epoch of two short cycles on two envs, small networks, quiet.
TINY = dict(hidden_sizes=(16, 16), num_envs=2, epochs=1, n_cycles=2, n_batches=2, batch_size=16,
            n_eval_episodes=2, verbose=False)  # fmt: skip


def progress(run: Path, untimed: bool = False) -> list[dict[str, str]]:
    """The rows of ``run``'s progress.csv; ``untimed``: without the columns that time the
    run, which differ between two runs of the same numbers."""
    with open(Path(run) / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    timed = ("wall_time", "steps_per_s", "time_")
    return [{k: v for k, v in row.items() if not (untimed and k.startswith(timed))} for row in rows]
