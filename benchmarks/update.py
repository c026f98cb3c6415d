"""One gradient step of DDPG and TD3: ours (eager float32, bf16, CUDA graphs) beside
stable-baselines3's ``train()``, same run, same sizes.

Fetch-like sizes: observation 25, goals of 3 (our networks see the 31 normalized inputs,
SB3's the same 31 as one Box observation), action 4, actor and critics 3x256, Adam, batches
of 256 and 2,048. Each side updates on one fixed batch already on the device (SB3's
``replay_buffer.sample`` is replaced by one that returns it), so the figures are the
updates alone, without replay sampling. Ours is ``Learner.optimize(buffer, N) / N``: N
updates, then the target networks move once (our algorithms move them once per cycle);
SB3's is ``model.train(N, batch_size) / N``, which moves its targets after every actor
step, as SB3's algorithms do. The ratio is SB3's time over ours (> 1: ours is faster).

Columns: ``fp32`` our eager update in float32; ``bf16`` the same under bf16 autocast (on a
CPU with bfloat16 instructions only); ``graph`` our update captured as CUDA graphs (CUDA
only). The sides take turns, round by round, and each figure is the best of its rounds, so
that the load of a shared machine falls on all alike; CUDA times are wall times with a
synchronize per round.

Run: python benchmarks/update.py [--device cuda] [--quick] [--profile]
(about 2 minutes on 2 busy cores). ``--profile`` also prints where the time of our eager
update of the largest batch goes (torch.profiler, by operator).

Every run appends its seconds per gradient step and ratios, with the machine, load,
versions and command, as one JSON line to benchmarks/results/update.jsonl.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from goalenvs.agents import DDPGConfig, Learner, TD3Config
from goalenvs.agents.ddpg import DDPG
from goalenvs.agents.precision import cpu_has_bf16
from goalenvs.agents.td3 import TD3
from goalenvs.her import HerBatch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence import append_jsonl, run_info

OBS, GOAL, ACTION = 25, 3, 4
HIDDEN = (256, 256, 256)
BATCHES = (256, 2048)
OBS_SPACE = spaces.Dict(
    observation=spaces.Box(-10, 10, (OBS,), np.float32),
    achieved_goal=spaces.Box(-10, 10, (GOAL,), np.float32),
    desired_goal=spaces.Box(-10, 10, (GOAL,), np.float32),
)
ACTIONS = spaces.Box(-1, 1, (ACTION,), np.float32)
ALGOS = {"ddpg": (DDPG, DDPGConfig), "td3": (TD3, TD3Config)}


class FixedBatch:
    """A replay stand-in that hands out one batch, already on the device, every time."""

    prioritized = False

    def __init__(self, batch: HerBatch) -> None:
        self.batch = batch

    def sample(self, batch_size: int, device: Any = None) -> HerBatch:
        """The batch (``batch_size`` and ``device`` are the batch's own)."""
        return self.batch


def random_batch(batch_size: int, device: torch.device, seed: int = 0) -> HerBatch:
    """A HER batch of random values on ``device``: sparse rewards, a few episode ends."""
    rng = np.random.default_rng(seed)

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array.astype(np.float32)).to(device)

    def observations() -> dict[str, torch.Tensor]:
        return {
            key: tensor(rng.standard_normal((batch_size, *space.shape)))
            for key, space in OBS_SPACE.spaces.items()
        }

    return HerBatch(
        observations(),
        tensor(rng.uniform(-1, 1, (batch_size, ACTION))),
        tensor(-(rng.random(batch_size) < 0.8).astype(np.float32)),
        observations(),
        tensor(rng.random(batch_size) < 0.02),
        tensor(np.ones(batch_size)),
        torch.arange(batch_size, device=device),
    )


def ours(
    algo: str, batch_size: int, device: torch.device, precision: str, graphs: str
) -> Callable[[int], None]:
    """``n -> None``: n of our updates (one Learner cycle)."""
    agent_cls, config_cls = ALGOS[algo]
    config = config_cls(hidden_sizes=HIDDEN, batch_size=batch_size, precision=precision)
    agent = agent_cls(OBS_SPACE, ACTIONS, config, gamma=0.98, seed=0).to(device)
    learner = Learner(agent, batch_size, graphs=graphs)
    buffer = FixedBatch(random_batch(batch_size, device))

    def run(n: int) -> None:
        learner.optimize(buffer, n)

    return run


class _FlatGoalEnv(gym.Env):
    """The env SB3's model is built for: the 31 inputs as one Box, 4 actions."""

    observation_space = spaces.Box(-10, 10, (OBS + 2 * GOAL,), np.float32)
    action_space = ACTIONS

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        return self.observation_space.sample(), -1.0, False, False, {}


def sb3(algo: str, batch_size: int, device: torch.device) -> Callable[[int], None]:
    """``n -> None``: n of stable-baselines3's gradient steps (``model.train``)."""
    from stable_baselines3 import DDPG as SB3DDPG
    from stable_baselines3 import TD3 as SB3TD3
    from stable_baselines3.common.logger import configure

    model_cls = {"ddpg": SB3DDPG, "td3": SB3TD3}[algo]
    model = model_cls(
        "MlpPolicy",
        _FlatGoalEnv(),
        learning_rate=1e-3,
        buffer_size=batch_size,
        batch_size=batch_size,
        policy_kwargs={"net_arch": list(HIDDEN)},
        device=device,
        seed=0,
    )
    model.set_logger(configure(None, []))
    rng = np.random.default_rng(0)
    replay = model.replay_buffer
    assert replay is not None
    for _ in range(batch_size):
        observation = rng.standard_normal((1, OBS + 2 * GOAL)).astype(np.float32)
        action = rng.uniform(-1, 1, (1, ACTION)).astype(np.float32)
        reward = -(rng.random(1) < 0.8).astype(np.float32)
        replay.add(observation, observation, action, reward, np.zeros(1), [{}])
    fixed = replay.sample(batch_size)
    replay.sample = lambda *args, **kwargs: fixed  # type: ignore[method-assign]
    return lambda n: model.train(n, batch_size)


def best_seconds(
    runs: dict[str, Callable[[int], None]], calls: int, rounds: int, device: torch.device
) -> dict[str, float]:
    """The best seconds per update of each run, the runs taking turns round by round."""
    cuda = device.type == "cuda"
    for run in runs.values():  # warm-up (and, for graphs, the captures)
        run(max(calls, 8))
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            if cuda:
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            run(calls)
            if cuda:
                torch.cuda.synchronize(device)
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def profile(algo: str, batch_size: int, device: torch.device, precision: str) -> None:
    """Prints the operators that take our eager update's time (torch.profiler)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    run = ours(algo, batch_size, device, precision, "off")
    run(5)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with torch_profile(activities=activities) as prof:
        run(10)
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    print(f"\nprofile: {algo} eager {precision}, batch {batch_size}, 10 updates on {device}")
    print(prof.key_averages().table(sort_by=sort, row_limit=18))


def main() -> None:
    """Measures each algorithm and batch size, prints the table and saves the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--profile", action="store_true", help="also profile our eager update")
    parser.add_argument("--algos", nargs="+", default=list(ALGOS), choices=list(ALGOS))
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device")
    torch.set_num_threads(1)
    columns = ["fp32"]
    if device.type == "cpu" and cpu_has_bf16():
        columns.append("bf16")
    if device.type == "cuda":
        columns.append("graph")
    rounds = 3 if args.quick else 7
    print(
        f"{device}: one gradient step, 3x256 networks, inputs {OBS + 2 * GOAL}, action {ACTION};"
        f" best of {rounds} rounds; ratio = SB3 time / ours (> 1: ours is faster)"
    )
    header = f"{'algo':<5} {'batch':>5}" + "".join(f" {c + ' ms':>9}" for c in columns)
    header += f" {'SB3 ms':>9}" + "".join(f" {c + '/SB3':>10}" for c in columns)
    print(header)
    record = run_info(device=str(device), hidden_sizes=list(HIDDEN), rounds=rounds, results={})
    for algo in args.algos:
        record["results"][algo] = {}
        for batch_size in BATCHES:
            calls = max(4, 4096 // batch_size) if device.type == "cpu" else 50
            runs: dict[str, Callable[[int], None]] = {}
            for column in columns:
                precision = "bf16" if column == "bf16" else "fp32"
                graphs = "on" if column == "graph" else "off"
                runs[column] = ours(algo, batch_size, device, precision, graphs)
            runs["sb3"] = sb3(algo, batch_size, device)
            best = best_seconds(runs, calls, rounds, device)
            ratios = {column: best["sb3"] / best[column] for column in columns}
            record["results"][algo][str(batch_size)] = {"seconds": best, "sb3_over_ours": ratios}
            line = f"{algo:<5} {batch_size:>5}"
            line += "".join(f" {best[c] * 1e3:>9.3f}" for c in columns)
            line += f" {best['sb3'] * 1e3:>9.3f}" + "".join(f" {ratios[c]:>10.2f}" for c in columns)
            print(line, flush=True)
    record["load_after"] = run_info()["load"]
    print("saved to", append_jsonl("update.jsonl", record))
    if args.profile:
        for precision in ["fp32", *(["bf16"] if "bf16" in columns else [])]:
            profile("ddpg", max(BATCHES), device, precision)


if __name__ == "__main__":
    main()
