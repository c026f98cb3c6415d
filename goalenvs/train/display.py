"""The progress display of a training run: a bar over epochs, one summary line per epoch."""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.agents.config import TrainConfig
from goalenvs.agents.registry import get_algo
from goalenvs.train.timing import TIME_COLUMNS, shares

# Short names of the losses on the progress display (others are shown as they are).
LABELS = {"critic_loss": "critic", "actor_loss": "actor", "q_loss": "loss", "q_mean": "Q"}


def mean_or_nan(values: list[float]) -> float:
    """The mean of ``values``; NaN when there are none (no episode ended, say)."""
    return float(np.mean(values)) if values else float("nan")


def _losses(values: dict[str, float]) -> str:
    """``critic 0.12  actor -3.4``: the losses under their short names."""
    return "  ".join(f"{LABELS.get(name, name)} {value:.3g}" for name, value in values.items())


def _time_shares(row: dict[str, Any]) -> str:
    """``  time: env 28%  act 4% ...``: where the epoch's time went (empty without it)."""
    seconds = {k[5:]: row[k] for k in TIME_COLUMNS if isinstance(row.get(k), int | float)}
    line = shares(seconds)
    return f"  time: {line}" if line else ""


class Display:
    """The progress display: on a terminal, a rich bar over epochs with a live status line
    and one summary line per epoch; with output redirected, only the summary lines."""

    def __init__(self, config: TrainConfig, first_epoch: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.config = config
        self.loss_names = get_algo(config.algo).loss_names
        self.progress: Progress | None = None
        if not Console().is_terminal:
            return
        self.progress = Progress(
            TextColumn("[bold]epoch"),
            MofNCompleteColumn(),
            BarColumn(),
            TextColumn("{task.fields[status]}"),
            auto_refresh=False,
        )
        self.task = self.progress.add_task(
            "train", total=config.epochs, completed=first_epoch, status=""
        )
        self.progress.start()

    def cycle(self, cycle: int, env_steps: int, stats: dict[str, list]) -> None:
        """Refreshes the status line after cycle ``cycle`` (from 0) (on a terminal only)."""
        if self.progress is None:
            return
        losses = _losses({name: stats[name][-1] for name in self.loss_names if stats[name]})
        status = (
            f"cycle {cycle + 1}/{self.config.n_cycles}  steps {env_steps}  "
            f"train success {mean_or_nan(stats['success'][-50:]):.2f}  {losses}"
        )
        self.progress.update(self.task, status=status)
        self.progress.refresh()

    def epoch(self, row: dict[str, Any], best: float) -> None:
        """Prints the epoch's summary line."""
        names = self.loss_names
        losses = _losses({name: row[name] for name in names})
        if not any(np.isfinite(row[name]) for name in names):
            # no loss to show: the replay buffer never held a batch's worth this epoch
            losses = "no update yet (the buffer fills first)"
        line = (
            f"epoch {row['epoch']:>3}/{self.config.epochs}  steps {row['env_steps']:>7}  "
            f"success {row['eval_success']:.2f} (best {best:.2f})  "
            f"return {row['eval_return']:.1f}  {losses}  {row['steps_per_s']:.0f} steps/s"
            f"{_time_shares(row)}"
        )
        if self.progress is None:
            print(line, flush=True)
            return
        self.progress.console.print(line, soft_wrap=True, markup=False, highlight=False)
        self.progress.update(self.task, completed=row["epoch"])
        self.progress.refresh()

    def close(self) -> None:
        """Stops the live display."""
        if self.progress is not None:
            self.progress.stop()
