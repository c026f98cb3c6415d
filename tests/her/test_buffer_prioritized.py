"""Prioritized HER (prioritized=True) and its sum tree, against slow models, on numpy and torch.

The sum tree is checked against a plain cumulative sum. The buffer is fed the tagged
episodes of model.py and checked against a reference that keeps one priority
per transition: a new one gets the largest priority seen so far, ``update_priorities``
sets ``|td| + eps``, only transitions of complete intact episodes are drawn, and a batch's
weights are ``(N * P(i)) ** -beta`` over their largest, ``P(i) = p_i ** alpha / sum_j``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from goalenvs.her.sumtree import SumTree
from tests.her.model import DEVICES, Feeder, goal_reward, make, on, to_numpy

EPS = 1e-6


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 70),
    updates=st.lists(
        st.lists(st.tuples(st.integers(0, 69), st.integers(0, 9)), min_size=1, max_size=12),
        min_size=1,
        max_size=8,
    ),
    draws=st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=30),
)
def test_sum_tree_matches_a_cumulative_sum(capacity, updates, draws) -> None:
    tree, leaves = SumTree(capacity), np.zeros(capacity)
    for batch in updates:
        indices = np.array([i % capacity for i, _ in batch])
        values = np.array([v for _, v in batch], float)  # integers: sums are exact
        tree.update(indices, values)
        for i, v in zip(indices, values, strict=True):  # the last value of an index wins
            leaves[i] = v
        np.testing.assert_array_equal(tree.leaves, leaves)
        assert tree.total == leaves.sum()
        if leaves.sum() > 0:
            x = np.array(draws) * leaves.sum()
            found = tree.find(x)
            np.testing.assert_array_equal(found, np.searchsorted(np.cumsum(leaves), x, "right"))
            assert (leaves[found] > 0).all()
    rebuilt = SumTree(capacity)
    rebuilt.set_all(leaves)
    np.testing.assert_array_equal(rebuilt.nodes, tree.nodes)


def test_sum_tree_edges_and_bad_arguments() -> None:
    tree = SumTree(5)
    tree.update(np.array([1, 3]), np.array([0.1, 0.2]))
    top = np.nextafter(tree.total, 0)  # never an empty leaf at the top of the range
    np.testing.assert_array_equal(tree.find(np.array([top, 0.0, 0.1, 0.0999999])), [3, 1, 3, 1])
    with pytest.raises(ValueError, match="capacity must be >= 1, got 0"):
        SumTree(0)
    with pytest.raises(IndexError, match=r"leaf indices must be in \[0, 4\)"):
        SumTree(4).update(np.array([4]), np.array([1.0]))


def check(feeder: Feeder, batch_size: int, alpha: float, beta: float) -> Any:
    """The buffer holds the feeder's priorities and draws a batch by them, weighted."""
    buffer, live = feeder.buffer, feeder.live()
    assert buffer.n_transitions == len(live)
    # Every row's draw weight (the sum tree's leaves on numpy, torch's masked rows):
    # p ** alpha on the live transitions, 0 on every other row.
    weights = to_numpy(buffer.priorities.weights()).reshape(-1)
    tags = to_numpy(buffer.state().fields["obs/observation"]).reshape(-1, 3).astype(int)
    held = {tuple(tags[i]): weights[i] for i in np.flatnonzero(weights)}
    assert set(held) == set(live)
    np.testing.assert_allclose([held[t] for t in live], [p**alpha for p in live.values()])
    total = sum(p**alpha for p in live.values())
    batch = buffer.sample(batch_size)
    drawn = to_numpy(batch.observations["observation"]).astype(int)
    np.testing.assert_array_equal(tags[to_numpy(batch.indices)], drawn)
    p = np.array([live[tuple(t)] for t in drawn.tolist()]) ** alpha
    np.testing.assert_allclose(
        to_numpy(buffer.state().priorities).reshape(-1)[to_numpy(batch.indices)], p
    )
    want = (len(live) * p / total) ** -beta
    got = to_numpy(batch.weights)
    np.testing.assert_allclose(got, want / want.max(), rtol=1e-5)
    assert got.dtype == np.float32 and got.max() == 1.0
    return batch


@settings(max_examples=50, deadline=None)
@given(
    device=st.sampled_from([None, "cpu"]),
    n_envs=st.integers(1, 3),
    rows=st.integers(6, 24),
    lengths=st.lists(st.integers(1, 5), min_size=1, max_size=6),
    alpha=st.sampled_from([0.0, 0.6, 1.0]),
    beta=st.sampled_from([0.0, 0.4, 1.0]),
    ops=st.lists(st.sampled_from(["add"] * 5 + ["update", "save"]), min_size=10, max_size=80),
    seed=st.integers(0, 2**16),
)
def test_priorities_follow_the_reference_as_the_ring_wraps(
    device, n_envs, rows, lengths, alpha, beta, ops, seed, tmp_path_factory
) -> None:
    buffer = make(device, rows * n_envs, n_envs=n_envs, seed=seed, prioritized=True,
                  alpha=alpha, beta=beta, priority_eps=EPS)  # fmt: skip
    feeder, rng = Feeder(buffer, lengths), np.random.default_rng(seed)
    for op in [*ops, "add"]:
        if op == "add":
            feeder.add()
        elif feeder.live() and op == "update":
            batch = check(feeder, 16, alpha, beta)
            td = rng.normal(size=16) * rng.choice([0.01, 1.0, 100.0])
            buffer.update_priorities(batch.indices, on(buffer, td))
            feeder.update(to_numpy(batch.observations["observation"]), td, EPS)
        elif op == "save":  # the file keeps the priorities (the live buffer goes on)
            path = tmp_path_factory.mktemp("prioritized") / "buffer.npz"
            buffer.save(path)
            loaded = type(buffer).load(path, goal_reward)
            assert (loaded.prioritized, loaded.alpha, loaded.beta) == (True, alpha, beta)
            assert loaded.state().max_priority == buffer.state().max_priority
            if buffer.episodes_in_progress == 0:
                np.testing.assert_array_equal(
                    to_numpy(loaded.priorities.weights()), to_numpy(buffer.priorities.weights())
                )
        if feeder.live():
            check(feeder, 32, alpha, beta)


@pytest.mark.parametrize("device", DEVICES)
def test_draws_follow_the_priorities_set_through_torch_batches(device: Any) -> None:
    # Two 1-step episodes then priorities 1 : 3 (alpha 1): draws 1/4 : 3/4, weights 1 : 1/3.
    buffer = make(device, 20, seed=0, prioritized=True, alpha=1.0, beta=1.0)
    Feeder(buffer, [1]).add(2)
    batch = buffer.sample(50, device=device or "cpu")  # a batch handed to torch
    assert batch.weights.dtype == torch.float32 and batch.indices.dtype == torch.int64
    episode = to_numpy(batch.observations["observation"])[:, 1].astype(int)
    first = {m: i for m, i in zip(episode, batch.indices, strict=True)}
    indices = torch.stack([first[0], first[1]])
    td = torch.tensor([[1.0], [-3.0]], device=indices.device)  # a critic's (B, 1) output
    buffer.update_priorities(indices, td)
    raw = to_numpy(buffer.state().priorities).reshape(-1)[to_numpy(indices)]
    np.testing.assert_allclose(raw, np.array([1.0, 3.0]) + buffer.priority_eps)
    n = 40_000
    batch = buffer.sample(n)
    episode, weights = to_numpy(batch.observations["observation"])[:, 1], to_numpy(batch.weights)
    assert abs((episode == 1).mean() - 0.75) <= 5 * np.sqrt(0.75 * 0.25 / n)
    np.testing.assert_allclose(weights[episode == 1], 1 / 3, rtol=1e-5)
    np.testing.assert_array_equal(weights[episode == 0], 1.0)
