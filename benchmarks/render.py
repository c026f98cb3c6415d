"""Frames per second of rgb_array rendering for every registered goalenvs env.

For each env at its default size: ``step + render`` (what recording a video of training
costs per frame) and ``render`` alone, next to a peer measured in the same run:
highway-env's ``parking-v0`` for the Parking envs (the same task, the usual choice), and
gymnasium's pygame-drawn ``CartPole-v1`` for the others. The issue's target: Parking
step + render >= 500 frames/s.

    SDL_VIDEODRIVER=dummy python benchmarks/render.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym

import goalenvs

PARKING_TARGET_FPS = 500


def best_rate(work: Callable[[], None], seconds: float, windows: int = 5) -> float:
    """Calls per second of ``work``: the best of ``windows`` equal timing windows.

    The best window is the least disturbed by other processes on a shared machine.
    """
    best = 0.0
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds / windows:
            work()
            calls += 1
        best = max(best, calls / (time.perf_counter() - start))
    return best


def measure(make: Callable[[], Any], seconds: float) -> tuple[float, float, tuple[int, ...]]:
    """(step+render frames/s, render-only frames/s, frame shape) of one env."""
    env = make()
    env.action_space.seed(0)
    env.reset(seed=0)
    frame = env.render()
    for _ in range(5):  # warm up fonts, caches and the first episode
        env.step(env.action_space.sample())
        env.render()

    def step_and_render() -> None:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        env.render()
        if terminated or truncated:
            env.reset()

    step_render = best_rate(step_and_render, seconds)
    render_only = best_rate(env.render, seconds / 2)
    env.close()
    return step_render, render_only, tuple(frame.shape)


def make_peer(name: str) -> Callable[[], Any] | None:
    """A maker for the peer env, or None when it is not installed."""
    if name == "highway-env parking-v0":
        try:
            import highway_env
        except ImportError:
            return None
        gym.register_envs(highway_env)
        return lambda: gym.make("parking-v0", render_mode="rgb_array")
    return lambda: gym.make("CartPole-v1", render_mode="rgb_array")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per env")
    args = parser.parse_args()

    peers: dict[str, tuple[float, float, tuple[int, ...]] | None] = {}
    for name in ("highway-env parking-v0", "gymnasium CartPole-v1"):
        maker = make_peer(name)
        peers[name] = None if maker is None else measure(maker, args.seconds)

    header = (
        f"{'env':<34} {'frame HxW':>10} {'step+render/s':>14} {'render/s':>9}  "
        f"{'peer':<24} {'peer step+render/s':>18} {'ratio':>6}"
    )
    print(header)
    print("-" * len(header))
    parking_ok = []
    for env_id in goalenvs.ENV_IDS:
        peer = "highway-env parking-v0" if "Parking" in env_id else "gymnasium CartPole-v1"
        try:
            step_render, render_only, shape = measure(
                lambda env_id=env_id: gym.make(env_id, render_mode="rgb_array"), args.seconds
            )
        except (ImportError, AttributeError, gym.error.Error) as exc:
            print(f"{env_id:<34} not available: {type(exc).__name__}: {exc}")
            continue
        if "Parking" in env_id:
            parking_ok.append(step_render >= PARKING_TARGET_FPS)
        peer_result = peers[peer]
        peer_fps = f"{peer_result[0]:>18.0f}" if peer_result else f"{'not installed':>18}"
        ratio = f"{step_render / peer_result[0]:>5.1f}x" if peer_result else f"{'-':>6}"
        size = f"{shape[0]}x{shape[1]}"
        print(
            f"{env_id:<34} {size:>10} {step_render:>14.0f} {render_only:>9.0f}  "
            f"{peer:<24} {peer_fps} {ratio}"
        )
    for name, result in peers.items():
        if result is not None:
            size = f"{result[2][0]}x{result[2][1]}"
            print(f"{'(peer) ' + name:<34} {size:>10} {result[0]:>14.0f} {result[1]:>9.0f}")
    if parking_ok:
        verdict = "met" if all(parking_ok) else "NOT met"
        print(f"\nParking step+render >= {PARKING_TARGET_FPS} frames/s: {verdict}")


if __name__ == "__main__":
    main()
