"""What keyboard play and watching a policy share: :class:`PlayError`, episode statistics,
and the :class:`Screen` (a window and a :class:`Recorder`) each loop's frames go to."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from goalenvs.core import episode_length
from goalenvs.envs.canvas import Window

RECORD_FORMATS = (".gif", ".mp4")


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


EPISODE_CEILING = 1000  # steps of an episode of an env that declares no length


def episode_cap(env: Any) -> tuple[int, str]:
    """The steps after which play cuts an episode (the env's declared length, else
    :data:`EPISODE_CEILING`) and the reason it prints."""
    declared = episode_length(env)
    if declared is not None:
        return declared, f"the episode length {declared} passed and the env did not end it"
    return EPISODE_CEILING, (
        f"the env declares no episode length and did not end it in {EPISODE_CEILING} steps; "
        "give one with --max-episode-steps N"
    )


def render_fps(env: Any, fps: int | None) -> int:
    """``fps`` when given, else the env's ``metadata["render_fps"]`` (30 when it has none)."""
    return int(fps if fps is not None else env.metadata.get("render_fps") or 30)


def is_success(info: Mapping[str, object]) -> bool:
    """``info["is_success"]`` as a bool (False when the env does not report it)."""
    return bool(info.get("is_success", False))


# --------------------------------------------------------------------------- screen


@dataclass
class Screen:
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
        frame = self.env.render() if self.env.render_mode == "rgb_array" else None
        if frame is None:
            return None
        frame = np.asarray(frame)
        if self.recorder is not None:
            self.recorder.add(frame)
        return frame

    def events(self) -> list[Any]:
        """The window's pygame events since the last call (none without a window)."""
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
            spec = self.env.spec
            title = "goalenvs play" + ("" if spec is None else f": {spec.id}")
            self.window = Window(frame.shape[1::-1], title=title)
        return self.window.show(frame, self.fps)

    def close(self) -> None:
        """Closes the window this screen made (a window passed in stays open)."""
        if self.owns_window and self.window is not None:
            self.window.close()


# --------------------------------------------------------------------------- recording


class Recorder:
    """Collects frames and writes them to ``path``, a ``.gif`` (Pillow) or ``.mp4``
    (imageio-ffmpeg) played at ``fps``; path, format and encoder are checked at once."""

    def __init__(self, path: str | os.PathLike[str], fps: int) -> None:
        self.path = Path(path)
        self.fps = int(fps)
        self.suffix = self.path.suffix.lower()
        if self.suffix not in RECORD_FORMATS:
            raise PlayError(
                f"--record {str(path)!r}: expected a file ending in {' or '.join(RECORD_FORMATS)}"
            )
        if self.suffix == ".gif" and importlib.util.find_spec("PIL") is None:
            raise PlayError('recording a .gif needs Pillow: pip install "pillow>=9"')
        if self.suffix == ".mp4" and (
            importlib.util.find_spec("imageio") is None
            or importlib.util.find_spec("imageio_ffmpeg") is None
        ):
            raise PlayError(
                "recording an .mp4 needs an ffmpeg encoder: pip install imageio imageio-ffmpeg "
                "(or record a .gif)"
            )
        _check_writable(self.path)
        self._frames: list[Any] = []
        self._writer: Any = None
        self.frames_written = 0

    def add(self, frame: np.ndarray) -> None:
        """Appends one ``(H, W, 3)`` uint8 frame."""
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(
                f"frames must be (H, W, 3) uint8 arrays, got shape {frame.shape} {frame.dtype}"
            )
        if self.suffix == ".gif":
            from PIL import Image

            # Palette images hold a third of the memory of RGB frames until the GIF is
            # written; the octree quantizer is exact for our flat-coloured frames and ~3x
            # faster than the default median cut.
            self._frames.append(
                Image.fromarray(frame).quantize(colors=256, method=Image.Quantize.FASTOCTREE)
            )
        else:
            if self._writer is None:
                import imageio

                self._writer = imageio.get_writer(self.path, fps=self.fps, macro_block_size=1)
            self._writer.append_data(frame)
        self.frames_written += 1

    def close(self) -> int:
        """Writes the file (nothing when no frame came) and returns the number of frames."""
        if self.suffix == ".gif" and self._frames:
            first, *rest = self._frames
            first.save(
                self.path,
                save_all=True,
                append_images=rest,
                duration=max(10, round(1000 / self.fps)),
                loop=0,
            )
            self._frames = []
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.frames_written


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise PlayError(f"--record {str(path)!r} is a directory, expected a file path")
    existed = path.exists()
    try:
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise PlayError(f"--record {str(path)!r} cannot be written: {exc.strerror}") from None
    if not existed:
        path.unlink()
