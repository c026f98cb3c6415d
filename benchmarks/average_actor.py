"""A checkpoint's trained actor against its averaged one, on the same evaluation episodes.

    python benchmarks/average_actor.py RUN_DIR [RUN_DIR ...] --episodes 200

For each committed epoch in ``RUN_DIR/checkpoints/`` (the newest two a run keeps), the
DDPG/TD3 actor and its target actor are evaluated deterministically on the same
``--episodes`` episodes (25 envs side by side, reset seeds 10,000, 10,025, ...). With
``polyak`` p the target actor is the average that ``policy_average p`` would act by: it
moves ``1 - p`` of the way to the actor once a cycle. A run made with ``policy_average``
has that average too; it is evaluated as a third policy. Prints one row per checkpoint and
appends it to benchmarks/results/average_actor.jsonl. No timing: success does not depend on
the machine's speed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import append_jsonl, portable, run_info  # noqa: E402

N_ENVS = 25
FIRST_SEED = 10_000


def make_vector_env(env_id: str, kwargs: dict[str, Any]) -> Any:
    """``env_id`` (a gymnasium-robotics, panda-gym or goalenvs id) on ``N_ENVS`` envs in
    this process."""
    import gymnasium as gym

    from goalenvs import envspec

    return gym.vector.SyncVectorEnv([lambda: envspec.make(env_id, **kwargs) for _ in range(N_ENVS)])


def success(policy: Any, envs: Any, episodes: int, steps: int) -> float:
    """Deterministic success rate of ``policy`` over ``episodes`` episodes of ``steps``."""
    hits: list[float] = []
    for batch in range(-(-episodes // N_ENVS)):
        obs, _ = envs.reset(seed=FIRST_SEED + N_ENVS * batch)
        info: dict[str, Any] = {}
        for _ in range(steps):
            obs, _, _, _, info = envs.step(policy.predict(obs))
        hits.extend(np.asarray(info["is_success"], dtype=float).tolist())
    return float(np.mean(hits[:episodes]))


def measure(checkpoint: Path, episodes: int) -> dict[str, Any]:
    """The row of one checkpoint: its epoch, env steps and the success of each actor."""
    from goalenvs.train.checkpoint import read_checkpoint
    from goalenvs.train.policy import load_policy

    policy = load_policy(checkpoint)
    data = read_checkpoint(checkpoint)
    agent, meta = policy.agent, data["metadata"]
    if "actor_target" not in data.get("training", {}):
        raise SystemExit(f"{checkpoint}: no actor_target (a DDPG or TD3 run's checkpoint)")
    actors = {"actor": data["policy"]["actor"], "target": data["training"]["actor_target"]}
    if "actor_average" in data["policy"]:
        actors["average"] = data["policy"]["actor_average"]
    steps = policy.max_episode_steps or 50
    envs = make_vector_env(policy.env_id, policy.env_kwargs)
    rates: dict[str, float] = {}
    try:
        with agent.online_acting():  # act by agent.actor, loaded with each state in turn
            for name, state in actors.items():
                agent.actor.load_state_dict(state)
                rates[name] = success(policy, envs, episodes, steps)
    finally:
        envs.close()
    return {
        "env_id": policy.env_id,
        "epoch": int(meta["epoch"]),
        "env_steps": int(meta["env_steps"]),
        "polyak": meta["config"]["polyak"],
        "precision": meta["config"].get("plan", {}).get("precision"),  # what the run trained
        "episodes": episodes,
        "success": rates,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (their checkpoints/)")
    parser.add_argument("--episodes", type=int, default=200)
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes must be at least 1, got {args.episodes}")
    print("| run | epoch | env steps | actor | target actor | average |")
    print("|---|---|---|---|---|---|")
    for run in args.runs:
        units = sorted((run / "checkpoints").glob("epoch_*/policy.pt"))
        if not units:
            parser.error(f"{run} holds no checkpoints/epoch_*/policy.pt")
        for checkpoint in units:
            row = measure(checkpoint, args.episodes)
            rates = row["success"]
            print(
                f"| {run.name} | {row['epoch']} | {row['env_steps']:,} | {rates['actor']:.3f} | "
                f"{rates['target']:.3f} | {rates.get('average', float('nan')):.3f} |"
            )
            record = {"run": str(run.resolve()), **row, **run_info()}
            append_jsonl("average_actor.jsonl", portable(record, {run.resolve(): run.name}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
