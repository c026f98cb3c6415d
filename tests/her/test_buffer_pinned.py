"""Seeded samples of both buffers, pinned: the digests below were taken from the buffers'
code before their settings, checks and save/load were shared and their long methods split,
so any change in the random draw order or the index arithmetic shows here.

The files under ``data/`` were written by that code too: they must keep loading, and the
loaded buffers must keep sampling the same batches.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from goalenvs.her import DeviceHerReplayBuffer, HerReplayBuffer

DATA = Path(__file__).parent / "data"
SPACE = spaces.Dict(
    observation=spaces.Box(-10, 10, (3,), np.float32),
    achieved_goal=spaces.Box(-10, 10, (2,), np.float32),
    desired_goal=spaces.Box(-10, 10, (2,), np.float32),
)
BOX = spaces.Box(-1, 1, (2,), np.float32)
DISCRETE = spaces.Discrete(3)


def reward(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    distance = ((achieved_goal - desired_goal) ** 2).sum(-1)
    scale = info["scale"] if info else 1.0
    return -((distance > 0.5) * scale)


def fill(buffer: Any, n_envs: int, steps: int, discrete: bool, as_tensor: bool) -> None:
    """Episodes of varied lengths per env (env e ends every 3 + e steps), some terminated,
    with a float info ``scale`` per step; every value from one seeded generator."""
    rng = np.random.default_rng(7)
    convert = torch.as_tensor if as_tensor else np.asarray
    obs = {k: rng.normal(size=(n_envs, *s.shape)).astype(np.float32) for k, s in SPACE.items()}
    for t in range(steps):
        nxt = {k: rng.normal(size=(n_envs, *s.shape)).astype(np.float32) for k, s in SPACE.items()}
        if discrete:
            action = rng.integers(0, 3, size=n_envs)
        else:
            action = rng.uniform(-1, 1, size=(n_envs, 2)).astype(np.float32)
        ends = np.array([(t + 1) % (3 + e) == 0 for e in range(n_envs)])
        terminated = ends & (rng.random(n_envs) < 0.3)
        truncated = ends & ~terminated
        scale = rng.uniform(0.5, 2.0, size=n_envs).astype(np.float32)
        buffer.add(
            {k: convert(v) for k, v in obs.items()},
            {k: convert(v) for k, v in nxt.items()},
            convert(action),
            convert(rng.normal(size=n_envs).astype(np.float32)),
            convert(terminated),
            convert(truncated),
            {"scale": convert(scale)},
        )
        obs = nxt


def digest(batch: Any) -> str:
    """sha256 over every field of a batch, in a fixed order."""
    h = hashlib.sha256()

    def put(value: Any) -> None:
        array = value.cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        h.update(str(array.dtype).encode() + str(array.shape).encode())
        h.update(np.ascontiguousarray(array).tobytes())

    for side in (batch.observations, batch.next_observations):
        for key in sorted(side):
            put(side[key])
    for value in (batch.actions, batch.rewards, batch.dones, batch.weights, batch.indices):
        put(value)
    return h.hexdigest()[:16]


def run(buffer: Any, prioritized: bool, rounds: int = 3) -> list[str]:
    """Digests of a few seeded batches; a prioritized buffer gets TD errors between them."""
    out = []
    for i in range(rounds):
        batch = buffer.sample(16)
        out.append(digest(batch))
        if prioritized:
            indices = batch.indices
            td = np.linspace(0.1, 2.0, 16, dtype=np.float32) * (i + 1)
            buffer.update_priorities(indices, td)
    return out


CASES = [
    # (n_envs, strategy, discrete, prioritized, handle_timeout, recompute terminated)
    (1, "future", False, False, True, False),
    (1, "final", True, False, False, False),
    (3, "episode", False, False, True, True),
    (3, "random", False, False, True, False),
    (3, "future", True, True, False, False),
    (1, "future", False, True, True, True),
]


def terminated_fn(achieved_goal: Any, desired_goal: Any, info: Any) -> Any:
    return ((achieved_goal - desired_goal) ** 2).sum(-1) < 1.0


def build(backend: str, case: tuple[Any, ...]) -> Any:
    n_envs, strategy, discrete, prioritized, handle_timeout, recompute = case
    kwargs = dict(
        n_envs=n_envs,
        n_sampled_goal=3,
        goal_selection_strategy=strategy,
        handle_timeout_termination=handle_timeout,
        info_keys=("scale",),
        compute_terminated=terminated_fn if recompute else None,
        seed=11,
        prioritized=prioritized,
    )
    actions = DISCRETE if discrete else BOX
    if backend == "numpy":
        buffer = HerReplayBuffer(60, SPACE, actions, reward, **kwargs)
    else:
        buffer = DeviceHerReplayBuffer(60, SPACE, actions, reward, device="cpu", **kwargs)
    # 40 steps per env wrap the ring (60 // n_envs rows per env for one env; 20 for three).
    fill(buffer, n_envs, 40, discrete, as_tensor=backend != "numpy")
    return buffer


NUMPY_PINNED: dict[int, list[str]] = {
    0: ["8da4833c6687ab9e", "bbafca7018be1698", "7fa90bde58a7edca"],
    1: ["f0ac49529860656d", "acd9b06a5271deff", "7306e9bde268882b"],
    2: ["711c9fec5a2ab5ba", "4fd20f1aadc3f3ef", "f7f4a462b24bc126"],
    3: ["7802bf7ae6720d39", "6a25965e82420e5d", "93f33ef2dc1afefa"],
    4: ["ea0766225b7f05fb", "284d77b067a20356", "7ae87bc6a28c1e24"],
    5: ["7f1fdedcae589a8d", "799355cfb05e3932", "8689df4f517fd43d"],
}
DEVICE_PINNED: dict[int, list[str]] = {
    0: ["2748c4752df82100", "e378e27235099e2b", "0272ceb5a7096c49"],
    1: ["88bbae68293504a0", "8f1cd1dfb834b60a", "ec409e6c5671e857"],
    2: ["8f50c3c09734920a", "bfae1f5114a10d3c", "5077beb19d3be416"],
    3: ["66fef12167da3446", "60d4487908a3d060", "dd734c55bd097010"],
    4: ["6f863f20bceddb29", "439dd7fe6e42b637", "5d814e813ff1035b"],
    5: ["24e4de77083de579", "958feb8193335ac3", "fab7e08dcfae3e4e"],
}


@pytest.mark.parametrize("case", range(len(CASES)))
def test_numpy_buffer_samples_stay_as_pinned(case: int) -> None:
    buffer = build("numpy", CASES[case])
    assert run(buffer, CASES[case][3]) == NUMPY_PINNED[case]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_device_buffer_samples_stay_as_pinned(case: int) -> None:
    buffer = build("cpu", CASES[case])
    assert run(buffer, CASES[case][3]) == DEVICE_PINNED[case]


# Files written by the buffers' earlier code: case -> file name.
SAVED = {4: "pinned_case4", 5: "pinned_case5"}
SAVED_NUMPY: dict[int, list[str]] = {
    4: ["fb826cbfaef03d0d", "a0483670777f0f50", "bba383539add1235"],
    5: ["3b5d98f6692d43be", "31ed8cc6e983d0ba", "98963d464a1feeb5"],
}
SAVED_DEVICE: dict[int, list[str]] = {
    4: ["f049b53d525e88d2", "153046d1eb4b5b77", "ab996c04cf829ebf"],
    5: ["240abf6e15d7b6c6", "6f55cbd23410ba87", "e9798bd0dd8511b4"],
}


@pytest.mark.parametrize("case", sorted(SAVED))
def test_numpy_files_saved_by_earlier_code_load_and_sample_as_pinned(case: int) -> None:
    recompute = CASES[case][5]
    buffer = HerReplayBuffer.load(
        DATA / f"{SAVED[case]}.npz", reward, terminated_fn if recompute else None
    )
    assert run(buffer, CASES[case][3]) == SAVED_NUMPY[case]


@pytest.mark.parametrize("case", sorted(SAVED))
def test_device_files_saved_by_earlier_code_load_and_sample_as_pinned(case: int) -> None:
    recompute = CASES[case][5]
    buffer = DeviceHerReplayBuffer.load(
        DATA / f"{SAVED[case]}.pt", reward, terminated_fn if recompute else None
    )
    assert run(buffer, CASES[case][3]) == SAVED_DEVICE[case]
