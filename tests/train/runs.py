"""What the training tests read back from a run folder."""

from __future__ import annotations

import csv
from pathlib import Path


def progress(run: Path, untimed: bool = False) -> list[dict[str, str]]:
    """The rows of ``run``'s progress.csv; ``untimed``: without the columns that time the
    run, which differ between two runs of the same numbers."""
    with open(Path(run) / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    timed = ("wall_time", "steps_per_s", "time_")
    return [{k: v for k, v in row.items() if not (untimed and k.startswith(timed))} for row in rows]
