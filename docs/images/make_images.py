"""Regenerates the README's BitFlipping, PointReach, PointMaze and Push pictures.

    SDL_VIDEODRIVER=dummy python docs/images/make_images.py

Each env is seeded and driven by a small scripted controller: BitFlipping halfway to its
goal (the remaining mismatches marked), PointReach reaching three goals (a GIF with the
velocity arrow and the fading trail), PointMaze (U-maze) and Push a few steps after a
seeded reset. ``parking.png`` (a ParkingCrowded-v0 frame) was
committed with the Parking env and is not rewritten here.
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np
from PIL import Image

from goalenvs.play.watch import watch

HERE = Path(__file__).resolve().parent


def reach_controller(obs: dict[str, np.ndarray]) -> np.ndarray:
    """Proportional-derivative acceleration toward the goal."""
    position, velocity = obs["observation"][:2], obs["observation"][2:]
    return np.clip(4.0 * (obs["desired_goal"] - position) - 1.5 * velocity, -1, 1).astype(
        np.float32
    )


def push_controller(obs: dict[str, np.ndarray]) -> np.ndarray:
    """The pusher heads for the block (observation: pusher, its velocity, block, ...)."""
    pusher, velocity, block = (
        obs["observation"][:2],
        obs["observation"][2:4],
        obs["observation"][4:6],
    )
    return np.clip(4.0 * (block - pusher) - 1.5 * velocity, -1, 1).astype(np.float32)


def save_png(frame: np.ndarray, name: str) -> None:
    Image.fromarray(frame).save(HERE / name, optimize=True)


def main() -> None:
    env = gym.make("goalenvs/BitFlipping-v0", render_mode="rgb_array", n_bits=12)
    obs, _ = env.reset(seed=4)
    wrong = np.flatnonzero(obs["achieved_goal"] != obs["desired_goal"])
    for bit in wrong[: len(wrong) // 2]:
        env.step(int(bit))
    save_png(env.render(), "bit_flipping.png")

    watch(
        gym.make("goalenvs/PointReach-v0", render_mode="rgb_array"),
        reach_controller,
        episodes=3,
        seed=0,
        show=False,
        record=HERE / "point_reach.gif",
        fps=20,
        verbose=False,
    )

    for env_id, controller, name in (
        ("goalenvs/PointMaze-v0", reach_controller, "point_maze.png"),
        ("goalenvs/Push-v0", push_controller, "push.png"),
    ):
        env = gym.make(env_id, render_mode="rgb_array")
        obs, _ = env.reset(seed=1)
        for _ in range(8):
            obs, *_ = env.step(controller(obs))
        save_png(env.render(), name)
        env.close()

    for path in sorted(HERE.glob("*.*")):
        if path.suffix in (".png", ".gif"):
            print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
