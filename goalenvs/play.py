"""``goalenvs play``: drive an env with the keyboard, watch a saved policy, record either.

Command line::

    goalenvs play goalenvs/PointReach-v0                       # arrow keys accelerate
    goalenvs play goalenvs/BitFlipping-v0                      # number/letter keys or a click
    goalenvs play goalenvs/Parking-v0 --policy runs/x/policy_best.pt --record parking.gif
    goalenvs play runs/x/policy_best.pt --headless --episodes 100   # env id from the file

Keyboard: the env's ``get_keys_to_action()`` (gymnasium.utils.play's format) maps keys to
actions. Envs with continuous actions step every frame with the action of the keys held
(no key: the zero action); envs with discrete actions, and envs that offer
``action_at_pixel(column, row)`` (the action a click there sends, or None), step once per
key press or mouse click. R (or Backspace)
resets, Esc or closing the window quits.

Python::

    from goalenvs.play import watch
    stats = watch(gym.make("goalenvs/PointReach-v0", render_mode="rgb_array"),
                  lambda obs: policy(obs), episodes=10, record="reach.gif")
    stats.success_rate, stats.mean_return, stats.lengths

Recordings hold one frame per reset and one per step. ``.gif`` needs Pillow; ``.mp4``
needs imageio with imageio-ffmpeg. A GIF stores consecutive identical frames once (with
their durations summed), as every GIF encoder does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.core import parse_json_object
from goalenvs.envs.canvas import Window, import_pygame
from goalenvs.train.cli import add_env_id, add_env_kwargs

RECORD_FORMATS = (".gif", ".mp4")
DEFAULT_WATCH_EPISODES = 10
# Turn-based envs only change on input, so their window polls at least this often
# (BitFlipping's render_fps of 4 would make a key press wait up to 250 ms).
TURN_BASED_POLL_FPS = 30


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


# --------------------------------------------------------------------------- keyboard


RESET = "reset"


@dataclass
class Command:
    """What one frame's events ask for, in order: actions to step and :data:`RESET`
    marks (the R key), or quitting."""

    actions: list[Any] = field(default_factory=list)
    quit: bool = False

    @property
    def reset(self) -> bool:
        """Whether the events asked for a reset."""
        return any(_is_reset(a) for a in self.actions)


def _is_reset(action: Any) -> bool:
    return isinstance(action, str) and action == RESET


class KeyboardController:
    """Turns pygame events into env actions, following gymnasium.utils.play's key format.

    Args:
        action_space: the env's action space.
        keys_to_action: ``{key combination: action}``; a combination is a tuple of pygame
            key codes or one-character strings, or a string of characters.
        action_at_pixel: optional ``(column, row) -> action | None``: a left click on
            the frame sends the action it returns (None: the click does nothing).
        turn_based: step once per key press / click (True) or every frame with the held
            keys' action (False). Default: turn-based for non-Box action spaces and for
            envs with ``action_at_pixel``.
    """

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
        if isinstance(action_space, spaces.Box):
            self.noop = np.zeros(action_space.shape, dtype=action_space.dtype)
        else:
            self.noop = None

    def held_action(self) -> Any:
        """The action of the keys held now: their combination's entry if the mapping has
        one, else (Box spaces) the clipped sum of each held key's own action, else noop."""
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
        """One frame's events -> a :class:`Command`.

        Turn-based: one action per mapped key press or bit click, and a :data:`RESET`
        per reset key, in order. Otherwise: a :data:`RESET` if a reset key was pressed,
        then exactly one action, that of the keys held after these events.
        """
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
        names = []
        for combo in self.mapping:
            if len(combo) == 1:
                names.append(pg.key.name(combo[0]))
        keys = ", ".join(dict.fromkeys(names))
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


# --------------------------------------------------------------------------- loops


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
    """Keyboard play of an ``rgb_array`` env in a window, until Esc, the window closes,
    ``episodes`` episodes finish or ``frames`` window frames pass.

    Each frame reads the window's events (events posted with ``pygame.event.post`` count),
    steps the env with the controller's actions, records every new frame, and shows the
    latest one at ``fps`` (default: the env's ``render_fps``, at least
    ``TURN_BASED_POLL_FPS`` for turn-based envs). A window made here is
    closed on return; a ``window`` passed in stays open. Returns the finished episodes'
    statistics.
    """
    if env.render_mode != "rgb_array":
        raise PlayError(
            f"keyboard play shows rgb_array frames; make the env with render_mode='rgb_array' "
            f"(got {env.render_mode!r})"
        )
    controller = keyboard_controller(env) if controller is None else controller
    if fps is None:
        fps = _render_fps(env, None)
        if controller.turn_based:
            fps = max(fps, TURN_BASED_POLL_FPS)
    screen = _Screen(env, fps, window, True, recorder)
    stats = EpisodeStats()
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
                        continue
                    line = stats.add(episode_return, length, _success(info))
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


def watch(
    env: Any,
    policy_fn: Callable[[Any], Any],
    episodes: int = DEFAULT_WATCH_EPISODES,
    *,
    seed: int | None = None,
    show: bool = True,
    record: str | os.PathLike[str] | Recorder | None = None,
    fps: int | None = None,
    window: Window | None = None,
    verbose: bool = True,
) -> EpisodeStats:
    """Runs ``policy_fn`` (any callable ``obs -> action``) for ``episodes`` episodes.

    Prints one line per episode and a summary (success rate, mean return, episode
    lengths), as stable-baselines' play script did, and returns the
    :class:`EpisodeStats`. With an ``rgb_array`` env, frames are shown in a window at
    ``fps`` (default the env's ``render_fps``; ``show=False`` for none) and written to
    ``record`` (a ``.gif`` / ``.mp4`` path, written on return, or a :class:`Recorder`
    the caller closes). Esc or closing the window stops early; the statistics then cover
    the finished episodes. An env in ``human`` mode draws its own window.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
    fps = _render_fps(env, fps)
    own_recorder = isinstance(record, (str, os.PathLike))
    recorder = Recorder(record, fps) if own_recorder else record
    if recorder is not None and env.render_mode != "rgb_array":
        raise PlayError(
            f"recording needs the env made with render_mode='rgb_array', got {env.render_mode!r}"
        )
    screen = _Screen(env, fps, window, show, recorder)
    stats = EpisodeStats()
    try:
        for episode in range(int(episodes)):
            obs, info = env.reset(seed=seed if episode == 0 else None)
            episode_return, length, done = 0.0, 0, False
            frame = screen.capture()
            running = screen.display(frame)
            while running and not done:
                obs, reward, terminated, truncated, info = env.step(policy_fn(obs))
                episode_return += float(reward)
                length += 1
                done = bool(terminated or truncated)
                frame = screen.capture()
                running = screen.display(frame) and not screen.quit_asked()
            if not done:
                break
            line = stats.add(episode_return, length, _success(info))
            if verbose:
                print(line)
    finally:
        screen.close()
        if own_recorder and recorder is not None:
            recorder.close()
    if verbose:
        print(stats.summary())
    return stats


def _title(env: Any) -> str:
    return f"goalenvs play: {env.spec.id}" if env.spec is not None else "goalenvs play"


# --------------------------------------------------------------------------- command line


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs play``."""
    add_env_id(
        parser,
        "the env",
        " (optional with --policy: the checkpoint names its env; a checkpoint path here is "
        "taken as --policy)",
    )
    parser.add_argument("--policy", metavar="PATH", help="watch this saved policy (a .pt file)")
    parser.add_argument(
        "--episodes",
        type=int,
        metavar="N",
        help=f"episodes to run (default: {DEFAULT_WATCH_EPISODES} when watching a policy; "
        "keyboard play runs until Esc)",
    )
    parser.add_argument(
        "--record", metavar="OUT", help="write the frames to OUT.gif or OUT.mp4 (needs an encoder)"
    )
    parser.add_argument(
        "--headless", action="store_true", help="no window (watch a policy; pair with --record)"
    )
    parser.add_argument("--seed", type=int, help="seed of the first reset")
    add_env_kwargs(parser, '{"n_bits": 8}')
    parser.add_argument(
        "--fps", type=int, metavar="N", help="frames per second (default: the env's render_fps)"
    )


def run(args: argparse.Namespace) -> int:
    """``goalenvs play``: returns 0, or 2 after printing one error line for bad input."""
    try:
        return _run(args)
    except PlayError as exc:
        print(f"goalenvs play: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace) -> int:
    policy_path = args.policy
    env_id = args.env_id
    if env_id is not None and policy_path is None and _looks_like_checkpoint(env_id):
        env_id, policy_path = None, env_id
    for name in ("episodes", "fps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise PlayError(f"--{name} must be a positive integer, got {value}")
    env_kwargs = _parse_env_kwargs(args.env_kwargs)
    if policy_path is None and args.headless:
        raise PlayError("--headless needs --policy PATH: keyboard play needs a window")

    policy = None
    if policy_path is not None:
        policy = _load_policy(policy_path)
        if env_id is None:
            env_id = getattr(policy, "env_id", None)
            if not env_id:
                raise PlayError(f"{policy_path} does not name its env; pass ENV_ID")
        # The checkpoint's env arguments belong to its env; another id gets only its own.
        if args.env_kwargs is None and env_id == getattr(policy, "env_id", None):
            env_kwargs = dict(getattr(policy, "env_kwargs", None) or {})
    if env_id is None:
        raise PlayError("give an ENV_ID to drive, or --policy PATH to watch")

    needs_frames = not args.headless or args.record is not None
    env = make_env(env_id, env_kwargs, "rgb_array" if needs_frames else None)
    recorder = None
    try:
        fps = _render_fps(env, args.fps)
        if args.record is not None:
            recorder = Recorder(args.record, fps)
        if policy is None:
            controller = keyboard_controller(env)
            print(controller.controls())
            drive(
                env,
                controller,
                episodes=args.episodes,
                seed=args.seed,
                recorder=recorder,
                fps=args.fps,
            )
        else:
            policy_fn = policy_function(policy, env, policy_path)
            watch(
                env,
                policy_fn,
                episodes=args.episodes or DEFAULT_WATCH_EPISODES,
                seed=args.seed,
                show=not args.headless,
                record=recorder,
                fps=fps,
            )
    finally:
        env.close()
        if recorder is not None:
            count = recorder.close()
            if count:
                print(f"recorded {count} frames to {recorder.path}")
        _close_display()
    return 0


def _close_display() -> None:
    if "pygame" in sys.modules and sys.modules["pygame"].display.get_init():
        sys.modules["pygame"].display.quit()


def _looks_like_checkpoint(text: str) -> bool:
    return text.endswith(".pt") or os.path.isfile(text)


def _parse_env_kwargs(text: str | None) -> dict[str, Any]:
    try:
        return parse_json_object("--env-kwargs", text)
    except ValueError as exc:
        raise PlayError(str(exc)) from None


def make_env(env_id: str, env_kwargs: Mapping[str, Any], render_mode: str | None) -> Any:
    """``gym.make`` with play's checks: a known env (any :mod:`goalenvs.envspec` form), the
    needed render mode, valid kwargs."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    from goalenvs import envspec

    try:
        spec = envspec.env_spec(env_id)
    except envspec.EnvSpecError as exc:
        raise PlayError(str(exc)) from None
    creator = spec.entry_point
    if isinstance(creator, str):
        try:
            creator = load_env_creator(creator)
        except (ImportError, AttributeError) as exc:
            raise PlayError(f"env id {env_id!r} cannot be loaded: {exc}") from None
    modes = getattr(creator, "metadata", {}).get("render_modes") if creator else None
    if render_mode is not None and modes is not None and render_mode not in modes:
        raise PlayError(
            f"{env_id} has no {render_mode!r} render mode (it offers {list(modes)}); "
            "goalenvs play needs rgb_array frames for its window and recordings "
            "(--headless without --record needs none)"
        )
    try:
        return gym.make(spec, render_mode=render_mode, **env_kwargs)
    except (TypeError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PlayError(
            f"{env_id} rejected --env-kwargs {json.dumps(dict(env_kwargs))}: {message}"
        ) from None


def _load_policy(path: str) -> Any:
    if not os.path.isfile(path):
        raise PlayError(f"--policy {path!r}: no such file")
    try:
        from goalenvs.train.checkpoint import CheckpointError
        from goalenvs.train.policy import load_policy
    except ImportError as exc:
        raise PlayError(
            f"watching a policy needs the trainer (goalenvs.her.load_policy and torch): {exc}; "
            'install it with pip install "goalenvs[train]"'
        ) from None
    import torch

    # One observation at a time through a small network: extra threads only add overhead.
    torch.set_num_threads(1)
    try:
        return load_policy(path)
    except CheckpointError as exc:
        where = "--policy" if path in str(exc) else f"--policy {path!r}"
        raise PlayError(f"{where}: {exc}") from None


def policy_function(policy: Any, env: Any, path: str = "the policy") -> Callable[[Any], Any]:
    """``obs -> action`` from a loaded policy, after checking that it fits ``env``.

    Compares the policy's spaces with the env's when the policy has them, then tries one
    prediction on a reset observation: a policy trained on other spaces fails here with
    one clear message instead of deep inside the loop.
    """
    env_name = env.spec.id if env.spec is not None else type(env.unwrapped).__name__
    trained_on = getattr(policy, "env_id", None) or "another env"
    if getattr(policy, "env_kwargs", None):
        trained_on += f" (env kwargs {json.dumps(policy.env_kwargs)})"
    for attribute, env_space in (
        ("observation_space", env.observation_space),
        ("action_space", env.action_space),
    ):
        policy_space = getattr(policy, attribute, None)
        if policy_space is None:
            continue
        difference = _space_difference(policy_space, env_space, attribute)
        if difference is not None:
            name, in_policy, in_env = difference
            raise PlayError(
                f"policy {path} does not match {env_name}: it was trained on {trained_on}, "
                f"whose {name} is {in_policy}; this env's is {in_env}"
            )

    def policy_fn(obs: Any) -> Any:
        out = policy.predict(obs, deterministic=True)
        # stable-baselines' predict returns (action, state); ours may return the action alone.
        return out[0] if isinstance(out, tuple) else out

    obs, _ = env.reset()
    try:
        action = policy_fn(obs)
    except (ValueError, RuntimeError, KeyError, IndexError, TypeError) as exc:
        raise PlayError(
            f"policy {path} does not match {env_name} (trained on {trained_on}): "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if np.shape(action) != env.action_space.shape or not env.action_space.contains(
        _as_space_action(action, env.action_space)
    ):
        raise PlayError(
            f"policy {path} does not match {env_name} (trained on {trained_on}): it returned "
            f"an action of shape {np.shape(action)}, the env expects {env.action_space}"
        )
    return policy_fn


def _as_space_action(action: Any, space: spaces.Space) -> Any:
    if isinstance(space, spaces.Box):
        return np.clip(np.asarray(action, dtype=space.dtype), space.low, space.high)
    if isinstance(space, spaces.Discrete):
        return np.int64(np.asarray(action).reshape(()))
    return action


def _space_difference(a: Any, b: Any, name: str) -> tuple[str, Any, Any] | None:
    """The first place where two spaces differ in kind or shape: (where, a's, b's)."""
    if isinstance(a, spaces.Dict) and isinstance(b, spaces.Dict):
        if a.keys() != b.keys():
            return f"{name} keys", sorted(a.keys()), sorted(b.keys())
        for key in a:
            found = _space_difference(a[key], b[key], f"{name}[{key!r}]")
            if found is not None:
                return found
        return None
    same = (
        type(a) is type(b)
        and a.shape == b.shape
        and (not isinstance(a, spaces.Discrete) or a.n == b.n)
    )
    return None if same else (name, a, b)
