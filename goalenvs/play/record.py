"""Recording: the frames of a loop into a .gif or .mp4 file."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np

from goalenvs.play.screen import PlayError

RECORD_FORMATS = (".gif", ".mp4")


# --------------------------------------------------------------------------- recording


class Recorder:
    """Collects frames and writes them as a GIF (Pillow) or MP4 (imageio-ffmpeg).

    The path, its format and the encoder are checked when the recorder is made, so a
    bad ``--record`` fails before anything is played.

    Args:
        path: output file ending in ``.gif`` or ``.mp4``.
        fps: playback frames per second.
    """

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
