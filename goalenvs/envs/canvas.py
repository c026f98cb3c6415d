"""The shared pygame drawing layer: world coordinates to pixels, primitives, window, frames.

Every goalenvs env draws on a :class:`Canvas`: an offscreen surface with a world-to-pixel
transform (world ``y`` points up, pixel ``y`` down). ``rgb_array`` reads the surface into
an ``(H, W, 3)`` uint8 array; ``show`` blits it to a window that pumps events every frame
(so the window never reads as "not responding") and ticks at the env's ``render_fps``.
It works headless: with ``SDL_VIDEODRIVER=dummy`` the human window is a dummy one.

pygame is imported on first use, so the envs run and train without it.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

Color = tuple[int, int, int]


def import_pygame() -> Any:
    """Imports pygame or raises ``DependencyNotInstalled`` saying how to install it."""
    try:
        import pygame
    except ImportError as exc:  # pragma: no cover - depends on the installation
        from gymnasium.error import DependencyNotInstalled

        raise DependencyNotInstalled(
            'pygame is not installed, rendering needs it: run `pip install "pygame>=2.1"`'
        ) from exc
    return pygame


class Canvas:
    """An offscreen pygame surface with a world-to-pixel transform.

    Args:
        size: (width, height) in pixels.
        world_bounds: (x_min, x_max, y_min, y_max) in world units mapped onto the surface;
            the scale is the same on both axes (the smaller of the two fits).
        background: fill colour of :meth:`clear`.
        title: the human window's caption.
    """

    def __init__(
        self,
        size: tuple[int, int],
        world_bounds: tuple[float, float, float, float],
        background: Color = (255, 255, 255),
        title: str = "goalenvs",
    ) -> None:
        self.pygame = import_pygame()
        if not self.pygame.get_init():
            self.pygame.init()
        self.width, self.height = int(size[0]), int(size[1])
        x_min, x_max, y_min, y_max = (float(v) for v in world_bounds)
        if x_max <= x_min or y_max <= y_min:
            raise ValueError(f"world_bounds={world_bounds} must have x_max > x_min, y_max > y_min")
        self.pixels_per_unit = min(self.width / (x_max - x_min), self.height / (y_max - y_min))
        # Centre the world on the surface when the aspect ratios differ.
        self._origin = np.array(
            [
                self.width / 2 - self.pixels_per_unit * (x_min + x_max) / 2,
                self.height / 2 + self.pixels_per_unit * (y_min + y_max) / 2,
            ]
        )
        self.background = background
        self.title = title
        # 24-bit with the red byte first in memory: rgb_array then reads rows as they
        # are (a memcpy) instead of converting every pixel, about 40x faster.
        masks = (0xFF, 0xFF00, 0xFF0000, 0)
        if sys.byteorder == "big":
            masks = (0xFF0000, 0xFF00, 0xFF, 0)
        self.surface = self.pygame.Surface((self.width, self.height), 0, 24, masks)
        self._window: Any = None
        self._clock: Any = None
        self._fonts: dict[int, Any] = {}
        self.window_closed = False

    # ---- transform
    def to_pixels(self, xy: Any) -> np.ndarray:
        """World coordinates ``(..., 2)`` to pixel coordinates (floats, y down)."""
        xy = np.asarray(xy, dtype=np.float64)
        return np.stack(
            [
                self._origin[0] + self.pixels_per_unit * xy[..., 0],
                self._origin[1] - self.pixels_per_unit * xy[..., 1],
            ],
            axis=-1,
        )

    def to_pixel(self, xy: Sequence[float]) -> tuple[int, int]:
        """One world point to an integer pixel ``(column, row)``."""
        px = self.to_pixels(xy)
        return int(round(px[0])), int(round(px[1]))

    def length(self, world_length: float) -> int:
        """A world length in whole pixels (at least 1)."""
        return max(1, int(round(world_length * self.pixels_per_unit)))

    # ---- primitives (world coordinates)
    def clear(self, color: Color | None = None) -> None:
        """Fills the surface with ``color`` (default: the background)."""
        self.surface.fill(self.background if color is None else color)

    def circle(self, center: Sequence[float], radius: float, color: Color, width: int = 0) -> None:
        """A circle of world ``radius``; ``width`` > 0 draws only the outline (pixels)."""
        self.pygame.draw.circle(
            self.surface, color, self.to_pixel(center), self.length(radius), width
        )

    def line(
        self, start: Sequence[float], end: Sequence[float], color: Color, width: int = 1
    ) -> None:
        """A straight line, ``width`` in pixels."""
        self.pygame.draw.line(self.surface, color, self.to_pixel(start), self.to_pixel(end), width)

    def polygon(self, points: Any, color: Color, width: int = 0) -> None:
        """A filled polygon (or its outline when ``width`` > 0)."""
        px = [tuple(p) for p in np.round(self.to_pixels(points)).astype(int)]
        self.pygame.draw.polygon(self.surface, color, px, width)

    def box(
        self,
        center: Sequence[float],
        length: float,
        width: float,
        angle: float,
        color: Color,
        border: int = 0,
    ) -> np.ndarray:
        """A rectangle of world ``length`` x ``width`` rotated by ``angle`` radians.

        Returns its four world corners (front-left, front-right, rear-right, rear-left).
        """
        corners = box_corners(center, length, width, angle)
        self.polygon(corners, color, border)
        return corners

    def rect(
        self, x_min: float, y_min: float, x_max: float, y_max: float, color: Color, width: int = 0
    ) -> None:
        """An axis-aligned rectangle given by its world extent."""
        left, top = self.to_pixel((x_min, y_max))
        right, bottom = self.to_pixel((x_max, y_min))
        self.pygame.draw.rect(self.surface, color, (left, top, right - left, bottom - top), width)

    def arrow(
        self, start: Sequence[float], end: Sequence[float], color: Color, width: int = 2
    ) -> None:
        """A line from ``start`` to ``end`` with a head at ``end`` (nothing if they coincide)."""
        p0 = self.to_pixels(start)
        p1 = self.to_pixels(end)
        d = p1 - p0
        n = float(np.hypot(*d))
        if n < 1.0:
            return
        self.pygame.draw.line(self.surface, color, p0.round(), p1.round(), width)
        u = d / n
        head = min(10.0, 0.4 * n)
        left = p1 - head * u + 0.5 * head * np.array([-u[1], u[0]])
        right = p1 - head * u - 0.5 * head * np.array([-u[1], u[0]])
        self.pygame.draw.polygon(
            self.surface, color, [tuple(p1.round()), tuple(left.round()), tuple(right.round())]
        )

    def text(
        self, text: str, pixel: tuple[int, int], color: Color = (20, 20, 20), size: int = 16
    ) -> None:
        """Text with its top-left corner at a pixel position (heads-up display)."""
        font = self._fonts.get(size)
        if font is None:
            if not self.pygame.font.get_init():
                self.pygame.font.init()
            font = self._fonts[size] = self.pygame.font.Font(None, size)
        self.surface.blit(font.render(text, True, color), pixel)

    def snapshot(self) -> Any:
        """A copy of the surface, for :meth:`restore` (static scenery drawn once)."""
        return self.surface.copy()

    def restore(self, snapshot: Any) -> None:
        """Replaces the surface's content with a :meth:`snapshot` (one blit)."""
        self.surface.blit(snapshot, (0, 0))

    # ---- output
    def rgb_array(self) -> np.ndarray:
        """The surface as a fresh ``(height, width, 3)`` uint8 array."""
        rows = np.frombuffer(self.surface.get_buffer(), dtype=np.uint8).reshape(
            self.height, self.surface.get_pitch()
        )
        return rows[:, : 3 * self.width].reshape(self.height, self.width, 3).copy()

    def show(self, fps: int | None) -> None:
        """Shows the surface in the human window, opening it on first use.

        Pumps the event queue every frame (keeping events for the caller, e.g. keyboard
        play) and ticks the clock at ``fps`` frames per second.
        """
        pg = self.pygame
        if self._window is None:
            pg.display.init()
            pg.display.set_caption(self.title)
            self._window = pg.display.set_mode((self.width, self.height))
            self._clock = pg.time.Clock()
        pg.event.pump()
        if pg.event.peek(pg.QUIT):
            self.window_closed = True
        self._window.blit(self.surface, (0, 0))
        pg.display.flip()
        if fps:
            self._clock.tick(int(fps))

    def close(self) -> None:
        """Closes the human window, if one is open."""
        if self._window is not None:
            self.pygame.display.quit()
            self._window = None
            self._clock = None


def box_corners(center: Sequence[float], length: float, width: float, angle: float) -> np.ndarray:
    """World corners of a rotated rectangle: front-left, front-right, rear-right, rear-left."""
    c, s = math.cos(angle), math.sin(angle)
    fx, fy = 0.5 * length * c, 0.5 * length * s  # half-length along the heading
    lx, ly = -0.5 * width * s, 0.5 * width * c  # half-width to the left
    cx, cy = float(center[0]), float(center[1])
    return np.array(
        [
            [cx + fx + lx, cy + fy + ly],
            [cx + fx - lx, cy + fy - ly],
            [cx - fx - lx, cy - fy - ly],
            [cx - fx + lx, cy - fy + ly],
        ]
    )
