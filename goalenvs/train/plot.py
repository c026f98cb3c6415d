"""``goalenvs plot RUN...``: eval success across seeds, as the field reports it.

Each RUN is a run folder or a folder of them (what ``goalenvs train --seeds`` writes), all
of one env. The picture draws each seed's eval success faintly, their interquartile mean
(IQM) as a line and a 95% bootstrap band around it, as rliable does (Agarwal et al. 2021);
a seed that ended early keeps its last value. The table gives each seed's first env steps
at which eval success reached the mark, and their median and interquartile range.

    goalenvs plot runs/my-seeds                  # writes runs/my-seeds/curves.png
    goalenvs plot runs/a runs/b runs/c --mark 0.95 --out seeds.png
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from goalenvs.train.curves import env_steps_axis, format_env_steps, save_figure

DEFAULT_MARK = 0.9
BOOTSTRAP = 2000  # resamples of the seeds for the band
LEVEL = 0.95  # the band's confidence


@dataclass(frozen=True)
class SeedRun:
    """One run of a seed set: its folder, env, seed and eval success per epoch."""

    path: Path
    env_id: str
    seed: int
    env_steps: np.ndarray  # int, one per epoch
    success: np.ndarray  # eval success, one per epoch

    def first_at(self, mark: float) -> int | None:
        """The env steps of the first epoch whose eval success reached ``mark`` (None: never)."""
        reached = np.flatnonzero(self.success >= mark)
        return int(self.env_steps[reached[0]]) if reached.size else None


def run_folders(paths: Sequence[str | Path]) -> list[Path]:
    """The run folders in ``paths`` (each, or its subfolders with a ``progress.csv``); a
    path with neither is a ValueError naming it."""
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if (path / "progress.csv").is_file():
            found.append(path)
            continue
        inner = sorted(p.parent for p in path.glob("*/progress.csv")) if path.is_dir() else []
        if not inner:
            what = "no such folder" if not path.is_dir() else "no progress.csv in it or its folders"
            raise ValueError(
                f"RUN {str(path)!r}: {what}; expected a run folder or a folder of them"
            )
        found.extend(inner)
    return found


def read_runs(paths: Sequence[str | Path]) -> list[SeedRun]:
    """The runs of ``paths``, all of one env (else, or for a run with no finished epoch, a
    ValueError naming them)."""
    runs = []
    for folder in run_folders(paths):
        config = json.loads((folder / "config.json").read_text())
        with open(folder / "progress.csv") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise ValueError(f"RUN {str(folder)!r}: no epoch finished yet (progress.csv is empty)")
        steps = np.array([int(row["env_steps"]) for row in rows])
        success = np.array([float(row["eval_success"]) for row in rows])
        seed = int(config.get("seed", 0))
        runs.append(SeedRun(folder, str(config["env_id"]), seed, steps, success))
    envs = sorted({run.env_id for run in runs})
    if len(envs) > 1:
        which = ", ".join(f"{run.path} ({run.env_id})" for run in runs)
        raise ValueError(f"the runs are of {len(envs)} envs, plot one env's runs: {which}")
    return runs


def iqm(values: np.ndarray) -> np.ndarray:
    """The interquartile mean over axis -2 (the seeds): scipy's ``trim_mean(x, 0.25)``."""
    n = values.shape[-2]
    cut = int(0.25 * n)
    return np.sort(values, axis=-2)[..., cut : n - cut, :].mean(axis=-2)


def bootstrap_band(
    values: np.ndarray, level: float = LEVEL, resamples: int = BOOTSTRAP, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The percentile bootstrap interval of the IQM of ``values`` (seeds x points)."""
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.shape[0], (resamples, values.shape[0]))
    means = iqm(values[picks])  # (resamples, points)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return low, high


def on_grid(runs: Sequence[SeedRun]) -> tuple[np.ndarray, np.ndarray]:
    """Every run's eval success at the union of their env steps (seeds x points)."""
    grid = np.unique(np.concatenate([run.env_steps for run in runs]))
    # each run's last epoch at or before each grid point (its first before it began)
    at = [np.clip(np.searchsorted(run.env_steps, grid, "right") - 1, 0, None) for run in runs]
    return grid, np.stack([run.success[i] for run, i in zip(runs, at, strict=True)])


def seed_table(runs: Sequence[SeedRun], mark: float) -> list[str]:
    """Lines: each seed's first env steps to ``mark``, then their median and IQR."""
    lines = [f"seed  env steps to {mark:g}  best  last"]
    reached = []
    for run in sorted(runs, key=lambda run: run.seed):
        first = run.first_at(mark)
        if first is not None:
            reached.append(first)
        shown = "-" if first is None else f"{first:,}"
        lines.append(
            f"{run.seed:>4}  {shown:>{len(f'env steps to {mark:g}')}}  "
            f"{run.success.max():.2f}  {run.success[-1]:.2f}"
        )
    lines.append(f"{len(reached)} of {len(runs)} seeds reached {mark:g}{mark_summary(reached)}")
    return lines


def mark_summary(reached: Sequence[float]) -> str:
    """``: median 280k env steps, IQR 270k-290k`` of the seeds' first env steps to a mark
    (empty when none reached it)."""
    if not len(reached):
        return ""
    q1, median, q3 = np.percentile(reached, [25, 50, 75])
    return (
        f": median {format_env_steps(median)} env steps, IQR {format_env_steps(q1)}-"
        f"{format_env_steps(q3)}"
    )


def plot_seeds(runs: Sequence[SeedRun], path: str | Path, mark: float = DEFAULT_MARK) -> Path:
    """Draws each run's eval success, their IQM and its 95% bootstrap band to ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    grid, values = on_grid(runs)
    fig = Figure(figsize=(7, 4), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for run in runs:
        ax.plot(run.env_steps, run.success, color="C0", alpha=0.25, lw=1)
    low, high = bootstrap_band(values)
    ax.fill_between(grid, low, high, color="C0", alpha=0.25, lw=0, label=f"{LEVEL:.0%} CI")
    ax.plot(grid, iqm(values), color="C0", lw=2, label=f"IQM of {len(runs)} seeds")
    ax.axhline(mark, color="grey", ls=":", lw=1, label=f"mark {mark:g}")
    ax.set(ylabel="eval success", ylim=(-0.03, 1.03), title=runs[0].env_id)
    env_steps_axis(ax)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.subplots_adjust(left=0.11, right=0.97, bottom=0.14, top=0.9)
    return save_figure(fig, Path(path))


# --------------------------------------------------------------------------- command line

SUMMARY = "draw eval success across seeds (IQM, 95 percent band) and their env steps to a mark"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs plot``."""
    parser.add_argument("runs", nargs="+", metavar="RUN", help="run folders, or folders of them")
    parser.add_argument(
        "--mark",
        type=float,
        default=DEFAULT_MARK,
        help=f"the eval success whose first env steps the table gives (default {DEFAULT_MARK})",
    )
    parser.add_argument(
        "--out", help="the picture (default: RUN/curves.png for one folder of runs, else seeds.png)"
    )


def run(args: argparse.Namespace) -> int:
    """``goalenvs plot``: 0, or 2 after one error line for bad input."""
    try:
        if not 0.0 < args.mark <= 1.0:
            raise ValueError(f"--mark {args.mark}: expected an eval success in (0, 1]")
        runs = read_runs(args.runs)
    except ValueError as exc:
        print(f"goalenvs plot: error: {exc}", file=sys.stderr)
        return 2
    single_set = len(args.runs) == 1 and not (Path(args.runs[0]) / "progress.csv").is_file()
    out = args.out or (Path(args.runs[0]) / "curves.png" if single_set else "seeds.png")
    path = plot_seeds(runs, out, args.mark)
    print("\n".join(seed_table(runs, args.mark)))
    print(f"curves: {path}")
    return 0
