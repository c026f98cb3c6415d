"""The shared pygame drawing layer: every env draws on a :class:`Canvas` (world ``y`` up,
pixel ``y`` down), shown in a :class:`Window` for ``human`` rendering. pygame is imported,
and each of its modules initialised, on first use: the envs run and train without it."""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

import numpy as np

Color = tuple[int, int, int]
# A point in world coordinates: (x, y) as a sequence or a 2-element array.
Point: TypeAlias = "Sequence[float] | np.ndarray"

# Events kept for the caller between two Window.events() calls; older ones are dropped,
# so a window nobody reads events from never grows a backlog.
MAX_PENDING_EVENTS = 512


def import_pygame() -> Any:
    """Imports pygame or raises ``DependencyNotInstalled`` saying how to install it."""
    # pygame prints a banner on import unless told not to; it would mix into our output.
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as exc:
        from gymnasium.error import DependencyNotInstalled

        raise DependencyNotInstalled(
            'pygame is not installed, rendering needs it: run `pip install "pygame>=2.1"`'
        ) from exc
    return pygame


class Window:
    """The one on-screen window of ``size`` (width, height) pixels: shows surfaces or RGB
    frames and collects input events. The last window to show something owns pygame's one
    display; closing one that no longer owns it leaves the display alone."""

    _owner: Window | None = None

    def __init__(self, size: tuple[int, int], title: str = "goalenvs") -> None:
        self.pygame = import_pygame()
        self.width, self.height = int(size[0]), int(size[1])
        self.title = title
        self.closed = False
        self._display: Any = None
        self._clock: Any = None
        self._events: deque[Any] = deque(maxlen=MAX_PENDING_EVENTS)

    @property
    def is_open(self) -> bool:
        """Whether the window is currently on screen."""
        # Someone else may have quit the display (gymnasium's play does, so does close()).
        return (
            self._display is not None and Window._owner is self and self.pygame.display.get_init()
        )

    def open(self) -> None:
        """Opens the window (idempotent); events can be posted once it is open."""
        if self.is_open:
            return
        pg = self.pygame
        if not pg.display.get_init():
            pg.display.init()
        pg.display.set_caption(self.title)
        self._display = pg.display.set_mode((self.width, self.height))
        self._clock = pg.time.Clock()
        self.closed = False
        Window._owner = self

    def show(self, image: object, fps: int | None = None) -> bool:
        """Shows a pygame Surface or an ``(H, W, 3)`` uint8 frame, opening the window first,
        draining the event queue (kept for :meth:`events`) and ticking at ``fps``. Returns
        False, showing nothing, once the user closed the window (until :meth:`close`)."""
        if self.closed:
            return False
        self.open()
        self._pump()
        if self.closed:
            return False
        if isinstance(image, np.ndarray):
            image = self.frame_surface(image)
        self._display.blit(image, (0, 0))
        self.pygame.display.flip()
        if fps:
            self._clock.tick(int(fps))
        return True

    def frame_surface(self, frame: np.ndarray) -> object:
        """An ``(H, W, 3)`` uint8 frame as a pygame Surface."""
        frame = np.ascontiguousarray(frame, dtype=np.uint8)
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"frame must have shape (H, W, 3), got {frame.shape}")
        return self.pygame.image.frombuffer(frame.tobytes(), frame.shape[1::-1], "RGB")

    def events(self) -> list[object]:
        """The events since the last call (those drained by :meth:`show` included)."""
        if self.is_open:
            self._pump()
        out = list(self._events)
        self._events.clear()
        return out

    def _pump(self) -> None:
        pg = self.pygame
        for event in pg.event.get():
            if event.type == pg.QUIT:
                self.closed = True
            self._events.append(event)
        if self.closed:
            self._release()

    def _release(self) -> None:
        if Window._owner is self:
            self.pygame.display.quit()
            Window._owner = None
        self._display = None
        self._clock = None

    def close(self) -> None:
        """Closes the window, if open; a later :meth:`show` opens it again."""
        self._release()
        self._events.clear()
        self.closed = False


class Canvas:
    """An offscreen pygame surface of ``size`` (width, height) pixels onto which
    ``world_bounds`` (x_min, x_max, y_min, y_max) map, centred, at one scale on both axes
    (the smaller fits); ``background`` fills :meth:`clear`, ``title`` names the window."""

    def __init__(
        self,
        size: tuple[int, int],
        world_bounds: tuple[float, float, float, float],
        background: Color = (255, 255, 255),
        title: str = "goalenvs",
    ) -> None:
        self.pygame = import_pygame()
        self.width, self.height = int(size[0]), int(size[1])
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"size={size} must be two positive pixel counts (width, height)")
        x_min, x_max, y_min, y_max = (float(v) for v in world_bounds)
        if not x_max > x_min or not y_max > y_min:
            raise ValueError(f"world_bounds={world_bounds} must have x_max > x_min, y_max > y_min")
        self.world_bounds = (x_min, x_max, y_min, y_max)
        ppu = min(self.width / (x_max - x_min), self.height / (y_max - y_min))
        self.pixels_per_unit = ppu
        centre_x, centre_y = (x_min + x_max) / 2, (y_min + y_max) / 2
        self._origin = np.array([self.width / 2 - ppu * centre_x, self.height / 2 + ppu * centre_y])
        self._scale = np.array([ppu, -ppu])  # pixels per world unit, pixel y down
        self.background = background
        self.title = title
        # The surface draws straight into this (H, W, 3) array, so a frame is one memcpy;
        # reading a 32-bit surface back into RGB costs more than drawing a whole frame.
        self._pixels = np.zeros((self.height, self.width, 3), dtype=np.uint8)
        self.surface = self.pygame.image.frombuffer(self._pixels, (self.width, self.height), "RGB")
        self.window = Window((self.width, self.height), title)
        self._fonts: dict[int, Any] = {}

    # ---- transform
    def to_pixels(self, xy: object) -> np.ndarray:
        """World coordinates ``(..., 2)`` to pixel coordinates (floats, y down)."""
        return self._origin + np.asarray(xy, dtype=np.float64) * self._scale

    def to_pixel(self, xy: Point) -> tuple[int, int]:
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

    def circle(self, center: Point, radius: float, color: Color, width: int = 0) -> None:
        """A circle of world ``radius``; ``width`` > 0 draws only the outline (pixels)."""
        self.pygame.draw.circle(
            self.surface, color, self.to_pixel(center), self.length(radius), width
        )

    def line(self, start: Point, end: Point, color: Color, width: int = 1) -> None:
        """A straight line, ``width`` in pixels."""
        self.pygame.draw.line(self.surface, color, self.to_pixel(start), self.to_pixel(end), width)

    def polygon(self, points: object, color: Color, width: int = 0) -> None:
        """A filled polygon (or its outline when ``width`` > 0)."""
        px = np.round(self.to_pixels(points)).astype(int).tolist()
        self.pygame.draw.polygon(self.surface, color, px, width)

    def box(
        self,
        center: Point,
        length: float,
        width: float,
        angle: float,
        color: Color,
        border: int = 0,
    ) -> np.ndarray:
        """A rectangle of world ``length`` x ``width`` rotated by ``angle`` radians; returns
        its four world corners (front-left, front-right, rear-right, rear-left)."""
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

    def arrow(self, start: Point, end: Point, color: Color, width: int = 2) -> None:
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

    # ---- text (pixel coordinates)
    def font(self, size: int) -> Any:
        """The default pygame font at ``size`` pixels (cached)."""
        font = self._fonts.get(size)
        if font is None:
            if not self.pygame.font.get_init():
                self.pygame.font.init()
            font = self._fonts[size] = self.pygame.font.Font(None, size)
        return font

    def text(
        self,
        text: str,
        pixel: tuple[int, int],
        color: Color = (20, 20, 20),
        size: int = 16,
        background: Color | None = None,
        padding: int = 2,
    ) -> tuple[int, int, int, int]:
        """Text with its top-left corner at a pixel position, on a filled box ``padding``
        pixels larger with ``background``; returns the drawn ``(left, top, width, height)``."""
        rendered = self.font(size).render(text, True, color)
        left, top = int(pixel[0]), int(pixel[1])
        w, h = rendered.get_size()
        box = (left, top, w, h)
        if background is not None:
            box = (left - padding, top - padding, w + 2 * padding, h + 2 * padding)
            self.pygame.draw.rect(self.surface, background, box)
        self.surface.blit(rendered, (left, top))
        return box

    def snapshot(self) -> object:
        """A copy of the surface, for :meth:`restore` (static scenery drawn once)."""
        return self.surface.copy()

    def restore(self, snapshot: object) -> None:
        """Replaces the surface's content with a :meth:`snapshot` (one blit)."""
        self.surface.blit(snapshot, (0, 0))

    # ---- output
    def rgb_array(self) -> np.ndarray:
        """The surface as a fresh, writable ``(height, width, 3)`` uint8 array."""
        return self._pixels.copy()

    def show(self, fps: int | None) -> None:
        """Shows the surface in the human window (:meth:`Window.show`; its events are
        ``canvas.window.events()``)."""
        self.window.show(self.surface, fps)

    def close(self) -> None:
        """Closes the human window, if one is open."""
        self.window.close()


def box_corners(center: Point, length: float, width: float, angle: float) -> np.ndarray:
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


def hud_line(step: int, reward: float | None, success: bool) -> str:
    """The heads-up text every env shows: step, last reward (``-`` before one), success."""
    shown = "-" if reward is None else f"{reward:.3g}"
    return f"step {step}   reward {shown}   success {'yes' if success else 'no'}"


def arrow_keys(
    up: tuple[float, float] = (0.0, 1.0), left: tuple[float, float] = (-1.0, 0.0)
) -> dict[tuple[int, ...], np.ndarray]:
    """Arrow keys to float32 2D actions, for ``gymnasium.utils.play``: up and left as given
    (by default along the key's axis), down and right their opposites, two keys their sum."""
    pg = import_pygame()
    ahead, side = np.array(up), np.array(left)
    directions = {pg.K_LEFT: side, pg.K_RIGHT: 0.0 - side, pg.K_UP: ahead, pg.K_DOWN: 0.0 - ahead}
    mapping: dict[tuple[int, ...], np.ndarray] = {
        (key,): direction.astype(np.float32) for key, direction in directions.items()
    }
    for vertical in (pg.K_UP, pg.K_DOWN):
        for horizontal in (pg.K_LEFT, pg.K_RIGHT):
            combined = (directions[vertical] + directions[horizontal]).astype(np.float32)
            mapping[tuple(sorted((vertical, horizontal)))] = combined
    return mapping


class CanvasRendering:
    """The rendering of row 0 of an env's state arrays (a twin's sub-env 0, a single env's
    one row) on the :class:`Canvas` made by ``_new_canvas()``: ``_draw_frame(canvas)``
    draws each frame, its heads-up text showing row 0's steps, reward (``_rewards``, None
    after its reset) and success. It declares what the twin and the single env give the
    hooks of their shared faces (the array helpers, the state names)."""

    _canvas: Canvas | None = None
    render_mode: str | None
    metadata: dict[str, Any]
    _frame_hud: Callable[[], str]
    elapsed_steps: Any
    _rewards: Any = None
    xp: Any
    zeros: Callable[..., Any]
    constant: Callable[..., Any]
    fresh: Callable[..., Any]
    float32: Callable[..., Any]
    to_numpy: Callable[..., np.ndarray]
    episode_state: tuple[str, ...] = ()
    zeroed_on_reset: tuple[str, ...] = ()

    def _new_canvas(self) -> Canvas:
        raise NotImplementedError

    def _draw_frame(self, canvas: Canvas) -> None:
        raise NotImplementedError

    def _get_canvas(self) -> Canvas:
        if self._canvas is None:
            self._canvas = self._new_canvas()
        return self._canvas

    def render(self) -> np.ndarray | None:
        """Draws the current frame: ``rgb_array`` returns it as an ``(H, W, 3)`` uint8 array,
        ``human`` shows it in the window; None without a render mode."""
        if self.render_mode is None:
            return None
        canvas = self._get_canvas()
        self._draw_frame(canvas)
        if self.render_mode == "human":
            canvas.show(self.metadata["render_fps"])
            return None
        return canvas.rgb_array()

    def _close_canvas(self) -> None:
        if self._canvas is not None:
            self._canvas.close()
            self._canvas = None

    def _rows(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        return tuple(self.to_numpy(a[0]) for a in arrays)

    def _episodes_started(self, index: Any) -> None:
        """Row 0's new episode shows no reward yet."""
        if self.render_mode is not None and 0 in index:
            self._rewards = None

    def _sub_env_hud(self, success: bool) -> str:
        """The heads-up text: row 0's step count, reward and ``success``."""
        reward = None if self._rewards is None else float(self._rewards[0])
        return hud_line(self._steps(), reward, success)

    def _steps(self) -> int:
        """Row 0's step count."""
        return int(self.elapsed_steps[0])

    def close_extras(self, **kwargs: object) -> None:
        """Releases the drawing surface."""
        self._canvas = None
