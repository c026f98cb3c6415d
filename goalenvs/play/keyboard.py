"""Keyboard play: keys (or clicks) to actions, and :func:`drive`, the loop that steps an
env with them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.envs.canvas import Window, import_pygame
from goalenvs.play.screen import (
    EpisodeStats,
    PlayError,
    Recorder,
    Screen,
    episode_cap,
    is_success,
    render_fps,
)

# Turn-based envs only change on input, so their window polls at least this often
# (BitFlipping's render_fps of 4 would make a key press wait up to 250 ms).
TURN_BASED_POLL_FPS = 30
RESET = "reset"  # the action a reset key sends


@dataclass
class Command:
    """What one frame's events ask for, in order: actions to step and :data:`RESET`
    marks (the R key), or quitting."""

    actions: list[object] = field(default_factory=list)
    quit: bool = False

    @property
    def reset(self) -> bool:
        """Whether the events asked for a reset."""
        return any(_is_reset(a) for a in self.actions)


def _is_reset(action: object) -> bool:
    return isinstance(action, str) and action == RESET


class KeyboardController:
    """Turns pygame events into actions of ``action_space`` by ``keys_to_action``
    (gymnasium.utils.play's format: key combinations of pygame codes or one-character
    strings) and ``action_at_pixel`` (a left click's ``(column, row) -> action | None``).
    ``turn_based`` steps once per press or click rather than every frame with the held
    keys; by default for non-Box spaces and envs with ``action_at_pixel``."""

    def __init__(
        self,
        action_space: spaces.Space,
        keys_to_action: Mapping[Any, Any],
        action_at_pixel: Callable[[int, int], Any] | None = None,
        turn_based: bool | None = None,
    ) -> None:
        self.pygame = import_pygame()
        pg = self.pygame
        self.action_space = action_space
        self.mapping = normalize_keys_to_action(keys_to_action)
        self.action_at_pixel = action_at_pixel
        if turn_based is None:
            turn_based = not isinstance(action_space, spaces.Box) or action_at_pixel is not None
        self.turn_based = turn_based
        self.relevant_keys = {key for combo in self.mapping for key in combo}
        self.reset_keys = {pg.K_BACKSPACE} | ({pg.K_r} - self.relevant_keys)
        self.quit_keys = {pg.K_ESCAPE}
        self.held: set[int] = set()
        self.noop: np.ndarray | None = None
        if isinstance(action_space, spaces.Box):
            self.noop = np.zeros(action_space.shape, dtype=action_space.dtype)

    def held_action(self) -> object:
        """The held keys' action: their combination's, else (Box) the clipped sum of each
        key's, else the no-op."""
        combo = tuple(sorted(self.held & self.relevant_keys))
        if not combo:
            return self.noop
        if combo in self.mapping:
            return self.mapping[combo]
        if isinstance(self.action_space, spaces.Box):
            parts = [self.mapping[(k,)] for k in combo if (k,) in self.mapping]
            if parts:
                total = np.sum(np.asarray(parts, dtype=np.float64), axis=0)
                total = np.clip(total, self.action_space.low, self.action_space.high)
                return total.astype(self.action_space.dtype)
        return self.noop

    def process(self, events: Iterable[Any]) -> Command:
        """One frame's events -> a :class:`Command`: turn-based, an action per mapped key
        press or click and a :data:`RESET` per reset key, in order; otherwise a
        :data:`RESET` if a reset key was pressed, then the held keys' action."""
        pg = self.pygame
        command = Command()
        for event in events:
            if event.type == pg.QUIT:
                command.quit = True
            elif event.type == pg.KEYDOWN:
                if event.key in self.quit_keys:
                    command.quit = True
                elif event.key in self.reset_keys:
                    command.actions.append(RESET)
                else:
                    self.held.add(event.key)
                    if self.turn_based and (event.key,) in self.mapping:
                        command.actions.append(self.mapping[(event.key,)])
            elif event.type == pg.KEYUP:
                self.held.discard(event.key)
            elif event.type == pg.WINDOWFOCUSLOST:
                # The key releases go to another window: do not keep driving.
                self.held.clear()
            elif (
                event.type == pg.MOUSEBUTTONDOWN
                and event.button == 1
                and self.turn_based
                and self.action_at_pixel is not None
            ):
                action = self.action_at_pixel(*event.pos)
                if action is not None:
                    command.actions.append(action)
        if not self.turn_based and not command.quit:
            resets = [RESET] if command.reset else []
            command.actions = [*resets, self.held_action()]
        return command

    def controls(self) -> str:
        """A one-line description of the keys, printed when play starts."""
        pg = self.pygame
        keys = ", ".join(dict.fromkeys(pg.key.name(c[0]) for c in self.mapping if len(c) == 1))
        how = "press to act" if self.turn_based else "hold to act"
        click = "; click to act" if self.action_at_pixel is not None else ""
        reset = "R or Backspace" if pg.K_r in self.reset_keys else "Backspace"
        return f"keys: {keys} ({how}){click}; {reset}: reset; Esc: quit"


def normalize_keys_to_action(keys_to_action: Mapping[Any, Any]) -> dict[tuple[int, ...], Any]:
    """gymnasium.utils.play's mapping with every combination as a sorted tuple of key codes."""
    if not isinstance(keys_to_action, Mapping) or not keys_to_action:
        raise TypeError(
            f"keys_to_action must be a non-empty dict of key combinations to actions, "
            f"got {keys_to_action!r}"
        )
    out: dict[tuple[int, ...], Any] = {}
    for combo, action in keys_to_action.items():
        keys = (combo,) if isinstance(combo, int) else tuple(combo)
        codes = []
        for key in keys:
            if isinstance(key, str) and len(key) == 1:
                codes.append(ord(key))
            elif isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                codes.append(int(key))
            else:
                raise TypeError(
                    f"keys_to_action key {combo!r}: expected pygame key codes or "
                    f"one-character strings, got {key!r}"
                )
        out[tuple(sorted(codes))] = action
    return out


def keyboard_controller(env: Any) -> KeyboardController:
    """The controller for ``env`` from its ``get_keys_to_action()`` and ``action_at_pixel``."""
    unwrapped = env.unwrapped
    get_keys = getattr(unwrapped, "get_keys_to_action", None)
    if get_keys is None:
        name = env.spec.id if env.spec is not None else type(unwrapped).__name__
        raise PlayError(
            f"{name} has no get_keys_to_action(), so it cannot be driven with the keyboard; "
            "watch a policy instead with --policy PATH"
        )
    return KeyboardController(
        env.action_space, get_keys(), action_at_pixel=getattr(unwrapped, "action_at_pixel", None)
    )


def drive(
    env: Any,
    controller: KeyboardController | None = None,
    *,
    episodes: int | None = None,
    frames: int | None = None,
    seed: int | None = None,
    window: Window | None = None,
    recorder: Recorder | None = None,
    fps: int | None = None,
    verbose: bool = True,
) -> EpisodeStats:
    """Keyboard play of an ``rgb_array`` env in a window until Esc, the window closes,
    ``episodes`` episodes finish or ``frames`` frames pass; returns their statistics.

    Each frame steps the env with the actions of the window's events, records each new
    frame and shows the latest at ``fps`` (default: ``render_fps``, at least
    ``TURN_BASED_POLL_FPS`` when turn-based). A ``window`` passed in stays open. An
    episode the env does not end stops at :func:`~goalenvs.play.screen.episode_cap`.
    """
    if env.render_mode != "rgb_array":
        raise PlayError(
            f"keyboard play shows rgb_array frames; make the env with render_mode='rgb_array' "
            f"(got {env.render_mode!r})"
        )
    controller = keyboard_controller(env) if controller is None else controller
    if fps is None:
        fps = render_fps(env, None)
        if controller.turn_based:
            fps = max(fps, TURN_BASED_POLL_FPS)
    screen = Screen(env, fps, window, True, recorder)
    stats = EpisodeStats()
    cap, why = episode_cap(env)
    try:
        env.reset(seed=seed)
        frame = screen.capture()
        # The first frame is on screen before any input is read or any step taken.
        running = screen.display(frame)
        episode_return, length, frame_count = 0.0, 0, 0
        while running and (frames is None or frame_count < frames):
            command = controller.process(screen.events())
            if command.quit:
                break
            for action in command.actions:
                if not _is_reset(action):
                    _, reward, terminated, truncated, info = env.step(action)
                    episode_return += float(reward)
                    length += 1
                    frame = screen.capture()
                    if not (terminated or truncated):
                        if length < cap:
                            continue
                        print(f"episode {stats.episodes + 1} stopped after {length} steps: {why}")
                    line = stats.add(episode_return, length, is_success(info))
                    if verbose:
                        print(line)
                    if episodes is not None and stats.episodes >= episodes:
                        break
                elif verbose and length:
                    print(f"reset by the player after {length} steps")
                env.reset()
                episode_return, length = 0.0, 0
                frame = screen.capture()
            if episodes is not None and stats.episodes >= episodes:
                break
            running = screen.display(frame)
            frame_count += 1
    finally:
        screen.close()
    if verbose:
        print(stats.summary())
    return stats
