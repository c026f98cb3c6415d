"""goalenvs Parking against highway-env's parking-v0, measured side by side in one run.

Rows: single-env steps/s through ``gym.make`` (wrappers included), the native vector twin
at 1024 envs (against highway-env's single env, which has no vector form), and
``rgb_array`` step + render; then the twin against gymnasium's SyncVectorEnv of the same
env at 256 envs. Both envs take the same pre-drawn random actions and reset
when an episode ends. highway-env renders all-black frames headless (SDL dummy driver);
it is timed anyway and the table says so.

Rates are steps per second of this process's CPU time (``time.process_time``; both envs
are single-threaded): on a shared machine, wall-clock rates fall with other processes'
load, CPU-time rates do not, and on an idle machine the two agree.

Run: ``python benchmarks/parking_vs_highway.py`` (about 20 s of CPU time; longer in wall
time on a busy machine).
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401

VECTOR_ENVS = 1024
SYNC_ENVS = 256


def rate(step: Callable[[], int], seconds: float, min_calls: int = 3) -> float:
    """Steps per CPU second of ``step`` (which returns how many env steps it made), best of 3."""
    best = 0.0
    for _ in range(3):
        calls = steps = 0
        start = time.process_time()
        while True:
            steps += step()
            calls += 1
            elapsed = time.process_time() - start
            if elapsed >= seconds / 3 and calls >= min_calls:
                break
        best = max(best, steps / elapsed)
    return best


def single_stepper(env: gym.Env, render: bool = False) -> tuple[Callable[[], int], list]:
    """A closure that steps ``env`` once with the next pre-drawn action (and renders)."""
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-1, 1, (4096, 2)).astype(np.float32)
    frames: list = []
    counter = [0]

    def step() -> int:
        i = counter[0] = (counter[0] + 1) % len(actions)
        _, _, terminated, truncated, _ = env.step(actions[i])
        if render:
            frame = env.render()
            if i == 1:
                frames.append(frame)
        if terminated or truncated:
            env.reset()
        return 1

    return step, frames


def main() -> None:
    warnings.filterwarnings("ignore")
    import highway_env  # noqa: F401

    rows = []

    ours = gym.make("goalenvs/Parking-v0")
    peer = gym.make("parking-v0")
    step, _ = single_stepper(ours)
    ours_single = rate(step, 2.0)
    step, _ = single_stepper(peer)
    peer_single = rate(step, 4.0)
    rows.append(("single env, steps/s", ours_single, peer_single, 100.0))

    crowded = gym.make("goalenvs/ParkingCrowded-v0")
    step, _ = single_stepper(crowded)
    rows.append(("single env, 20 parked cars, steps/s", rate(step, 2.0), peer_single, 100.0))

    for env_id, label in (
        ("goalenvs/Parking-v0", f"vector twin, {VECTOR_ENVS} envs, steps/s"),
        ("goalenvs/ParkingCrowded-v0", f"vector twin, {VECTOR_ENVS} envs, 20 parked, steps/s"),
    ):
        vec = gym.make_vec(env_id, num_envs=VECTOR_ENVS)
        vec.reset(seed=0)
        batch = np.random.default_rng(0).uniform(-1, 1, (16, VECTOR_ENVS, 2)).astype(np.float32)
        counter = [0]

        def vstep(vec=vec, batch=batch, counter=counter) -> int:
            counter[0] = (counter[0] + 1) % len(batch)
            vec.step(batch[counter[0]])
            return VECTOR_ENVS

        rows.append(
            (label, rate(vstep, 2.0), peer_single, "1e6" if "parked" not in label else None)
        )

    # The twin against gymnasium's SyncVectorEnv of the same env, at 256 envs (the
    # twin's target: >= 50x).
    sync_rows = []
    for env_id in ("goalenvs/Parking-v0", "goalenvs/ParkingCrowded-v0"):
        rates = []
        for mode in ("vector_entry_point", "sync"):
            vec = gym.make_vec(env_id, num_envs=SYNC_ENVS, vectorization_mode=mode)
            vec.reset(seed=0)
            batch = np.random.default_rng(0).uniform(-1, 1, (16, SYNC_ENVS, 2)).astype(np.float32)
            counter = [0]

            def vstep(vec=vec, batch=batch, counter=counter) -> int:
                counter[0] = (counter[0] + 1) % len(batch)
                vec.step(batch[counter[0]])
                return SYNC_ENVS

            rates.append(rate(vstep, 2.0))
        sync_rows.append((env_id, *rates))

    ours_rgb = gym.make("goalenvs/Parking-v0", render_mode="rgb_array")
    peer_rgb = gym.make("parking-v0", render_mode="rgb_array")
    step, ours_frames = single_stepper(ours_rgb, render=True)
    ours_render = rate(step, 2.0)
    step, peer_frames = single_stepper(peer_rgb, render=True)
    peer_render = rate(step, 4.0)
    rows.append(("rgb_array step + render, steps/s", ours_render, peer_render, 10.0))

    print(f"{'measurement':<44} {'goalenvs':>12} {'highway-env':>12} {'ratio':>9} {'target':>8}")
    for label, mine, theirs, target in rows:
        ratio = mine / theirs
        if target is None:
            target_text = "-"
        elif target == "1e6":
            target_text = f">=1e6/s {'met' if mine >= 1_000_000 else 'MISSED'}"
        else:
            target_text = f">={target:g}x {'met' if ratio >= target else 'MISSED'}"
        print(f"{label:<44} {mine:>12,.0f} {theirs:>12,.0f} {ratio:>8,.0f}x {target_text:>8}")
    peer_black = all(int(np.max(f)) == 0 for f in peer_frames)
    ours_black = all(int(np.max(f)) == 0 for f in ours_frames)
    print(
        f"frames: goalenvs {ours_frames[0].shape} all-black={ours_black}; "
        f"highway-env {peer_frames[0].shape} all-black={peer_black}"
        + (" (headless highway-env draws nothing, timed anyway)" if peer_black else "")
    )
    print("vector rows compare with highway-env's single env, which has no vector form")
    print(f"\n{'twin vs SyncVectorEnv, ' + str(SYNC_ENVS) + ' envs':<44} {'twin':>12} {'sync':>12}")
    for env_id, native, sync in sync_rows:
        verdict = "met" if native / sync >= 50 else "MISSED"
        print(
            f"{env_id:<44} {native:>12,.0f} {sync:>12,.0f} {native / sync:>8,.0f}x >=50x {verdict}"
        )
    print(f"steps per CPU second; load average during the run: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
