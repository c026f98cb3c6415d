"""What replay by goal motion has to work with in each manipulation env: how often the
object moves under uniformly random actions, how far, how often it leaves the table, and
how far it creeps when nothing touches it.

    python benchmarks/goal_motion.py                       # every env below, 200 episodes
    python benchmarks/goal_motion.py --envs FetchSlide-v4 --episodes 400

Each env runs ``--episodes`` episodes of 50 steps on 8 envs side by side, seeded 0, 8, 16,
..., with actions drawn uniformly from the action space (numpy seed 0), then 4 episodes of
zero actions for the creep. The path is ``sum_t |ag_{t+1} - ag_t|``, unclipped; "moved"
is a path over 1 mm. Prints one row per env and appends it to
benchmarks/results/goal_motion.jsonl. No timing: the counts do not depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "goal_motion.jsonl"
ENVS = ("FetchPush-v4", "FetchSlide-v4", "FetchPickAndPlace-v4", "PandaPush-v3")
N_ENVS = 8
STEPS = 50


def make_vector_env(env_id: str) -> Any:
    """``env_id`` on ``N_ENVS`` envs in this process (gymnasium-robotics or panda-gym)."""
    import gymnasium as gym

    if env_id.startswith("Panda"):
        import panda_gym  # noqa: F401  (registers the envs)
    else:
        import gymnasium_robotics

        gym.register_envs(gymnasium_robotics)
    return gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(N_ENVS)])


def paths(envs: Any, episodes: int, zero: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each episode's path of the achieved goal and how far it dropped below its start at
    the lowest, under uniformly random actions (or zero actions with ``zero``)."""
    rng = np.random.default_rng(0)
    shape = (N_ENVS, *envs.single_action_space.shape)
    low, high = envs.single_action_space.low, envs.single_action_space.high
    walked, lowest = [], []  # lowest: the drop below the start
    for batch in range(-(-episodes // N_ENVS)):
        obs, _ = envs.reset(seed=batch * N_ENVS)
        start = obs["achieved_goal"][:, 2].copy()
        path, floor = np.zeros(N_ENVS), start.copy()
        for _ in range(STEPS):
            action = np.zeros(shape) if zero else rng.uniform(low, high, size=shape)
            after, *_ = envs.step(action.astype(np.float32))
            path += np.linalg.norm(after["achieved_goal"] - obs["achieved_goal"], axis=1)
            floor = np.minimum(floor, after["achieved_goal"][:, 2])
            obs = after
        walked.append(path)
        lowest.append(start - floor)
    return np.concatenate(walked)[:episodes], np.concatenate(lowest)[:episodes]


def measure(env_id: str, episodes: int) -> dict[str, Any]:
    """The row of ``env_id``: moved share, path quantiles of the moved episodes, episodes
    whose object dropped 10 cm below where it started (off the table), and the creep."""
    envs = make_vector_env(env_id)
    try:
        walked, dropped = paths(envs, episodes, zero=False)
        creep, _ = paths(envs, N_ENVS // 2, zero=True)
    finally:
        envs.close()
    moved = walked > 1e-3
    quantiles = np.quantile(walked[moved], [0.1, 0.5, 0.9]) if moved.any() else [0.0] * 3
    return {
        "env": env_id,
        "episodes": int(episodes),
        "moved": int(moved.sum()),
        "moved_share": round(float(moved.mean()), 3),
        "moved_path_m_p10_p50_p90": [round(float(q), 4) for q in quantiles],
        "off_table": int((dropped > 0.1).sum()),
        "creep_m_per_episode": round(float(np.median(creep)), 5),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS))
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    print(
        "| env | episodes | moved the object (path > 1 mm) | moved path, m (p10 / p50 / p90) "
        "| off the table | creep untouched, m per episode |"
    )
    print("|---|---|---|---|---|---|")
    for env_id in args.envs:
        row = measure(env_id, args.episodes)
        q = " / ".join(f"{x:.3f}" for x in row["moved_path_m_p10_p50_p90"])
        print(
            f"| {env_id} | {row['episodes']} | {row['moved']} ({row['moved_share']:.0%}) | {q} | "
            f"{row['off_table']} | {row['creep_m_per_episode']:.4f} |"
        )
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        with RESULTS.open("a") as f:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
