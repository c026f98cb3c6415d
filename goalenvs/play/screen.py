"""What keyboard play and watching a policy share: the error ``goalenvs play`` prints,
episode statistics, and the screen each loop draws to (a window and a recorder)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from goalenvs.envs.canvas import Window

if TYPE_CHECKING:
    from goalenvs.play.record import Recorder


class PlayError(Exception):
    """Bad input to ``goalenvs play``; the command prints its message as one line."""


# --------------------------------------------------------------------------- statistics


@dataclass
class EpisodeStats:
    """Returns, lengths and successes of the finished episodes, in order."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)

    @property
    def episodes(self) -> int:
        """Number of finished episodes."""
        return len(self.returns)

    @property
    def success_rate(self) -> float:
        """Fraction of episodes whose last step had ``info["is_success"]`` (nan if none)."""
        return float(np.mean(self.successes)) if self.successes else float("nan")

    @property
    def mean_return(self) -> float:
        """Mean undiscounted return (nan if no episode finished)."""
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def add(self, episode_return: float, length: int, success: bool) -> str:
        """Records one finished episode and returns its one-line report."""
        self.returns.append(float(episode_return))
        self.lengths.append(int(length))
        self.successes.append(bool(success))
        return (
            f"episode {self.episodes}: return {episode_return:.2f}, length {length}, "
            f"success {bool(success)}"
        )

    def summary(self) -> str:
        """Success rate, mean return and episode lengths in one line."""
        if not self.returns:
            return "no episode finished"
        episodes = f"{self.episodes} episode{'s' if self.episodes > 1 else ''}"
        return (
            f"{episodes}: success rate {100 * self.success_rate:.1f}% "
            f"({sum(self.successes)}/{self.episodes}), "
            f"mean return {self.mean_return:.2f} +/- {float(np.std(self.returns)):.2f}, "
            f"episode length {float(np.mean(self.lengths)):.1f} "
            f"(min {min(self.lengths)}, max {max(self.lengths)})"
        )


def _render_fps(env: Any, fps: int | None) -> int:
    return int(fps if fps is not None else env.metadata.get("render_fps") or 30)


def _frame(env: Any) -> np.ndarray | None:
    frame = env.render() if env.render_mode == "rgb_array" else None
    return None if frame is None else np.asarray(frame)


def _success(info: Mapping[str, Any]) -> bool:
    return bool(info.get("is_success", False))


@dataclass
class _Screen:
    """Where a loop's frames go: an optional window (made on first use) and a recorder."""

    env: Any
    fps: int
    window: Window | None
    show: bool
    recorder: Recorder | None

    def __post_init__(self) -> None:
        self.owns_window = self.window is None

    def capture(self) -> np.ndarray | None:
        """The env's frame now (None without rgb_array), recorded if recording."""
        frame = _frame(self.env)
        if frame is not None and self.recorder is not None:
            self.recorder.add(frame)
        return frame

    def events(self) -> list[Any]:
        return [] if self.window is None else self.window.events()

    def quit_asked(self) -> bool:
        """Whether the viewer pressed Esc or closed the window since the last call."""
        if self.window is None:
            return False
        pg = self.window.pygame
        return any(
            e.type == pg.QUIT or (e.type == pg.KEYDOWN and e.key == pg.K_ESCAPE)
            for e in self.events()
        )

    def display(self, frame: np.ndarray | None) -> bool:
        """Shows ``frame`` and ticks; False once the window was closed."""
        if frame is None or not self.show:
            return True
        if self.window is None:
            self.window = Window(frame.shape[1::-1], title=_title(self.env))
        return self.window.show(frame, self.fps)

    def close(self) -> None:
        if self.owns_window and self.window is not None:
            self.window.close()


def _title(env: Any) -> str:
    return f"goalenvs play: {env.spec.id}" if env.spec is not None else "goalenvs play"
