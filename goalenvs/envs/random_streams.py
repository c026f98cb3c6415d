"""Per-sub-env streams of uniform numbers, drawn ahead in blocks for the native vector envs.

A vector env that resets a few of its N sub-envs every step would otherwise call each
sub-env's generator in a Python loop on every reset; here each generator fills a row of a
buffer a block at a time and resets read their numbers with one fancy index.

The numbers a stream hands out are exactly ``rng.random(k1)``, ``rng.random(k2)``, ...
concatenated, whatever the block size: numpy's float64 ``random`` consumes one 64-bit word
per number and keeps no cache, so ``rng.random(a)`` followed by ``rng.random(b)`` equals
``rng.random(a + b)``. A single env that draws ``self.np_random.random(k)`` therefore sees
the same numbers as sub-env ``i`` of a vector env whose generator was seeded alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

# Ahead-of-time numbers held for all streams together (float64): 8 MiB.
_BUFFER_BUDGET = 1 << 20

# ``take(rows, count)``: ``count`` uniforms for each of ``rows`` (indices into a batch;
# None: every member of the batch, in order).
TakeUniforms = Callable[[np.ndarray | None, int], np.ndarray]


class UniformStreams:
    """One buffered stream of uniform ``[0, 1)`` float64 numbers per sub-env.

    Args:
        size: the number of streams (sub-envs).

    A stream belongs to the generator object that filled it: when a sub-env's generator
    has been replaced (``reset(seed=...)``; the env then calls :meth:`generators_changed`),
    its stream is emptied and restarts from the new one.
    """

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._buffer = np.empty((self.size, 0))
        # The unread numbers of stream i are flat[pos[i]:end[i]] of the flattened buffer,
        # kept at the end of row i; flat positions spare a row offset on every take.
        self._pos = np.zeros(self.size, dtype=np.int64)
        self._end = np.zeros(self.size, dtype=np.int64)
        self._windows: dict[int, np.ndarray] = {}
        self._owners: list[np.random.Generator | None] = [None] * self.size
        self._check_owners = True

    def generators_changed(self) -> None:
        """Says that some generators may have been replaced: the next take checks them all.

        Checking on every take would cost a Python loop over the resetting sub-envs; a
        vector env replaces generators only in a seeded ``reset``.
        """
        self._check_owners = True

    def take(
        self, rngs: Sequence[np.random.Generator], index: np.ndarray, count: int
    ) -> np.ndarray:
        """The next ``count`` numbers of each stream in ``index`` (unique), shape (len, count)."""
        if self._check_owners:
            for i, rng in enumerate(rngs):
                if rng is not self._owners[i]:
                    self._owners[i] = rng
                    self._pos[i] = self._end[i]
            self._check_owners = False
        if count > self._buffer.shape[1]:
            self._grow(max(count, min(64 * count, _BUFFER_BUDGET // self.size)))
        pos = self._pos[index]
        after = pos + count
        short = after > self._end[index]
        if np.count_nonzero(short):
            for i in index[short].tolist():
                self._refill(i)
            pos = self._pos[index]
            after = pos + count
        self._pos[index] = after
        # Row p of the window view is flat[p:p + count]: one row gather reads every
        # stream's numbers (an index grid pos[:, None] + arange would cost more).
        windows = self._windows.get(count)
        if windows is None:
            flat = self._buffer.reshape(-1)
            windows = self._windows[count] = np.lib.stride_tricks.sliding_window_view(flat, count)
        return windows[pos]

    def _refill(self, i: int) -> None:
        width = self._buffer.shape[1]
        left = int(self._end[i] - self._pos[i])
        row = self._buffer[i]
        row[:left] = row[width - left :]
        row[left:] = self._owners[i].random(width - left)
        self._pos[i] = self._end[i] - width

    def _grow(self, width: int) -> None:
        old = self._buffer.shape[1]
        unread = self._end - self._pos
        buffer = np.empty((self.size, width))
        buffer[:, width - old :] = self._buffer
        self._buffer = buffer
        self._windows.clear()
        self._end = (np.arange(self.size) + 1) * width
        self._pos = self._end - unread

    def taker(self, rngs: Sequence[np.random.Generator], index: np.ndarray) -> TakeUniforms:
        """A ``take(rows, count)`` function over the streams ``index[rows]``."""
        index = np.asarray(index, dtype=np.int64)
        return lambda rows, count: self.take(rngs, index if rows is None else index[rows], count)


def generator_taker(rng: np.random.Generator) -> TakeUniforms:
    """``take(rows, count)`` for a single env: one stream, read straight from ``rng``."""
    return lambda rows, count: rng.random((1 if rows is None else len(rows), count))
