"""goalenvs' SB3 adapter beside stable-baselines3's own HerReplayBuffer, same runs, same seeds.

Three tables:

1. ``sac``: SAC+HER on goalenvs/PointReach-v0 with the settings of
   tests/test_her_sb3.py's learning test (5000 steps), per seed and buffer: the success
   rate of the deterministic policy over 50 fixed evaluation episodes. The claim checked
   is "the adapter learns as well as SB3's buffer": the two rows should look alike.
2. ``dqn``: stable-baselines3's own ``test_performance_her`` setting (DQN+HER on SB3's
   BitFlippingEnv, 10 bits, 2 envs, 1500 steps): the mean of ``ep_success_buffer`` (the
   last 50 training episodes), per seed and buffer; SB3's test asks for > 0.9.
3. ``learning``: the other learning tests of the suite (tests/test_sb3_learning.py: SB3
   DQN+HER on 10 random bits, SB3 DDPG+HER on PointReach), per seed and buffer.
4. ``arrays``: the cost of the adapter's SB3-layout public arrays (``observations``,
   ``next_observations``, ``actions``, ``rewards``, ``dones``, ...): assembled from the
   goalenvs storage at the first read after an ``add`` and cached until the next one.
   Printed: the time of one such assembly for a filled buffer, as a ratio to one
   ``sample(256)`` of the same buffer (SB3's buffer reads them for free: they are its
   storage).

Run: ``python benchmarks/sb3_her.py [sac|dqn|learning|arrays ...] [--seeds 0 1 2 3 4]``
(all four tables by default; the learning tables take minutes per seed on one core).
Each run is single-threaded (``torch.set_num_threads(1)``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gymnasium as gym
import numpy as np


def _buffers() -> dict[str, type]:
    from stable_baselines3 import HerReplayBuffer as SB3HerReplayBuffer

    from goalenvs.her.sb3 import HerReplayBuffer

    return {"goalenvs": HerReplayBuffer, "sb3": SB3HerReplayBuffer}


def success_rate(model, env_id: str, episodes: int, **kwargs) -> float:
    """Deterministic policy's success over evaluation episodes seeded 10000, 10001, ..."""
    env = gym.make(env_id, **kwargs)
    successes = 0
    for episode in range(episodes):
        obs, info = env.reset(seed=10_000 + episode)
        while True:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        successes += bool(info["is_success"])
    return successes / episodes


def sac_point_reach(buffer_class: type, seed: int) -> float:
    """tests/test_her_sb3.py's SAC learning test with another seed."""
    from stable_baselines3 import SAC
    from stable_baselines3.common.env_util import make_vec_env

    import goalenvs  # noqa: F401

    venv = make_vec_env("goalenvs/PointReach-v0", n_envs=1, seed=seed)
    model = SAC(
        "MultiInputPolicy",
        venv,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_starts=300,
        batch_size=128,
        gamma=0.95,
        learning_rate=1e-3,
        policy_kwargs={"net_arch": [64, 64]},
        seed=seed,
        device="cpu",
    )
    model.learn(5000)
    return success_rate(model, "goalenvs/PointReach-v0", 50)


def sb3_performance_her(buffer_class: type, seed: int) -> float:
    """stable-baselines3's test_performance_her[10] setting, with another seed."""
    from stable_baselines3 import DQN
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.envs import BitFlippingEnv

    env = make_vec_env(lambda: BitFlippingEnv(n_bits=10, continuous=False), 2)
    model = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs={"n_sampled_goal": 5, "goal_selection_strategy": "future"},
        learning_rate=2e-3,
        train_freq=1,
        gradient_steps=2,
        learning_starts=20,
        exploration_final_eps=0.02,
        target_update_interval=100,
        seed=seed,
        batch_size=32,
        buffer_size=int(1e5),
        stats_window_size=50,
        device="cpu",
    )
    model.learn(total_timesteps=1500)
    return float(np.mean(model.ep_success_buffer))


def dqn_ten_bits(buffer_class: type, seed: int) -> float:
    """tests/test_sb3_learning.py::test_sb3_dqn_with_her_solves_ten_random_bits."""
    from stable_baselines3 import DQN

    import goalenvs  # noqa: F401

    env = gym.make("goalenvs/BitFlipping-v0", n_bits=10)
    model = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_rate=1e-3,
        buffer_size=100_000,
        batch_size=128,
        gamma=0.9,
        learning_starts=500,
        target_update_interval=250,
        exploration_fraction=0.3,
        exploration_final_eps=0.05,
        policy_kwargs={"net_arch": [128, 128]},
        seed=seed,
        device="cpu",
    )
    model.learn(5_000)
    return success_rate(model, "goalenvs/BitFlipping-v0", 200, n_bits=10)


def ddpg_point_reach(buffer_class: type, seed: int) -> float:
    """tests/test_sb3_learning.py::test_sb3_ddpg_with_her_reaches_points."""
    from stable_baselines3 import DDPG
    from stable_baselines3.common.noise import NormalActionNoise

    import goalenvs  # noqa: F401

    env = gym.make("goalenvs/PointReach-v0")
    model = DDPG(
        "MultiInputPolicy",
        env,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
        learning_rate=1e-3,
        buffer_size=100_000,
        batch_size=128,
        gamma=0.95,
        tau=0.05,
        learning_starts=500,
        action_noise=NormalActionNoise(np.zeros(2), np.full(2, 0.2)),
        policy_kwargs={"net_arch": [128, 128]},
        seed=seed,
        device="cpu",
    )
    model.learn(4_000)
    return success_rate(model, "goalenvs/PointReach-v0", 100)


def learning_table(title: str, runs: dict[str, object], seeds: list[int]) -> None:
    print(f"\n{title}")
    print(f"{'buffer':<10} " + " ".join(f"{f'seed {s}':>7}" for s in seeds) + "    min   mean")
    for name, buffer_class in _buffers().items():
        values = []
        for seed in seeds:
            values.append(runs(buffer_class, seed))
            print(f"  ({name} seed {seed}: {values[-1]:.3f})", file=sys.stderr, flush=True)
        cells = " ".join(f"{v:7.3f}" for v in values)
        print(f"{name:<10} {cells} {min(values):6.3f} {np.mean(values):6.3f}", flush=True)


def arrays_table(transitions: int = 100_000, n_envs: int = 1, episode: int = 50) -> None:
    from goalenvs.her.sb3 import HerReplayBuffer

    obs_space = gym.spaces.Dict(
        observation=gym.spaces.Box(-np.inf, np.inf, (25,), np.float32),
        achieved_goal=gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
        desired_goal=gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
    )
    action_space = gym.spaces.Box(-1, 1, (4,), np.float32)

    class Env(gym.Env):
        observation_space = obs_space

        def compute_reward(self, achieved_goal, desired_goal, info):
            return -(np.linalg.norm(achieved_goal - desired_goal, axis=-1) > 0.05).astype(
                np.float32
            )

    print(f"\narrays: {transitions} transitions, {n_envs} env(s), episodes of {episode} steps")
    buffer = HerReplayBuffer(
        transitions, obs_space, action_space, Env(), device="cpu", n_envs=n_envs, seed=0
    )
    rng = np.random.default_rng(0)
    obs = {
        k: rng.standard_normal((n_envs, *s.shape)).astype(np.float32) for k, s in obs_space.items()
    }
    action = rng.uniform(-1, 1, (n_envs, 4)).astype(np.float32)
    reward = np.zeros(n_envs, np.float32)
    steps = transitions // n_envs
    for step in range(steps):
        done = np.full(n_envs, (step + 1) % episode == 0)
        infos = [{"TimeLimit.truncated": bool(d)} for d in done]
        buffer.add(obs, obs, action, reward, done, infos)

    def best(fn, repeat: int = 5) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    def assemble() -> None:
        buffer._public_cache = None
        buffer.observations  # noqa: B018

    sample = best(lambda: buffer.sample(256), 20)
    build = best(assemble)
    cached = best(lambda: buffer.observations, 20)
    print(f"{'what':<40} {'time':>10} {'x sample(256)':>14}")
    for what, t in (
        ("sample(256)", sample),
        ("first public-array read after an add", build),
        ("later reads (cached)", cached),
    ):
        print(f"{what:<40} {t * 1e3:8.3f}ms {t / sample:14.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", default=["arrays", "dqn", "sac", "learning"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    for table in args.tables:
        if table == "sac":
            learning_table(
                "sac: SAC+HER PointReach, 5000 steps, success over 50", sac_point_reach, args.seeds
            )
        elif table == "dqn":
            learning_table(
                "dqn: SB3's test_performance_her[10] setting,"
                " mean ep_success_buffer (> 0.9 passes)",
                sb3_performance_her,
                args.seeds,
            )
        elif table == "learning":
            learning_table(
                "DQN+HER 10 bits, 5000 steps, success over 200", dqn_ten_bits, args.seeds
            )
            learning_table(
                "DDPG+HER PointReach, 4000 steps, success over 100", ddpg_point_reach, args.seeds
            )
        elif table == "arrays":
            arrays_table()
        else:
            parser.error(f"unknown table {table!r}: expected sac, dqn, learning or arrays")


if __name__ == "__main__":
    main()
