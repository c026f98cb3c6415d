"""The progress display of a training run: a bar over epochs, one summary line per epoch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from goalenvs.agents.config import TrainConfig
from goalenvs.agents.registry import get_algo

if TYPE_CHECKING:
    from goalenvs.train.trainer import Trainer

# Short names of the losses on the progress display (others are shown as they are).
LABELS = {"critic_loss": "critic", "actor_loss": "actor", "q_loss": "loss", "q_mean": "Q"}


def loss_names(algo: str) -> tuple[str, ...]:
    """The losses algorithm ``algo`` logs (its agent's ``loss_names``)."""
    return get_algo(algo).loss_names


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


class _Display:
    """The rich progress display: a bar over epochs, one summary line per epoch."""

    def __init__(self, config: TrainConfig, first_epoch: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.config = config
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

    def cycle(self, trainer: Trainer, cycle: int, stats: dict[str, list], elapsed: float) -> None:
        """Refreshes the status line after a cycle."""
        losses = "  ".join(
            f"{LABELS.get(name, name)} {stats[name][-1]:.3g}"
            for name in loss_names(self.config.algo)
            if stats[name]
        )
        status = (
            f"cycle {cycle + 1}/{self.config.n_cycles}  steps {trainer.env_steps}  "
            f"train success {_mean(stats['success'][-50:]):.2f}  {losses}"
        )
        self.progress.update(self.task, status=status)
        self.progress.refresh()

    def epoch(self, row: dict[str, Any], best: float) -> None:
        """Prints the epoch's summary line."""
        losses = "  ".join(
            f"{LABELS.get(name, name)} {row[name]:.3g}" for name in loss_names(self.config.algo)
        )
        self.progress.console.print(
            f"epoch {row['epoch']:>3}  steps {row['env_steps']:>7}  "
            f"success {row['eval_success']:.2f} (best {best:.2f})  "
            f"return {row['eval_return']:.1f}  {losses}  {row['steps_per_s']:.0f} steps/s",
            soft_wrap=True,
        )
        self.progress.update(self.task, completed=row["epoch"])
        self.progress.refresh()

    def close(self) -> None:
        """Stops the live display."""
        self.progress.stop()
