"""The run's learning curves (PNG): success rate, return and losses against env steps."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def format_env_steps(value: float, _position: object = None) -> str:
    """An env-step count as a tick reads it: ``0``, ``800``, ``12k``, ``1.5M``."""
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.0f}"


def env_steps_axis(ax: Any) -> None:
    """An x axis of env steps: a few ticks, each in k / M (``100k``, ``150k``)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(format_env_steps))
    ax.set_xlabel("env steps")


def save_figure(fig: Any, path: Path) -> Path:
    """Writes ``fig`` to ``path``, replaced atomically, so a viewer never sees half an image."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.png")
    fig.savefig(tmp)
    os.replace(tmp, path)
    return path


def plot_curves(
    rows: Sequence[dict[str, object]],
    path: str | os.PathLike,
    title: str = "",
    losses: Sequence[str] = (),
) -> Path:
    """Draws eval (and training) success rate, eval return and ``losses`` (progress
    columns, a third panel when given) against env steps; matplotlib's Agg canvas, no
    display needed."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    path = Path(path)
    steps = [r["env_steps"] for r in rows]
    losses = [name for name in losses if rows and name in rows[0]]
    fig = Figure(figsize=(13.5 if losses else 9, 3.4), dpi=80)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3 if losses else 2)
    ax_success, ax_return = axes[0], axes[1]
    ax_success.plot(steps, [r["eval_success"] for r in rows], marker=".", label="eval")
    if rows and "eval_success_online" in rows[0]:  # policy_average: the policy itself
        online = [r["eval_success_online"] for r in rows]
        ax_success.plot(steps, online, marker=".", alpha=0.6, label="eval, not averaged")
    ax_success.plot(steps, [r["train_success"] for r in rows], alpha=0.6, label="training")
    ax_success.set(xlabel="env steps", ylabel="success rate", ylim=(-0.03, 1.03))
    ax_success.legend(loc="lower right")
    ax_return.plot(steps, [r["eval_return"] for r in rows], marker=".", color="C2")
    ax_return.set(xlabel="env steps", ylabel="eval return")
    for name in losses:
        axes[2].plot(steps, [r[name] for r in rows], label=name)
    if losses:
        axes[2].set(xlabel="env steps", ylabel="loss / value")
        axes[2].legend(loc="best", fontsize="small")
    for ax in axes:
        ax.grid(alpha=0.3)
        env_steps_axis(ax)
    if title:
        fig.suptitle(title)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.88, wspace=0.25)
    return save_figure(fig, path)
