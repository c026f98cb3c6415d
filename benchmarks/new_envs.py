"""Throughput of PointMaze and Push: the single env, the native twin at 1024 envs, and the peer.

Prints steps per second (one step of one sub-env counts as one) for:

- ``single``: one env (the unwrapped class) stepped in a Python loop, reset when done;
- ``twin x1024``: the id's native vector twin (``gym.make_vec``) at 1024 envs;
- the peer, gymnasium-robotics' MuJoCo ``PointMaze_UMaze-v3`` (unwrapped, one env),
  measured in the same run when gymnasium-robotics and mujoco import;

and the ratios against the peer, with their targets: the twin at 1024 envs
>= 1e6 steps/s for PointMaze and >= 3e5 for Push. Actions are drawn before timing.
Time is the process's CPU time (a shared machine's wall clock also counts other
processes), and each figure is the best of several interleaved rounds.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)

TWIN_ENVS = 1024
ROUNDS = 5
MIN_SECONDS = 0.2  # CPU seconds per measurement
TARGETS = {"goalenvs/PointMaze-v0": 1e6, "goalenvs/Push-v0": 3e5}


def _rate(run: Callable[[int], int]) -> float:
    """Steps per CPU second of ``run(n)`` (which returns the steps it took), grown to last."""
    n = 16
    while True:
        start = time.process_time()
        steps = run(n)
        spent = time.process_time() - start
        if spent >= MIN_SECONDS:
            return steps / spent
        n *= 2


def single_runner(make: Callable[[], gym.Env], seed: int = 0) -> Callable[[int], int]:
    """Steps one unwrapped env ``n`` times with pre-drawn actions, resetting when done."""
    env = make()
    env.reset(seed=seed)
    env.action_space.seed(seed)
    actions = [env.action_space.sample() for _ in range(4096)]
    limit = 100

    def run(n: int) -> int:
        elapsed = 0
        for t in range(n):
            _, _, terminated, truncated, _ = env.step(actions[t % len(actions)])
            elapsed += 1
            if terminated or truncated or elapsed >= limit:
                env.reset()
                elapsed = 0
        return n

    return run


def twin_runner(env_id: str, num_envs: int, seed: int = 0) -> Callable[[int], int]:
    """Steps the native twin ``n`` times with pre-drawn batched actions."""
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    envs.reset(seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1, 1, (64, num_envs, 2)).astype(np.float32)

    def run(n: int) -> int:
        for t in range(n):
            envs.step(actions[t % len(actions)])
        return n * num_envs

    return run


def _peer() -> Callable[[], gym.Env] | None:
    try:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
        gym.make("PointMaze_UMaze-v3").close()
    except Exception as error:  # any import or build failure: no peer
        print(f"peer PointMaze_UMaze-v3 unavailable: {type(error).__name__}: {error}")
        return None
    return lambda: gym.make("PointMaze_UMaze-v3").unwrapped


def main() -> None:
    """Measures every row in interleaved rounds and prints the table and the verdicts."""
    runners: dict[str, Callable[[int], int]] = {}
    for env_id in TARGETS:
        runners[f"{env_id} single"] = single_runner(lambda e=env_id: gym.make(e).unwrapped)
        runners[f"{env_id} twin x{TWIN_ENVS}"] = twin_runner(env_id, TWIN_ENVS)
    peer = _peer()
    if peer is not None:
        runners["PointMaze_UMaze-v3 (mujoco) single"] = single_runner(peer)
    best = dict.fromkeys(runners, 0.0)
    for _ in range(ROUNDS):
        for name, run in runners.items():
            best[name] = max(best[name], _rate(run))
    peer_rate = best.get("PointMaze_UMaze-v3 (mujoco) single")
    print(f"{'case':<42} {'steps/s':>12} {'vs mujoco peer':>15}")
    for name, rate in best.items():
        ratio = "-" if peer_rate is None else f"{rate / peer_rate:.1f}x"
        print(f"{name:<42} {rate:>12,.0f} {ratio:>15}")
    for env_id, target in TARGETS.items():
        rate = best[f"{env_id} twin x{TWIN_ENVS}"]
        verdict = "met" if rate >= target else "MISSED"
        print(f"target {env_id} twin x{TWIN_ENVS} >= {target:,.0f} steps/s: {verdict}")


if __name__ == "__main__":
    main()
