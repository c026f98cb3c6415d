"""Watching a policy: :func:`watch`, the loop that steps an env with a policy's actions,
and :func:`policy_function`, which checks a saved policy against the env it is shown."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from goalenvs.envs.canvas import Window
from goalenvs.play.screen import (
    EpisodeStats,
    PlayError,
    Recorder,
    Screen,
    episode_cap,
    is_success,
    render_fps,
)

DEFAULT_WATCH_EPISODES = 10


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
    """Runs ``policy_fn`` (``obs -> action``) for ``episodes`` episodes, printing a line per
    episode and a summary, and returns the :class:`EpisodeStats`.

    An ``rgb_array`` env's frames are shown at ``fps`` (default its ``render_fps``; none
    with ``show=False``) and written to ``record`` (a ``.gif`` / ``.mp4`` path written on
    return, or a :class:`Recorder` the caller closes); Esc or closing the window stops
    early. An episode the env does not end stops at :func:`~goalenvs.play.screen.episode_cap`.
    """
    if isinstance(episodes, bool) or not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ValueError(f"episodes must be a positive integer, got {episodes!r}")
    fps = render_fps(env, fps)
    own_recorder = isinstance(record, (str, os.PathLike))
    recorder = Recorder(record, fps) if isinstance(record, (str, os.PathLike)) else record
    if recorder is not None and env.render_mode != "rgb_array":
        raise PlayError(
            f"recording needs the env made with render_mode='rgb_array', got {env.render_mode!r}"
        )
    screen = Screen(env, fps, window, show, recorder)
    stats = EpisodeStats()
    cap, why = episode_cap(env)
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
                if not done and length >= cap:
                    done = True
                    print(f"episode {stats.episodes + 1} stopped after {length} steps: {why}")
                frame = screen.capture()
                running = screen.display(frame) and not screen.quit_asked()
            if not done:
                break
            line = stats.add(episode_return, length, is_success(info))
            if verbose:
                print(line)
    finally:
        screen.close()
        if own_recorder and recorder is not None:
            recorder.close()
    if verbose:
        print(stats.summary())
    return stats


def policy_function(policy: Any, env: Any, path: str = "the policy") -> Callable[[Any], Any]:
    """``obs -> action`` from a loaded policy, after checking that it fits ``env`` (its
    spaces, where it has them, and one prediction on a reset observation)."""
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


def _as_space_action(action: object, space: spaces.Space) -> object:
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
