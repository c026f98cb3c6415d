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
    for value in (batch.actions, batch.rewards, batch.dones, batch.indices):
        put(value)
    # The importance weights come from powers, whose last bit may differ between CPUs
    # (numpy picks SIMD kernels by CPU): pinned to 6 significant digits, not to the bit.
    weights = batch.weights
    weights = weights.cpu().numpy() if isinstance(weights, torch.Tensor) else weights
    h.update(np.array2string(np.asarray(weights, np.float64), precision=6).encode())
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
    0: ["0ff0b4cc0b23902c", "7230208466c7cfa2", "406c399607cae024"],
    1: ["adf237d59b6dcec1", "e524c306ce0bd7f8", "e389fa1373d210ec"],
    2: ["9889019ef3265da9", "e4b26308e99330cd", "f23ff5a1bcdf8e95"],
    3: ["841320e0acd8ca48", "91ad2296eaa76c98", "c4cf473b84e1181d"],
    4: ["df7b3a4423b92ac8", "d0453065d4f98169", "2ced28b4c5734da2"],
    5: ["a114300e539d2d25", "439c31e9ba9173c4", "cc326a316cbc60a1"],
}
DEVICE_PINNED: dict[int, list[str]] = {
    0: ["8599db9413519531", "670a4c4d197d3aa7", "ed04d4ac3471a8a7"],
    1: ["24095b13d8b41525", "609e18908dfa2b5f", "148a1edd26e259e7"],
    2: ["bf81437188d50aa5", "db045ff1f5d8557e", "24419b76b822b9f1"],
    3: ["55b92c7d1400f413", "2e672d330efef2d4", "c01f78877dee5535"],
    4: ["1893be62e5072e9f", "54cb7fec627996e8", "7b143f63bfd156a8"],
    5: ["3c339be0232581ee", "806ad781ff5621c6", "89a0567f20e90720"],
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
    4: ["08c69e1e32bd3e79", "a2292417c7c6de84", "47b3564a496c9eef"],
    5: ["45846a15da244aa2", "17776674127991b7", "559687377690e5db"],
}
SAVED_DEVICE: dict[int, list[str]] = {
    4: ["17b82e341d67bf14", "99a491b46302a8d0", "866bd807b2d4874b"],
    5: ["45c9606052a22c1e", "028f27862e9daa0c", "626db2839b783423"],
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
