"""HER replay buffer: goalenvs beside stable-baselines3, same data, same run.

Fetch-like sizes (observation 25, goal 3, action 4, episodes of 50 steps, truncated by
the time limit), a buffer of 1e6 transitions filled completely, for 1 and 8 envs. Each
buffer is built and filled in its own subprocess, so that its resident memory can be
measured as the growth of the process's RSS (VmRSS) from before construction to after
the fill: everything the buffer keeps alive, Python objects included.

Printed per buffer: add time per env step (one add() call of n_envs transitions), sample
time at batch 256 and 2048 (best of 7 runs of many calls; both as torch CPU tensors, which
is what stable-baselines3 returns), and RSS growth. Times are the process's CPU time: on a
machine shared with other jobs, wall time also counts the time a process waits for a
core, which differs between the two buffers' runs; everything timed is single-threaded,
so on an idle machine the two agree. The "floor" is a plain numpy gather of the same
bytes: uniform random rows, then one fancy-index per stored array (obs/next obs rows,
action, reward, done), with no relabeling and no bookkeeping.

Run: python benchmarks/her_buffer.py   (about 2-3 minutes; the numbers are noisy on a
shared machine: compare the ratios, measured in the same run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

OBS, GOAL, ACTION, EPISODE = 25, 3, 4, 50
TRANSITIONS = 1_000_000
BATCHES = (256, 2048)


def rss_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def fetch_like_env():
    """A stand-in goal env of Fetch's sizes: only its spaces and compute_reward are used."""
    import gymnasium as gym
    from gymnasium import spaces

    class FetchLike(gym.Env):
        observation_space = spaces.Dict(
            observation=spaces.Box(-np.inf, np.inf, (OBS,), np.float32),
            achieved_goal=spaces.Box(-np.inf, np.inf, (GOAL,), np.float32),
            desired_goal=spaces.Box(-np.inf, np.inf, (GOAL,), np.float32),
        )
        action_space = spaces.Box(-1.0, 1.0, (ACTION,), np.float32)

        def compute_reward(self, achieved_goal, desired_goal, info):
            distance = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
            return -(distance > 0.05).astype(np.float32)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, False, False, {}

    return FetchLike


def episode_steps(n_envs: int, rng: np.random.Generator) -> list[tuple]:
    """Two episodes of every env as the add() arguments of each step (reused cyclically)."""
    steps = []
    for _ in range(2):
        obs = rng.standard_normal((EPISODE + 1, n_envs, OBS)).astype(np.float32)
        achieved = rng.standard_normal((EPISODE + 1, n_envs, GOAL)).astype(np.float32) * 0.1
        desired = np.repeat(rng.standard_normal((1, n_envs, GOAL)).astype(np.float32) * 0.1, 51, 0)
        for t in range(EPISODE):
            last = t == EPISODE - 1
            steps.append(
                (
                    {
                        "observation": obs[t],
                        "achieved_goal": achieved[t],
                        "desired_goal": desired[t],
                    },
                    {
                        "observation": obs[t + 1],
                        "achieved_goal": achieved[t + 1],
                        "desired_goal": desired[t + 1],
                    },
                    rng.uniform(-1, 1, (n_envs, ACTION)).astype(np.float32),
                    -np.ones(n_envs, np.float32),
                    np.full(n_envs, last),
                    [{"TimeLimit.truncated": True} if last else {} for _ in range(n_envs)],
                    np.zeros(n_envs, bool),  # terminated (goalenvs keeps it apart)
                )
            )
    return steps


def best_time(function, calls: int, repeats: int = 7) -> float:
    """CPU seconds per call: the best of ``repeats`` runs of ``calls`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            function()
        best = min(best, (time.process_time() - start) / calls)
    return best


def worker(kind: str, n_envs: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([fetch_like_env()] * n_envs)
    steps = episode_steps(n_envs, np.random.default_rng(0))
    n_steps = TRANSITIONS // n_envs
    baseline = rss_bytes()
    if kind == "sb3":
        from stable_baselines3 import HerReplayBuffer

        np.random.seed(0)  # noqa: NPY002 (stable-baselines3 samples from the global generator)
        buffer = HerReplayBuffer(
            TRANSITIONS,
            venv.observation_space,
            venv.action_space,
            venv,
            device="cpu",
            n_envs=n_envs,
        )

        def add(step: tuple) -> None:
            obs, next_obs, action, reward, done, infos, _ = step
            buffer.add(obs, next_obs, action, reward, done, infos)

        def sample(batch: int) -> object:
            return buffer.sample(batch)
    else:
        from goalenvs.her import HerReplayBuffer

        # One extra row per episode for its final observation: size it so that 1e6
        # transitions fit (1e6 * 51 / 50 rows).
        rows = TRANSITIONS * (EPISODE + 1) // EPISODE
        buffer = HerReplayBuffer(
            rows, venv.observation_space, venv.action_space, venv, n_envs=n_envs, seed=0
        )

        def add(step: tuple) -> None:
            # The same per-env info dicts as stable-baselines3 gets (a real caller passes
            # its infos; without info_keys the buffer reads none of them).
            obs, next_obs, action, reward, truncated, infos, terminated = step
            buffer.add(obs, next_obs, action, reward, terminated, truncated, infos)

        def sample(batch: int) -> object:
            return buffer.sample(batch, device="cpu")

    start = time.process_time()
    for i in range(n_steps):
        add(steps[i % len(steps)])
    add_time = (time.process_time() - start) / n_steps
    memory = rss_bytes() - baseline
    result = {"add": add_time, "rss": memory}
    for batch in BATCHES:
        result[f"sample{batch}"] = best_time(lambda b=batch: sample(b), 40_000 // batch + 40)
    if kind == "goalenvs":
        result["stored"] = buffer.n_transitions
        arrays = [*buffer._obs.values(), buffer._actions, buffer._rewards, buffer._terminated]
        rng = np.random.default_rng(1)
        total = len(buffer._rewards)

        def floor(batch: int) -> list:
            rows = rng.integers(0, total - 1, batch)
            out = [array[rows] for array in arrays]
            out += [array[rows + 1] for array in buffer._obs.values()]
            return [torch.from_numpy(array) for array in out]

        for batch in BATCHES:
            result[f"floor{batch}"] = best_time(lambda b=batch: floor(b), 40_000 // batch + 40)
    else:
        result["stored"] = int((buffer.ep_length > 0).sum())
    return result


def run(kind: str, n_envs: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, str(n_envs)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print(
        f"HER buffer, Fetch-like sizes: obs {OBS}, goal {GOAL}, action {ACTION}, episodes of "
        f"{EPISODE} steps, {TRANSITIONS:.0e} transitions; sample times as torch CPU tensors; "
        "memory = RSS growth of a fresh process over construction + fill"
    )
    header = (
        f"{'n_envs':>6} {'buffer':<10} {'add us/step':>12} {'sample256 us':>13} "
        f"{'sample2048 us':>14} {'RSS MB':>8} {'stored':>9}"
    )
    ratios = []
    for n_envs in (1, 8):
        sb3 = run("sb3", n_envs)
        ours = run("goalenvs", n_envs)
        print(header)
        for name, r in (("sb3", sb3), ("goalenvs", ours)):
            print(
                f"{n_envs:>6} {name:<10} {r['add'] * 1e6:>12.1f} {r['sample256'] * 1e6:>13.1f} "
                f"{r['sample2048'] * 1e6:>14.1f} {r['rss'] / 2**20:>8.1f} {r['stored']:>9}"
            )
        print(
            f"{n_envs:>6} {'floor':<10} {'':>12} {ours['floor256'] * 1e6:>13.1f} "
            f"{ours['floor2048'] * 1e6:>14.1f}"
        )
        ratios.append(
            (
                n_envs,
                sb3["add"] / ours["add"],
                sb3["sample256"] / ours["sample256"],
                sb3["sample2048"] / ours["sample2048"],
                ours["rss"] / sb3["rss"],
                ours["sample256"] / ours["floor256"],
                ours["sample2048"] / ours["floor2048"],
            )
        )
    print()
    print(
        f"{'n_envs':>6} {'add x faster':>13} {'s256 x faster':>14} {'s2048 x faster':>15} "
        f"{'memory ratio':>13} {'s256 / floor':>13} {'s2048 / floor':>14}"
    )
    for n_envs, add, s256, s2048, memory, f256, f2048 in ratios:
        print(
            f"{n_envs:>6} {add:>13.2f} {s256:>14.2f} {s2048:>15.2f} {memory:>13.2f} "
            f"{f256:>13.2f} {f2048:>14.2f}"
        )
    print("targets: add >= 3x, sample >= 3x, memory <= 0.5x, sample <= 2x floor")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]))))
    else:
        main()
