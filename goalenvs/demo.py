"""``python -m goalenvs.demo`` (``make demo``): DDPG+HER learns PointReach in about a minute.

Trains on ``goalenvs/PointReach-v0`` until every evaluation episode succeeds (or the
epoch budget runs out), then prints the run folder, the best success rate, where the
policy and the learning curves went, and the command that watches the policy play.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from goalenvs.her.config import DDPGConfig


def point_reach_config(**overrides: Any) -> DDPGConfig:
    """DDPG+HER settings tuned for wall-clock speed on PointReach.

    The algorithm is baselines' (same losses, normalizer, clipping, exploration, 3x256
    networks); the schedule differs: short cycles over 8 envs (40 steps, 5 updates) and a
    faster target network (polyak 0.8 every 5 updates), because on one CPU the gradient
    steps, not the env steps, are what costs time.
    """
    settings: dict[str, Any] = {
        "env_id": "goalenvs/PointReach-v0",
        "epochs": 30,
        "n_cycles": 20,
        "num_envs": 8,
        "rollout_steps": 5,
        "n_batches": 5,
        "polyak": 0.8,
        "n_eval_episodes": 20,
        "stop_success": 1.0,
    }
    settings.update(overrides)
    return DDPGConfig(**settings)


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the demo; returns 0 when the policy reached full success."""
    parser = argparse.ArgumentParser(prog="python -m goalenvs.demo", description=__doc__)
    parser.add_argument("--out", help="run folder (default runs/<env>-ddpg-s<seed>-<time>)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)

    from goalenvs.her.trainer import train

    config = point_reach_config(seed=args.seed, out=args.out)
    print(f"training DDPG+HER on {config.env_id} until full evaluation success ...")
    start = time.perf_counter()
    result = train(config)
    elapsed = time.perf_counter() - start
    print()
    print(f"run folder:     {result.run_dir}")
    print(f"best success:   {result.best_success_rate:.2f} over {config.n_eval_episodes} episodes")
    print(f"trained for:    {result.env_steps} env steps, {elapsed:.1f} s")
    print(f"policy:         {result.best_policy}")
    print(f"curves:         {result.run_dir / 'curves.png'}")
    print(f"watch it play:  goalenvs play {config.env_id} --policy {result.best_policy}")
    return 0 if result.best_success_rate >= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
