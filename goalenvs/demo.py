"""``python -m goalenvs.demo`` (``make demo``): DDPG+HER learns PointReach in about a minute.

Trains on ``goalenvs/PointReach-v0`` until every evaluation episode succeeds (or the
epoch budget runs out), then prints the run folder, the best success rate, where the
policy and the learning curves went, and the command that watches the policy play.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any, cast

from goalenvs.agents.ddpg import DDPGConfig


def point_reach_config(**overrides: Any) -> DDPGConfig:
    """The ``point_reach`` preset (goalenvs/train/presets/point_reach.toml) for PointReach,
    with ``overrides`` (any config field, ``env_id`` included) applied on top."""
    return _preset_config("point_reach", "goalenvs/PointReach-v0", overrides)


def parking_config(**overrides: Any) -> DDPGConfig:
    """The ``parking`` preset (goalenvs/train/presets/parking.toml) for Parking, with
    ``overrides`` (any config field, ``env_id`` included) applied on top."""
    return _preset_config("parking", "goalenvs/Parking-v0", overrides)


def _preset_config(preset: str, env_id: str, overrides: dict[str, Any]) -> DDPGConfig:
    from goalenvs.train.presets import resolve_config

    overrides = dict(overrides)
    config = resolve_config(overrides.pop("env_id", env_id), preset, **overrides)
    return cast(DDPGConfig, config)  # resolve_config is typed by the base class


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the demo; returns 0 when the policy reached full success."""
    parser = argparse.ArgumentParser(prog="python -m goalenvs.demo", description=__doc__)
    parser.add_argument("--out", help="run folder (default runs/<env>-ddpg-s<seed>-<time>)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    args = parser.parse_args(argv)

    from goalenvs.core import command_name
    from goalenvs.train.trainer import train

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
    policy = shlex.quote(str(result.best_policy))
    print(f"watch it play:  {command_name()} play {config.env_id} --policy {policy}")
    return 0 if result.best_success_rate >= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
