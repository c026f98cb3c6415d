"""HER buffer on a torch device: DeviceHerReplayBuffer beside HerReplayBuffer, same run.

Fetch-like sizes (observation 25, goal 3, action 4, episodes of 50 steps ended by the time
limit, every env in step), a buffer of 2**18 transitions (at least 4 episodes per env:
819,200 with 4096 envs), for 1, 256 and 4096 envs.
Both buffers get the same steps: numpy arrays for HerReplayBuffer, the same values as
tensors on the device for DeviceHerReplayBuffer (what a device twin hands over). The
reward function is a PointReach-like sparse reward written once for numpy and torch.

Printed per n_envs: the time of one ``add`` (one env step of n_envs transitions, over a
stretch that wraps the ring, so old episodes retire as in a long run) and of one
``sample(256)`` / ``sample(2048)`` returning torch tensors on the device (HerReplayBuffer:
``sample(B, device=...)``, on the CPU the same arrays seen as tensors, on CUDA copied
there, as the trainer uses it). The ratio is numpy time / device time (> 1: the device
buffer is faster). Both buffers live in one process and take turns, chunk by chunk and
round by round, and each figure is the best of its rounds, so that the load of a shared
machine falls on both alike; CUDA times are wall times with a synchronize per round.

On CUDA, ``--graph`` also times ``sample`` captured once as a CUDA graph and replayed
(the buffer's generator registered with the graph), as a GPU learner runs it: the
``graph us`` column and its ratio against the numpy buffer.

Run: python benchmarks/device_buffer.py [--quick] [--device cpu cuda] [--graph]
(``--device cpu``, the default, takes about 1-2 minutes on 2 busy cores)

Every run appends its times (seconds per call) and ratios, with the machine, load,
versions and command, as one JSON line to benchmarks/results/device_buffer.jsonl, or the
file ``--results`` names (benchmarks/report.py builds docs/benchmarks.md's table from
device_buffer.jsonl).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from goalenvs.her import HerReplayBuffer
from goalenvs.her.buffer import DeviceHerReplayBuffer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from evidence import append_jsonl, run_info

OBS, GOAL, ACTION, EPISODE = 25, 3, 4, 50
BUFFER_SIZE = 2**18
BATCHES = (256, 2048)
SPACE = spaces.Dict(
    observation=spaces.Box(-10, 10, (OBS,), np.float32),
    achieved_goal=spaces.Box(-10, 10, (GOAL,), np.float32),
    desired_goal=spaces.Box(-10, 10, (GOAL,), np.float32),
)
ACTIONS = spaces.Box(-1, 1, (ACTION,), np.float32)


def sparse_reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    """0 within 0.05 of the goal, else -1: numpy in, numpy out; tensors in, tensors out."""
    d = achieved_goal - desired_goal
    far = (d * d).sum(-1) > 0.05**2
    if isinstance(far, torch.Tensor):
        return -far.float()
    return -far.astype(np.float32)


def make_steps(n_envs: int, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    """``count`` distinct steps of random values (reused cyclically while filling)."""
    rng = np.random.default_rng(seed)

    def obs() -> dict[str, np.ndarray]:
        return {
            "observation": rng.standard_normal((n_envs, OBS), np.float32),
            "achieved_goal": rng.standard_normal((n_envs, GOAL), np.float32) * 0.1,
            "desired_goal": rng.standard_normal((n_envs, GOAL), np.float32) * 0.1,
        }

    return [
        {
            "obs": obs(),
            "next_obs": obs(),
            "action": rng.uniform(-1, 1, (n_envs, ACTION)).astype(np.float32),
            "reward": -np.ones(n_envs, np.float32),
        }
        for _ in range(count)
    ]


class Feeder:
    """Adds the steps to one buffer, as numpy arrays or as tensors on ``device``."""

    def __init__(self, buffer: Any, steps: list[dict[str, Any]], device: Any) -> None:
        self.buffer = buffer
        self.device = device
        n = buffer.n_envs

        def convert(value: Any) -> Any:
            if device is None:
                return value
            if isinstance(value, dict):
                return {k: torch.as_tensor(v, device=device) for k, v in value.items()}
            return torch.as_tensor(value, device=device)

        self.steps = [{k: convert(v) for k, v in step.items()} for step in steps]
        self.flags = [convert(np.zeros(n, bool)), convert(np.ones(n, bool))]
        self.t = 0

    def add(self, count: int) -> None:
        buffer, steps, flags = self.buffer, self.steps, self.flags
        for _ in range(count):
            step = steps[self.t % len(steps)]
            self.t += 1
            buffer.add(
                step["obs"],
                step["next_obs"],
                step["action"],
                step["reward"],
                flags[0],
                flags[self.t % EPISODE == 0],
            )


def timed(device: Any, work: Any) -> float:
    sync = device is not None and torch.device(device).type == "cuda"
    if sync:
        torch.cuda.synchronize()
    start = time.perf_counter()
    work()
    if sync:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def captured_sample(buffer: Any, batch_size: int) -> Any:
    """``buffer.sample(batch_size)`` captured as a CUDA graph: replaying it draws a new
    batch into the same output tensors."""
    assert buffer.can_sample()  # the host reads its horizons now, not inside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up outside the capture (lazy initialisations)
        for _ in range(3):
            buffer.sample(batch_size)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(buffer.generator)
    with torch.cuda.graph(graph):
        buffer.sample(batch_size)
    return graph


def measure(
    n_envs: int, devices: list[str], quick: bool, graph: bool
) -> dict[str, dict[str, float]]:
    """Seconds per add and per sample(B) for the numpy buffer and each device buffer (and
    per replay of a captured sample, under the name ``graph``, with ``graph``)."""
    buffer_size = max(BUFFER_SIZE, 4 * EPISODE * n_envs)
    rows = buffer_size // n_envs
    steps = make_steps(n_envs, 4, seed=n_envs)
    kinds = {"numpy": None, **{name: name for name in devices}}
    feeders = {}
    for name, device in kinds.items():
        if device is None:
            buffer = HerReplayBuffer(buffer_size, SPACE, ACTIONS, sparse_reward, n_envs=n_envs)
        else:
            buffer = DeviceHerReplayBuffer(
                buffer_size, SPACE, ACTIONS, sparse_reward, n_envs=n_envs, device=device, seed=0
            )
        feeders[name] = Feeder(buffer, steps, device)
    # Adds: a first stretch fills (or, with many envs, wraps) the ring untimed, then
    # rounds of `chunk` adds per buffer in turn.
    warm = min(rows + EPISODE, 4000)
    for feeder in feeders.values():
        feeder.add(warm)
    chunk = max(5, min(400, 200_000 // (n_envs * 8)))
    rounds = 3 if quick else 7
    best = {name: {"add": np.inf} for name in kinds}
    for _ in range(rounds):
        for name, feeder in feeders.items():
            seconds = timed(kinds[name], lambda feeder=feeder: feeder.add(chunk))
            best[name]["add"] = min(best[name]["add"], seconds / chunk)
    for batch_size in BATCHES:
        calls = max(3, (40 if quick else 100) * 256 // batch_size)
        key = f"sample({batch_size})"
        for name in kinds:
            best[name][key] = np.inf
        for _ in range(rounds):
            for name, feeder in feeders.items():
                buffer, device = feeder.buffer, kinds[name]
                target = "cpu" if device is None else device

                def work(
                    buffer: Any = buffer,
                    target: str = target,
                    size: int = batch_size,
                    calls: int = calls,
                ) -> None:
                    for _ in range(calls):
                        buffer.sample(size, device=target)

                seconds = timed(device, work)
                best[name][key] = min(best[name][key], seconds / calls)
    if graph and "cuda" in feeders:
        buffer = feeders["cuda"].buffer
        best["graph"] = {"add": best["cuda"]["add"]}  # add is not captured
        for batch_size in BATCHES:
            replay = captured_sample(buffer, batch_size).replay
            calls = max(3, (40 if quick else 100) * 256 // batch_size)

            def replays(replay: Any = replay, calls: int = calls) -> None:
                for _ in range(calls):
                    replay()

            seconds = min(timed("cuda", replays) for _ in range(rounds))
            best["graph"][f"sample({batch_size})"] = seconds / calls
    return best


def main() -> None:
    """Measures each n_envs, prints the table and saves the raw results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 256, 4096])
    parser.add_argument(
        "--device",
        nargs="+",
        default=["cpu"],
        choices=["cpu", "cuda"],
        help="the devices of the device buffer, each measured against the numpy buffer",
    )
    parser.add_argument(
        "--graph", action="store_true", help="with cuda: also time sample as a CUDA graph"
    )
    parser.add_argument(
        "--results",
        default="device_buffer.jsonl",
        help="the JSON-lines file the run is appended to (relative: under benchmarks/results)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    devices = list(dict.fromkeys(args.device))
    if "cuda" in devices and not torch.cuda.is_available():
        parser.error("--device cuda: torch.cuda.is_available() is False on this machine")
    if args.graph and "cuda" not in devices:
        parser.error("--graph needs --device cuda")
    columns = [*devices, "graph"] if args.graph else devices
    header = f"{'n_envs':>6} {'op':<12} {'numpy us':>10}"
    for device in columns:
        header += f" {device + ' us':>10} {'ratio':>7}"
    print(f"buffer >= {BUFFER_SIZE} transitions, obs {OBS}, goal {GOAL}, episodes {EPISODE}")
    print("ratio = numpy time / device-buffer time (> 1: the device buffer is faster)")
    print(header)
    record = run_info(buffer_size=BUFFER_SIZE, quick=args.quick, devices=devices, per_n_envs={})
    if args.graph:
        record["graph"] = {}
    for n_envs in args.envs:
        best = measure(n_envs, devices, args.quick, args.graph)
        if args.graph:
            record["graph"][str(n_envs)] = best.pop("graph")
        record["per_n_envs"][str(n_envs)] = best
        times = {**best, **({"graph": record["graph"][str(n_envs)]} if args.graph else {})}
        for op in best["numpy"]:
            line = f"{n_envs:>6} {op:<12} {best['numpy'][op] * 1e6:>10.1f}"
            for device in columns:
                seconds = times[device][op]
                line += f" {seconds * 1e6:>10.1f} {best['numpy'][op] / seconds:>7.2f}"
            print(line, flush=True)
    record["load_after"] = run_info()["load"]
    print("saved to", append_jsonl(args.results, record))


if __name__ == "__main__":
    main()
