"""Success rate of a trained PointMaze policy for each goal cell, drawn over the layout.

Usage: ``python benchmarks/maze_heatmap.py runs/<run>/policy_best.pt [--episodes 20]
[--out heatmap.png]``. For every free cell of the policy's maze it pins the goal at the
cell's centre and runs ``--episodes`` deterministic episodes from the usual random starts
(all cells at once, one native vector env), prints the success rate per cell as a grid
and saves a heat map (walls dark, each free cell coloured by its success rate).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np

import goalenvs  # noqa: F401  (registers the ids)


def goal_cell_success(policy_path: str, episodes: int, seed: int = 1000) -> tuple[np.ndarray, Any]:
    """The map's (rows, cols) success rates (NaN on walls) and the env's params."""
    from goalenvs.train.policy import load_policy

    policy = load_policy(policy_path, device="cpu")
    probe = gym.make(policy.env_id, **policy.env_kwargs)
    params = probe.unwrapped.params
    limit = probe.spec.max_episode_steps
    cells = params.free_cells
    goals = np.repeat(cells + 0.5, episodes, axis=0)
    # Finished sub-envs restart (next-step autoreset); only their first episode counts.
    envs = gym.make_vec(policy.env_id, num_envs=len(goals), **policy.env_kwargs)
    obs, _ = envs.reset(seed=seed, options={"goal": goals})
    success = np.zeros(len(goals), bool)
    done = np.zeros(len(goals), bool)
    for _ in range(limit):
        obs, _, terminated, truncated, info = envs.step(policy.predict(obs))
        success |= info["is_success"] & ~done
        done |= terminated | truncated
        if done.all():
            break
    rates = np.full(params.shape, np.nan)
    rows = params.shape[0]
    for k, (x, y) in enumerate(cells.astype(int)):
        rates[rows - 1 - y, x] = success[k * episodes : (k + 1) * episodes].mean()
    return rates, params


def main() -> None:
    """Prints the per-cell success grid and saves the heat map."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a PointMaze checkpoint (policy_best.pt)")
    parser.add_argument("--episodes", type=int, default=20, help="episodes per goal cell")
    parser.add_argument("--out", default="maze_heatmap.png", help="where to save the PNG")
    args = parser.parse_args()
    rates, params = goal_cell_success(args.policy, args.episodes)
    for row in rates:
        print(" ".join("  ## " if np.isnan(v) else f"{v:5.2f}" for v in row))
    print(f"mean over goal cells: {np.nanmean(rates):.3f}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(1 + 0.6 * params.shape[1], 0.6 * params.shape[0]))
    shown = np.ma.masked_invalid(rates)
    cmap = plt.get_cmap("RdYlGn").copy()
    cmap.set_bad((0.27, 0.27, 0.31))
    image = ax.imshow(shown, cmap=cmap, vmin=0.0, vmax=1.0)
    for (r, c), v in np.ndenumerate(rates):
        if not np.isnan(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=8)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title("success rate by goal cell")
    fig.colorbar(image, ax=ax, fraction=0.05)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"saved {args.out}")


if __name__ == "__main__":
    main()
