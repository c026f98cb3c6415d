"""Seeded samples of the buffer, pinned on numpy and on torch (each module's generator
draws its own numbers): any change in the draw order or the index arithmetic shows here.

The files under ``data/`` were written by the two buffers this one replaced (goalenvs
148f048 and earlier): they must keep loading, on either module, with the transitions they
held.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from gymnasium import spaces

from tests.her.model import assert_same_arrays, host_state, make, to_numpy

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
        reward = rng.normal(size=n_envs).astype(np.float32)
        args = (obs, nxt, action, reward, terminated, truncated, {"scale": scale})
        buffer.add(*[{k: convert(v) for k, v in a.items()} if isinstance(a, dict) else convert(a)
                     for a in args])  # fmt: skip
        obs = nxt


def digest(batch: Any) -> str:
    """sha256 over every field of a batch, in a fixed order."""
    h = hashlib.sha256()

    def put(value: Any) -> None:
        array = to_numpy(value)
        h.update(str(array.dtype).encode() + str(array.shape).encode())
        h.update(np.ascontiguousarray(array).tobytes())

    for side in (batch.observations, batch.next_observations):
        for key in sorted(side):
            put(side[key])
    for value in (batch.actions, batch.rewards, batch.dones, batch.indices):
        put(value)
    # The importance weights come from powers, whose last bit may differ between CPUs
    # (numpy picks SIMD kernels by CPU): pinned to 6 significant digits, not to the bit.
    weights = np.asarray(to_numpy(batch.weights), np.float64)
    h.update(np.array2string(weights, precision=6).encode())
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
    buffer = make(
        None if backend == "numpy" else backend, 60, reward, n_envs=n_envs, n_sampled_goal=3,
        goal_selection_strategy=strategy, handle_timeout_termination=handle_timeout,
        info_keys=("scale",), compute_terminated=terminated_fn if recompute else None,
        seed=11, prioritized=prioritized, observation_space=SPACE,
        action_space=DISCRETE if discrete else BOX,
    )  # fmt: skip
    # 40 steps per env wrap the ring (60 // n_envs rows per env for one env; 20 for three).
    fill(buffer, n_envs, 40, discrete, as_tensor=backend != "numpy")
    return buffer


# The seeded draws of the one buffer (numpy's Generator, torch's on the CPU).
PINNED: dict[str, dict[int, list[str]]] = {
    "numpy": {
        0: ["02167c055d018725", "63cd9a4882a3b216", "f28802ed10dc2572"],
        1: ["900bc404b6ca29d4", "4fa8e8fe01370afb", "f33cbdb1c820c599"],
        2: ["5f9f3913a7bc16ba", "79abfe696574cd12", "cdf7deae932b3365"],
        3: ["de5873d0da4251d5", "0bb6d5718be2a0ba", "6f375c1b0cdc3bc5"],
        4: ["2b6f725a72f10ab5", "72793bc20c0bbb2d", "071e0a6797875105"],
        5: ["c824216fe4f9026a", "32040894428526e3", "b15704623d16e0a7"],
    },
    "cpu": {
        0: ["fcc6af7396637f33", "1ad61704fc47073f", "d7cde7c3c3101f01"],
        1: ["03d1862075029a47", "6f9b38a64ecf4b85", "a9efc3fbaacf9b87"],
        2: ["91a52a2c82cfca7e", "ae40ef4fccd0ca57", "df933583ea4556ab"],
        3: ["e913efe42fb3e5b7", "e0e40891bb2d4a1e", "6fcceb1bff805300"],
        4: ["12dc6f5ecf449f53", "b61f86a57aeaf6ec", "7f885112c3f5574c"],
        5: ["f0597a9f2951efde", "d75506b73381d619", "ce191da49e1900cd"],
    },
}


@pytest.mark.parametrize("backend", ["numpy", "cpu"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_seeded_samples_stay_as_pinned(backend: str, case: int) -> None:
    buffer = build(backend, CASES[case])
    assert run(buffer, CASES[case][3]) == PINNED[backend][case]


# Files written by the two buffers this one replaced (goalenvs 148f048 and earlier): the
# numpy buffer's .npz and the device buffer's torch file, of cases 4 and 5 filled as above.
SAVED = {4: "pinned_case4", 5: "pinned_case5"}
# The transitions each held, sampleable: the numpy buffer's layout took a row more per
# episode than the device buffer's, so its file of case 4 holds fewer.
SAVED_TRANSITIONS = {(4, ".npz"): 44, (4, ".pt"): 59, (5, ".npz"): 40, (5, ".pt"): 40}


def rows_of(obs: Any, nxt: Any, action: Any) -> set[tuple[float, ...]]:
    """Each transition as (observation, next observation, action), rounded."""
    obs, nxt = to_numpy(obs["observation"]), to_numpy(nxt["observation"])
    actions = to_numpy(action).astype(np.float64).reshape(len(obs), -1)
    return {tuple(row) for row in np.round(np.concatenate([obs, nxt, actions], 1), 4).tolist()}


def transitions(batch: Any) -> set[tuple[float, ...]]:
    return rows_of(batch.observations, batch.next_observations, batch.actions)


def generated(case: tuple[Any, ...]) -> set[tuple[float, ...]]:
    """Every transition :func:`fill` adds for ``case``, as :func:`transitions` reads one."""
    rows: set[tuple[float, ...]] = set()
    recorder = SimpleNamespace(add=lambda *args: rows.update(rows_of(*args[:3])))
    fill(recorder, case[0], 40, case[2], as_tensor=False)
    return rows


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("suffix", [".npz", ".pt"])
@pytest.mark.parametrize("case", sorted(SAVED))
def test_files_of_the_replaced_buffers_load_with_their_transitions(
    case: int, suffix: str, device: str | None, tmp_path: Path
) -> None:
    recompute = terminated_fn if CASES[case][5] else None
    buffer = type(make(device, 20)).load(DATA / f"{SAVED[case]}{suffix}", reward, recompute,
                                        device=device)  # fmt: skip
    assert buffer.n_transitions == SAVED_TRANSITIONS[case, suffix]
    # 5,000 draws of a few dozen transitions: each one of them, and each one fill() added.
    drawn = transitions(buffer.sample(5000))
    assert len(drawn) == SAVED_TRANSITIONS[case, suffix]
    assert drawn <= generated(CASES[case])
    # Saved again, in the one file format, it loads on the other array module alike.
    again = tmp_path / "again.npz"
    buffer.save(again)
    other = None if device is not None else "cpu"
    moved = type(make(other, 20)).load(again, reward, recompute, device=other)
    assert transitions(moved.sample(5000)) == drawn


# Written by goalenvs 1a3bdcd, whose records held the float32 fields alone (the flags and
# episode starts were arrays of their own): a pickle of three buffers built and filled as
# build() does (their goal functions a placeholder of that code, set after the load), and
# the file the first one saved. Both read back as today's buffer filled alike.
PICKLED = [("numpy", 4), ("numpy", 5), ("cpu", 2)]


@pytest.mark.parametrize("key", PICKLED)
def test_buffers_pickled_before_the_flags_joined_the_records_load_as_they_were(
    key: tuple[str, int],
) -> None:
    import pickle

    with open(DATA / "buffers_1a3bdcd.pkl", "rb") as f:
        loaded = pickle.load(f)[key]
    backend, case = key
    loaded.compute_reward = reward
    loaded.compute_terminated = terminated_fn if CASES[case][5] else None
    fresh = build(backend, CASES[case])
    assert loaded.episodes_in_progress == fresh.episodes_in_progress == 1
    assert_same_arrays(host_state(loaded), host_state(fresh))
    assert run(loaded, CASES[case][3]) == PINNED[backend][case]
    # It goes on as today's buffer does, the episodes in progress included.
    fresh = build(backend, CASES[case])
    run(fresh, CASES[case][3])
    for buffer in (loaded, fresh):
        fill(buffer, CASES[case][0], 25, CASES[case][2], as_tensor=backend != "numpy")
    assert_same_arrays(host_state(loaded), host_state(fresh))


@pytest.mark.parametrize("device", [None, "cpu"])
def test_a_file_saved_before_the_flags_joined_the_records_loads_as_todays(
    device: str | None, tmp_path: Path
) -> None:
    face = type(make(device, 20))
    build("numpy", CASES[4]).save(tmp_path / "today.npz")
    old = face.load(DATA / "buffer_1a3bdcd.npz", reward, device=device)
    today = face.load(tmp_path / "today.npz", reward, device=device)
    assert_same_arrays(host_state(old), host_state(today))
    if device is not None:  # a numpy file brings no torch generator: each load seeds its own
        old.generator.manual_seed(0)
        today.generator.manual_seed(0)
    assert run(old, True) == run(today, True)
