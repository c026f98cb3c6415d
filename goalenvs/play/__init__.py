"""``goalenvs play``: drive an env with the keyboard, watch a saved policy, record either.

Command line::

    goalenvs play goalenvs/PointReach-v0                       # arrow keys accelerate
    goalenvs play goalenvs/BitFlipping-v0                      # number/letter keys or a click
    goalenvs play goalenvs/Parking-v0 --policy runs/x/policy_best.pt --record parking.gif
    goalenvs play runs/x/policy_best.pt --headless --episodes 100   # env id from the file

Keys come from the env's ``get_keys_to_action()`` (gymnasium.utils.play's format). Python:
:func:`watch` (a policy) and :func:`drive` (the keyboard) share :mod:`~goalenvs.play.screen`;
this module is the command line. Recordings hold one frame per reset and per step.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from goalenvs.core import command_name, parse_json_object
from goalenvs.play.keyboard import drive, keyboard_controller
from goalenvs.play.screen import PlayError, Recorder, render_fps
from goalenvs.play.watch import DEFAULT_WATCH_EPISODES, policy_function, watch
from goalenvs.train.cli import add_env_id, add_env_kwargs, add_max_episode_steps


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
    add_max_episode_steps(parser)
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
    policy_path, env_id = args.policy, args.env_id
    checkpoint = env_id is not None and (env_id.endswith(".pt") or os.path.isfile(env_id))
    if policy_path is None and checkpoint:
        env_id, policy_path = None, env_id
    for name in ("episodes", "fps", "max_episode_steps"):
        value = getattr(args, name)
        if value is not None and value < 1:
            flag = name.replace("_", "-")
            raise PlayError(f"--{flag} must be a positive integer, got {value}")
    try:
        env_kwargs = parse_json_object("--env-kwargs", args.env_kwargs)
    except ValueError as exc:
        raise PlayError(str(exc)) from None
    if policy_path is None and args.headless:
        raise PlayError("--headless needs --policy PATH: keyboard play needs a window")

    policy = None
    limit = args.max_episode_steps
    if policy_path is not None:
        policy = _load_policy(policy_path)
        if env_id is None:
            env_id = getattr(policy, "env_id", None)
            if not env_id:
                raise PlayError(f"{policy_path} does not name its env; pass ENV_ID")
        # The checkpoint's env arguments and time limit belong to its env; another id gets
        # only its own. Decided once here, before the spec is rewritten to a findable path.
        if env_id == getattr(policy, "env_id", None):
            if args.env_kwargs is None:
                env_kwargs = dict(getattr(policy, "env_kwargs", None) or {})
            if limit is None:
                limit = getattr(policy, "max_episode_steps", None)  # the run's time limit
            env_id = _find_env(env_id, getattr(policy, "env_file", None), policy_path)
    if env_id is None:
        raise PlayError("give an ENV_ID to drive, or --policy PATH to watch")
    if limit is not None:
        env_kwargs = {**env_kwargs, "max_episode_steps": limit}

    needs_frames = not args.headless or args.record is not None
    env = make_env(env_id, env_kwargs, "rgb_array" if needs_frames else None)
    recorder = None
    try:
        fps = render_fps(env, args.fps)
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
    except Exception as exc:
        from goalenvs import envspec

        line = envspec.rendering_error(exc)
        if line is None:
            raise
        raise PlayError(
            f"{env_id} could not draw a frame ({line}); --headless without --record watches "
            "without frames"
        ) from None
    finally:
        with warnings.catch_warnings():  # MuJoCo's viewer warns as it closes unopened GLFW
            warnings.simplefilter("ignore")
            env.close()
        if recorder is not None:
            count = recorder.close()
            if count:
                print(f"recorded {count} frames to {recorder.path}")
        pygame = sys.modules.get("pygame")
        if pygame is not None and pygame.display.get_init():
            pygame.display.quit()
    return 0


def _find_env(env_id: str, recorded: str | None, policy_path: str) -> str:
    """The spec that builds the policy's env from this folder: a ``path/to/file.py`` env
    whose relative path is not found here is taken from the file the run recorded."""
    from goalenvs import envspec

    try:
        return envspec.locate(env_id, recorded)
    except envspec.EnvSpecError as exc:
        name = env_id.rpartition(":")[2]
        raise PlayError(
            f"{exc}; give the env before --policy: {command_name()} play "
            f"path/to/{Path(recorded or env_id).name}:{name} --policy {shlex.quote(policy_path)}"
        ) from None


def make_env(env_id: str, env_kwargs: Mapping[str, Any], render_mode: str | None) -> Any:
    """``gym.make`` of any :mod:`goalenvs.envspec` form with ``render_mode`` (None: no such
    argument, so an env whose constructor takes none plays headless); a render mode the env
    lacks or an argument its constructor rejects is a :class:`PlayError` naming it."""
    import gymnasium as gym

    from goalenvs import envspec

    if "render_mode" in env_kwargs:
        raise PlayError(
            "--env-kwargs cannot set render_mode: goalenvs play chooses it (rgb_array for "
            "its window and --record, none with --headless)"
        )
    try:
        resolved = envspec.resolve(env_id)
    except envspec.EnvSpecError as exc:
        raise PlayError(str(exc)) from None
    modes = resolved.render_modes
    if render_mode is not None and modes is not None and render_mode not in modes:
        raise PlayError(
            f"{env_id} has no {render_mode!r} render mode (it offers {list(modes)}); "
            "goalenvs play needs rgb_array frames for its window and recordings; "
            "--policy PATH --headless watches a policy without them"
        )
    added: dict[str, object] = {} if render_mode is None else {"render_mode": render_mode}
    try:
        return gym.make(resolved.spec, **{**added, **env_kwargs})
    except (TypeError, ValueError) as exc:
        raise PlayError(_rejected(env_id, exc, added, env_kwargs)) from None
    except ImportError as exc:
        raise PlayError(f"building {env_id} failed: {envspec.describe_error(exc)}") from None


def _rejected(
    env_id: str, error: Exception, added: Mapping[str, object], env_kwargs: Mapping[str, object]
) -> str:
    """Why the constructor refused: the argument it rejected, named as who passed it."""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    # gymnasium appends "... was raised from the environment creator for ID with kwargs (...)"
    message = message.split(" was raised from the environment creator")[0]
    unexpected = re.search(r"unexpected keyword argument '(\w+)'", message)
    rejected = unexpected.group(1) if unexpected else ""
    if rejected in added:
        return (
            f"{env_id} takes no {rejected} argument, which goalenvs play passes to draw "
            f"frames ({rejected}={added[rejected]!r}): {message}; give its constructor a "
            "render_mode argument and metadata['render_modes'] with 'rgb_array', or watch "
            "a policy with --policy PATH --headless, which needs no frames"
        )
    if env_kwargs:
        return f"{env_id} rejected --env-kwargs {json.dumps(dict(env_kwargs))}: {message}"
    with_mode = "".join(f" with {name}={value!r}" for name, value in added.items())
    return f"building {env_id}{with_mode} failed: {message}"


def _load_policy(path: str) -> object:
    if not os.path.isfile(path):
        raise PlayError(f"--policy {path!r}: no such file")
    try:
        from goalenvs.train.checkpoint import CheckpointError
        from goalenvs.train.policy import load_policy
    except ImportError as exc:
        raise PlayError(
            f"watching a policy needs the trainer (goalenvs.train.policy and torch): {exc}; "
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
