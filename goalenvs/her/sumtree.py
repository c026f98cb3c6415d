"""The sum tree of proportional prioritized replay (Schaul et al. 2016), updated and
searched in batches, one numpy step per level. Node 1 is the root, the children of ``j``
are ``2j`` and ``2j + 1``, leaf ``i`` is node ``size + i`` (``size``: the capacity rounded
up to a power of two); inner sums are recomputed, never adjusted, so rounding never
accumulates."""

from __future__ import annotations

import numpy as np

__all__ = ["SumTree"]


class SumTree:
    """``capacity`` (>= 1) float64 leaves, all 0 at first."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)):
            raise TypeError(f"capacity must be an int, got {capacity!r}")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.depth = max(1, (self.capacity - 1).bit_length())
        self.size = 1 << self.depth
        self.nodes = np.zeros(2 * self.size, dtype=np.float64)

    @property
    def total(self) -> float:
        """The sum of all leaves."""
        return float(self.nodes[1])

    @property
    def leaves(self) -> np.ndarray:
        """A read-only view of the ``capacity`` leaves."""
        view = self.nodes[self.size : self.size + self.capacity]
        view.flags.writeable = False
        return view

    def update(self, indices: np.ndarray, values: np.ndarray | float) -> None:
        """Sets leaves ``indices`` to ``values`` (the last value wins for a repeated index)."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if indices.size == 0:
            return
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), indices.shape)
        if indices.min() < 0 or indices.max() >= self.capacity:
            raise IndexError(
                f"leaf indices must be in [0, {self.capacity}), "
                f"got {indices.min()}..{indices.max()}"
            )
        nodes = self.nodes
        node = indices + self.size
        nodes[node] = values
        # A parent listed twice gets the same sum twice (its children are final by then),
        # so no np.unique per level: that made the update 2-3x slower for batches of 256.
        for _ in range(self.depth):
            node >>= 1
            nodes[node] = nodes[2 * node] + nodes[2 * node + 1]

    def set_all(self, leaves: np.ndarray) -> None:
        """Replaces every leaf at once and rebuilds the inner nodes level by level."""
        leaves = np.asarray(leaves, dtype=np.float64)
        if leaves.shape != (self.capacity,):
            raise ValueError(f"leaves has shape {leaves.shape}, expected ({self.capacity},)")
        nodes = self.nodes
        nodes[self.size : self.size + self.capacity] = leaves
        nodes[self.size + self.capacity :] = 0.0
        lo = self.size
        while lo > 1:
            lo //= 2
            nodes[lo : 2 * lo] = nodes[2 * lo : 4 * lo : 2] + nodes[2 * lo + 1 : 4 * lo : 2]

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """The leaf whose prefix-sum interval holds each value of ``prefix`` (in [0, total)):
        never a leaf of 0 while the total is positive (rounding past a subtree's end stays
        in the last non-empty one)."""
        x = np.array(prefix, dtype=np.float64).reshape(-1)
        nodes = self.nodes
        node = np.ones(x.shape, dtype=np.int64)
        for _ in range(self.depth):
            left = 2 * node
            left_sum = nodes[left]
            right = (x >= left_sum) & (nodes[left + 1] > 0)
            x -= np.where(right, left_sum, 0.0)
            node = left + right
        return node - self.size
