"""Success curves of budgeted training runs: their table cells and their picture.

Shared by ``benchmarks/panda.py`` and ``benchmarks/highway_parking.py``. A curve is the
list of a run's evaluations, each ``(seconds, env steps, success, *extra)``; a run is the
dict those scripts log as one JSON line (``curve``, ``seed``, ``budget``, ``load``,
``date`` and the script's own keys).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

TARGETS = (0.5, 0.9)


def load_runs(path: Path) -> list[dict[str, Any]] | None:
    """The runs logged in the JSON-lines file ``path``; None when none were logged."""
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def first_at(curve: Sequence[Sequence[Any]], target: float) -> tuple[float, int] | None:
    """(seconds, env steps) of the first evaluation at ``target`` success or above."""
    return next(((point[0], point[1]) for point in curve if point[2] >= target), None)


def curve_cells(row: dict[str, Any]) -> list[str]:
    """Budget, env steps, steps / seconds to each of TARGETS, best and final success."""
    curve = row["curve"]
    cells = [f"{row['budget']:.0f}", f"{curve[-1][1]:,}"]
    for target in TARGETS:
        hit = first_at(curve, target)
        cells.append("-" if hit is None else f"{hit[1]:,} / {hit[0]:.0f}")
    cells += [f"{max(point[2] for point in curve):.2f}", f"{curve[-1][2]:.2f}"]
    return cells


def load_cell(row: dict[str, Any]) -> str:
    """The load average when the run started and when it ended."""
    return f"{row['load'][0]:.1f}-{row['load'][1]:.1f}"


def plot_runs(
    rows: list[dict[str, Any]],
    path: Path,
    *,
    group: Callable[[dict[str, Any]], tuple[int, str]],
    title: str,
    time_label: str = "training seconds",
    style: str = "-",
    legend_loc: str = "upper left",
) -> None:
    """Eval success against seconds (left) and env steps (right), one line per run.

    ``group(row)`` gives the colour index and legend label of a run; runs of one group
    share both, and the label is shown once.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.4), dpi=80)
    FigureCanvasAgg(fig)
    ax_time, ax_steps = fig.subplots(1, 2)
    labeled: set[str] = set()
    for row in rows:
        if not row["curve"]:
            continue
        seconds, steps, success = [list(column) for column in zip(*row["curve"], strict=True)][:3]
        color, name = group(row)
        label = None if name in labeled else name
        labeled.add(name)
        ax_time.plot(seconds, success, style, ms=3, color=f"C{color}", alpha=0.8, label=label)
        ax_steps.plot(steps, success, style, ms=3, color=f"C{color}", alpha=0.8)
    ax_time.set(xlabel=time_label, ylabel="eval success", ylim=(-0.03, 1.03))
    ax_steps.set(xlabel="env steps", ylim=(-0.03, 1.03))
    ax_time.legend(loc=legend_loc, fontsize=8)
    for ax in (ax_time, ax_steps):
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.88, wspace=0.2)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
