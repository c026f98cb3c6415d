"""Bit flipping (Andrychowicz et al. 2017, "Hindsight Experience Replay", section 3.1).

Three parts, in this order: the batched numpy kernel, :class:`BitFlippingEnv` (one env),
:class:`BitFlippingVectorEnv` (N envs in one numpy call, the ids' ``vector_entry_point``).
Both faces step with :func:`flip_bits`. The single env draws its episodes with
:func:`draw_episodes`; the vector env reads the same random words as bit chunks read
ahead in blocks (:class:`BitChunks`), which draw identical episodes at a fraction of the
cost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    InfoLike,
    check_action,
    check_goal_option,
    check_positive,
    goal_arrays,
    goal_dict_space,
)
from goalenvs.envs.canvas import Canvas, hud_line, import_pygame

# ``take(rows, count)``: ``count`` random 64-bit words for each of ``rows`` (indices into
# a batch; None: every member of the batch, in order), consecutive outputs of each
# episode's own bit generator.
TakeWords = Callable[[np.ndarray | None, int], np.ndarray]

# --------------------------------------------------------------------------- kernel


def words_per_chunk(n_bits: int) -> int:
    """Random 64-bit words per ``n_bits``-bit pattern (a chunk)."""
    return -(-n_bits // 64)


def chunk_bits(words: np.ndarray, n_bits: int) -> np.ndarray:
    """The chunks spelled by random words: float32 bits of shape (..., k, n_bits) from
    words (..., k * words_per_chunk(n_bits)); bit b of a chunk is bit b % 64 of its
    (b // 64)-th word."""
    per = words_per_chunk(n_bits)
    # Little-endian bytes, each unpacked low bit first: bit b of a word is byte b // 8's
    # bit b % 8, in one table-driven pass instead of a shift per bit.
    octets = np.ascontiguousarray(words, dtype="<u8").view(np.uint8)
    bits = np.unpackbits(octets, axis=-1, bitorder="little")
    bits = bits.reshape(*words.shape[:-1], -1, per * 64)[..., :n_bits]
    return bits.astype(np.float32)


def generator_words(rng: np.random.Generator) -> TakeWords:
    """``take(rows, count)`` for a single env: words read straight from ``rng``."""
    return lambda rows, count: rng.bit_generator.random_raw(
        (1 if rows is None else len(rows), count)
    )


def draw_episodes(
    take: TakeWords, batch: int, n_bits: int, fixed_goal: bool, goal: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Draws ``batch`` episodes: ``(start, goal)`` float32 bit arrays of shape (batch, n_bits).

    ``take(rows, count)`` returns ``count`` random words for each episode in ``rows``
    (None: all of them); every bit pattern is one chunk of words (:func:`chunk_bits`).
    Each episode reads only its own generator, so how episodes are batched never
    changes them.
    The goal is ``goal`` when given (one or one per episode), else all ones when
    ``fixed_goal``, else uniform; the start is uniform. A start equal to its goal (an
    episode solved before it begins) is redrawn: the start when the goal is fixed or
    given, else the goal.
    """
    random_goal = goal is None and not fixed_goal
    per = words_per_chunk(n_bits)
    if random_goal:
        chunks = chunk_bits(take(None, 2 * per), n_bits)
        start = np.ascontiguousarray(chunks[:, 0])
        target = np.ascontiguousarray(chunks[:, 1])
    else:
        start = chunk_bits(take(None, per), n_bits)[:, 0]
        target = np.empty_like(start)
        target[:] = 1.0 if goal is None else goal
    redrawn = target if random_goal else start
    same = bits_match(start, target)
    while np.count_nonzero(same):
        rows_again = same.nonzero()[0]
        redrawn[rows_again] = chunk_bits(take(rows_again, per), n_bits)[:, 0]
        same[rows_again] = bits_match(start[rows_again], target[rows_again])
    return start, target


def flip_bits(state: np.ndarray, action: np.ndarray, continuous: bool) -> None:
    """Flips bits in place. ``state`` is a C-contiguous (batch, n_bits) array.

    Discrete: ``action`` (batch,) holds the index of the bit to flip. Continuous:
    ``action`` (batch, n_bits) flips every bit whose value is > 0.
    """
    if continuous:
        np.subtract(1.0, state, out=state, where=action > 0)
    elif state.shape[0] == 1:
        # One env: scalar indexing costs a fraction of a fancy index.
        bit = int(action[0])
        state[0, bit] = 1.0 - state[0, bit]
    else:
        # Indexing the flat view is about twice as fast as a (rows, columns) fancy index.
        flat = state.reshape(-1)
        index = np.arange(0, state.size, state.shape[1]) + action
        flat[index] = 1.0 - flat[index]


def bits_match(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
    """Success: every bit exactly equal. Bool array of the goals' leading shape."""
    mismatch = np.not_equal(achieved_goal, desired_goal)
    n_bits = mismatch.shape[-1]
    if mismatch.size <= 32 * n_bits:
        return ~mismatch.any(axis=-1)
    # Over many rows, counting mismatches with a dot product beats any(axis=-1), which
    # numpy reduces row by row; float32 counts are exact up to 2**24 bits.
    return (mismatch.astype(np.float32) @ np.ones(n_bits, np.float32)) == 0


def sparse_reward(success: np.ndarray) -> np.ndarray:
    """0 on success, -1 otherwise (float32)."""
    return np.subtract(success, np.float32(1.0), dtype=np.float32)


# --------------------------------------------------------------------------- bit chunks


def bit_items(bits: np.ndarray) -> np.ndarray:
    """A view of a C-contiguous (..., n_bits) array with each row as one opaque item.

    numpy copies a gathered or scattered item with one memcpy, where indexing the rows of
    a 2-D array walks each row as a sub-array: several times faster for short rows.
    """
    row = np.dtype((np.void, bits.shape[-1] * bits.itemsize))
    return bits.view(row)[..., 0]


# Chunks read ahead for all sub-envs together (float32 cells): 8 MiB.
_CHUNK_BUDGET = 1 << 21


class BitChunks:
    """Each sub-env's random words, read ahead as ``n_bits``-bit chunks.

    Every draw of :func:`draw_episodes` reads one chunk of words at a time
    (:func:`chunk_bits`): a start, a goal and each redraw is one chunk, in generator
    order. This converts each generator's words into chunks a block at a time and
    keeps, per chunk, its difference (:meth:`difference`) from the next one (a random
    goal from its start; 0: redraw) or from all ones (a start from the fixed goal). An
    episode is then a gather of two neighbouring chunks plus one difference lookup, and
    drawing episodes from the chunks in order gives exactly what :func:`draw_episodes`
    gives from the generator.

    Args:
        size: the number of sub-envs.
        n_bits: the chunk length.
        pairs: differences from the next chunk (random goals), else from all ones (the
            fixed goal).

    A difference is the XOR of the two chunks' codes (the integers their bits spell)
    while ``n_bits <= 53`` (``codes``: exact through float64), else the number of
    differing bits; either is 0 exactly when the chunks are equal.

    Row ``i``'s region is ``items3[i]`` (``capacity`` chunks); its unread chunks are
    ``items[next[i]:end[i]]``, always ending at the region's end. ``items`` views each
    chunk as one opaque item (:func:`bit_items`).
    """

    def __init__(self, size: int, n_bits: int, pairs: bool) -> None:
        self.size, self.n_bits = int(size), int(n_bits)
        self.pairs = pairs
        self.capacity = max(8, min(512, _CHUNK_BUDGET // (self.size * self.n_bits)))
        # A refill tops up the rows with fewer than ``low`` chunks: their unread chunks
        # move to just before the region's middle and new ones fill the second half.
        self.low = self.capacity // 2
        self.chunks = np.zeros((self.size * self.capacity, self.n_bits), np.float32)
        self.items = bit_items(self.chunks)
        self.items3 = self.items.reshape(self.size, self.capacity)
        # Chunk p's difference from chunk p + 1 when ``pairs``, else from all ones.
        self.differs = np.zeros(self.size * self.capacity, np.int64)
        self.end = (np.arange(self.size, dtype=np.int64) + 1) * self.capacity
        self.next = self.end.copy()
        self._owners: list[np.random.Generator | None] = [None] * self.size
        self.codes = self.n_bits <= 53
        self.words = words_per_chunk(self.n_bits)
        self.weights = 2.0 ** np.arange(self.n_bits) if self.codes else np.ones(self.n_bits)
        # Each chunk's code, moved with it, when differences are code XORs.
        self._codes = np.zeros(self.size * self.capacity if self.codes else 0, np.int64)

    def difference(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The difference of bit arrays ``a`` and ``b`` (last axis), as kept per chunk."""
        return (np.not_equal(a, b) @ self.weights).astype(np.int64)

    def forget_replaced(self, rngs: list[np.random.Generator]) -> None:
        """Drops the chunks of every row whose generator was replaced (a seeded reset)."""
        for i, rng in enumerate(rngs):
            if rng is not self._owners[i]:
                self._owners[i] = rng
                self.next[i] = self.end[i]

    def min_left(self) -> int:
        """The fewest unread chunks of any row."""
        return int((self.end - self.next).min())

    def refill_low(self, rngs: list[np.random.Generator]) -> None:
        """Tops up every row holding fewer than ``low`` chunks."""
        rows = np.flatnonzero(self.end - self.next < self.low)
        if len(rows):
            self.refill(rngs, rows)

    def refill(self, rngs: list[np.random.Generator], rows: np.ndarray) -> None:
        """Keeps the unread chunks of ``rows`` (fewer than ``low`` each) and reads
        ``capacity - low`` new ones from their generators."""
        cap, low, n = self.capacity, self.low, self.n_bits
        self.items3[rows, :low] = self.items3[rows, cap - low :]
        # One call per row per refill, amortized over ``capacity - low`` chunks: raw
        # words come out of a bit generator in the same order however they are batched.
        words = np.empty((len(rows), (cap - low) * self.words), np.uint64)
        for row, i in zip(words, rows.tolist(), strict=True):
            row[:] = rngs[i].bit_generator.random_raw(len(row))
        bits = chunk_bits(words, n)
        self.items3[rows, low:] = bit_items(bits)
        self.next[rows] += low - cap
        # Differences only for the new chunks (the kept ones moved with theirs).
        differs = self.differs.reshape(self.size, cap)
        differs[rows, : low - 1] = differs[rows, cap - low : cap - 1]
        if not self.pairs:
            differs[rows, low - 1] = differs[rows, cap - 1]
            differs[rows, low:] = self.difference(bits, 1.0)
        elif self.codes:
            # XOR of neighbouring codes instead of comparing every bit of every pair.
            codes = self._codes.reshape(self.size, cap)
            codes[rows, :low] = codes[rows, cap - low :]
            # A chunk of at most 53 bits is one word's low bits: its code is the word masked.
            codes[rows, low:] = (words & np.uint64((1 << n) - 1)).view(np.int64)
            run = codes[rows, low - 1 :]
            differs[rows, low - 1 : cap - 1] = run[:, :-1] ^ run[:, 1:]
        else:
            last_kept = self.chunks.reshape(self.size, cap, n)[rows, low - 1]
            run = np.concatenate([last_kept[:, None], bits], axis=1)
            differs[rows, low - 1 : cap - 1] = self.difference(run[:, :-1], run[:, 1:])

    def read_until_differs(
        self,
        rngs: list[np.random.Generator],
        row: int,
        other: np.ndarray,
    ) -> np.ndarray:
        """The next chunk of ``row`` that differs from ``other``, reading past equal ones:
        a redraw of :func:`draw_episodes`."""
        while True:
            if self.next[row] == self.end[row]:
                self.refill(rngs, np.array([row]))
            chunk = self.chunks[self.next[row]]
            self.next[row] += 1
            if not np.array_equal(chunk, other):
                return chunk


# --------------------------------------------------------------------------- rendering

_STATE_ON, _STATE_OFF = (40, 90, 200), (220, 226, 240)
_GOAL_ON, _GOAL_OFF = (30, 150, 70), (220, 240, 226)
_MISMATCH = (220, 40, 40)
_TEXT = (30, 30, 30)


class _Layout:
    """Pixel geometry of the two rows of cells: the state over the goal."""

    hud = 26  # heads-up text above the cells
    label = 48  # row names left of the cells
    margin = 8
    gap = 10

    def __init__(self, n_bits: int) -> None:
        self.n_bits = n_bits
        self.cell = int(np.clip(640 // n_bits, 8, 48))
        self.width = max(self.label + n_bits * self.cell + self.margin, 300)
        self.height = self.hud + 2 * self.cell + self.gap + self.margin
        self.left = self.label
        self.tops = (self.hud, self.hud + self.cell + self.gap)

    def cell_rect(self, bit: int, row: int) -> tuple[int, int, int, int]:
        return (self.left + bit * self.cell, self.tops[row], self.cell, self.cell)

    def bit_at(self, column: int, row: int) -> int | None:
        bit = (column - self.left) // self.cell
        if not 0 <= bit < self.n_bits or column < self.left:
            return None
        if any(top <= row < top + self.cell for top in self.tops):
            return int(bit)
        return None


def _draw_bits(
    canvas: Canvas,
    layout: _Layout,
    state: np.ndarray,
    goal: np.ndarray,
    hud: str,
) -> None:
    pg = canvas.pygame
    canvas.clear()
    canvas.text(hud, (layout.margin, 6), _TEXT, 20)
    for row, (name, bits, on, off) in enumerate(
        (("state", state, _STATE_ON, _STATE_OFF), ("goal", goal, _GOAL_ON, _GOAL_OFF))
    ):
        canvas.text(name, (4, layout.tops[row] + layout.cell // 2 - 6), _TEXT, 18)
        for bit in range(layout.n_bits):
            rect = layout.cell_rect(bit, row)
            pg.draw.rect(canvas.surface, on if bits[bit] > 0.5 else off, rect)
            pg.draw.rect(canvas.surface, (255, 255, 255), rect, 1)
            if row == 0 and state[bit] != goal[bit]:
                border = max(2, layout.cell // 10)
                pg.draw.rect(canvas.surface, _MISMATCH, rect, border)


# --------------------------------------------------------------------------- single env


def _check_n_bits(n_bits: Any) -> int:
    check_positive("n_bits", n_bits, integer=True)
    return int(n_bits)


def _check_bit_goal(goal: np.ndarray) -> np.ndarray:
    if not np.isin(goal, (0.0, 1.0)).all():
        raise ValueError(f"options['goal']={goal.tolist()} must hold only bits (0 or 1)")
    return goal


class _BitFlippingGoals:
    """The goal functions of both faces, defined once (they read ``self.n_bits``)."""

    n_bits: int

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """0 where every bit matches, else -1 (float32, the goals' leading shape)."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, self.n_bits)
        return sparse_reward(bits_match(achieved, desired))

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True where every bit matches (bool, the goals' leading shape)."""
        _, achieved, desired = goal_arrays(achieved_goal, desired_goal, self.n_bits)
        return bits_match(achieved, desired)


class BitFlippingEnv(_BitFlippingGoals, GoalEnv):
    """Flip bits until the state matches the goal pattern: the HER paper's bit flipping.

    ## Description

    A state of ``n_bits`` bits and a goal pattern of ``n_bits`` bits. Each step flips
    bits; the episode succeeds when the state equals the goal. With a random goal the
    reward is almost never seen without Hindsight Experience Replay once ``n_bits``
    exceeds about 15 (Andrychowicz et al. 2017), which makes this the smallest test of a
    HER implementation. ``goalenvs/BitFlipping-v0`` has discrete actions,
    ``goalenvs/BitFlippingContinuous-v0`` continuous ones.

    ## Action Space

    - discrete (default): ``Discrete(n_bits)``, the index of the one bit to flip;
    - ``continuous=True``: ``Box(-1, 1, (n_bits,), float32)``, every bit whose action is
      > 0 flips (so one step may flip several bits, or none).

    Finite continuous actions outside [-1, 1] are clipped (which does not change which
    bits flip); NaN or inf, a wrong shape or dtype, and a discrete action outside
    ``[0, n_bits)`` raise an error naming the action and the space.

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, each ``Box(0, 1, (n_bits,),
    float32)`` holding 0.0 or 1.0:

    | Key           | Index | Meaning       | Min | Max |
    |---------------|-------|---------------|-----|-----|
    | observation   | i     | state bit i   | 0   | 1   |
    | achieved_goal | i     | state bit i   | 0   | 1   |
    | desired_goal  | i     | goal bit i    | 0   | 1   |

    Float32 boxes rather than ``MultiBinary``: networks, HER buffers and normalizers
    consume them as they are, and a goal that HER substitutes is the same dtype as the
    one it replaces.

    ## Goal

    The desired goal is a bit pattern drawn uniformly at random, different from the start
    (the paper's setting), or all ones with ``fixed_goal=True`` (stable-baselines3's
    ``BitFlippingEnv``), or the pattern passed as ``reset(options={"goal": bits})``.

    ## Success

    ``info["is_success"]`` is True when every bit of ``achieved_goal`` equals
    ``desired_goal``.

    ## Rewards

    Sparse: 0 on success, -1 otherwise, from :meth:`compute_reward`.

    ## Starting State

    Uniformly random bits, redrawn while they equal the goal.

    ## Episode End

    - Termination: success.
    - Truncation: after ``max_episode_steps`` steps (default ``n_bits``, the paper's
      horizon). The env counts its own steps: the ids are registered without a
      ``TimeLimit`` so that ``gym.make(id, n_bits=50)`` gives 50-step episodes.
      ``gym.make(id, max_episode_steps=k)`` is gymnasium's own argument: it adds a
      ``TimeLimit(k)``, which can shorten episodes but not lengthen them past
      ``n_bits``; for longer ones construct ``BitFlippingEnv(max_episode_steps=k)`` or
      pass it to ``gym.make_vec``.

    ## Arguments

    - ``n_bits`` (int, 10): number of bits, >= 1.
    - ``continuous`` (bool, False): Box actions instead of Discrete.
    - ``fixed_goal`` (bool, False): always the all-ones goal.
    - ``max_episode_steps`` (int | None, None): episode length; None means ``n_bits``.
    - ``render_mode`` (None, "human", "rgb_array"): two rows of cells, the state over the
      goal, mismatched state bits outlined in red, and the step, reward and success.

    ## Version History

    - v0: initial version.
    """

    metadata: dict[str, Any] = {"render_modes": ["human", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        n_bits: int = 10,
        continuous: bool = False,
        fixed_goal: bool = False,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.n_bits = _check_n_bits(n_bits)
        self.continuous = bool(continuous)
        self.fixed_goal = bool(fixed_goal)
        if max_episode_steps is not None:
            check_positive("max_episode_steps", max_episode_steps, integer=True)
        self.max_episode_steps = self.n_bits if max_episode_steps is None else max_episode_steps
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode={render_mode!r} is not valid; expected one of "
                f"{self.metadata['render_modes']} or None"
            )
        self.render_mode = render_mode
        bits = spaces.Box(0.0, 1.0, (self.n_bits,), np.float32)
        self.observation_space = goal_dict_space(bits, bits)
        self.action_space: spaces.Space = (
            spaces.Box(-1.0, 1.0, (self.n_bits,), np.float32)
            if self.continuous
            else spaces.Discrete(self.n_bits)
        )
        self._state = np.zeros((1, self.n_bits), np.float32)
        self._goal = np.zeros((1, self.n_bits), np.float32)
        self._elapsed = 0
        self._last_reward: float | None = None
        self._has_reset = False
        self._layout = _Layout(self.n_bits)
        self._canvas: Canvas | None = None

    # ---- gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Draws a new start and goal; ``options={"goal": bits}`` pins the goal."""
        super().reset(seed=seed)
        goal = None
        if options is not None and options.get("goal") is not None:
            goal = _check_bit_goal(
                check_goal_option(options["goal"], self.observation_space["desired_goal"])
            )
        self._state, self._goal = draw_episodes(
            generator_words(self.np_random), 1, self.n_bits, self.fixed_goal, goal
        )
        self._elapsed = 0
        self._last_reward = None
        self._has_reset = True
        if self.render_mode == "human":
            self.render()
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Flips the chosen bit(s); see the class docstring for rewards and episode ends."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        action = check_action(action, self.action_space)
        flip_bits(self._state, action[None], self.continuous)
        self._elapsed += 1
        matched = bits_match(self._state, self._goal)
        success = bool(matched[0])
        reward = float(sparse_reward(matched)[0])
        self._last_reward = reward
        if self.render_mode == "human":
            self.render()
        return (
            self._obs(),
            reward,
            success,
            self._elapsed >= self.max_episode_steps,
            {"is_success": success},
        )

    def _obs(self) -> dict[str, np.ndarray]:
        state = self._state[0]
        return {
            "observation": state.copy(),
            "achieved_goal": state.copy(),
            "desired_goal": self._goal[0].copy(),
        }

    # ---- rendering and play
    def render(self) -> np.ndarray | None:
        """Draws the state over the goal; returns the frame in ``rgb_array`` mode."""
        if self.render_mode is None:
            return None
        if self._canvas is None:
            self._canvas = _make_canvas(self._layout)
        state, goal = self._state[0], self._goal[0]
        success = bool(bits_match(state, goal)) and self._has_reset
        _draw_bits(
            self._canvas,
            self._layout,
            state,
            goal,
            hud_line(self._elapsed, self._last_reward, success),
        )
        if self.render_mode == "human":
            self._canvas.show(self.metadata["render_fps"])
            return None
        return self._canvas.rgb_array()

    def close(self) -> None:
        """Closes the human window, if one is open."""
        if self._canvas is not None:
            self._canvas.close()
            self._canvas = None

    def bit_at_pixel(self, column: int, row: int) -> int | None:
        """The bit whose cell (state or goal row) holds the frame pixel, or None.

        Lets keyboard-and-mouse play flip a bit by clicking it.
        """
        return self._layout.bit_at(int(column), int(row))

    def cell_pixel(self, bit: int, goal: bool = False) -> tuple[int, int]:
        """The frame pixel ``(column, row)`` at the centre of a bit's cell."""
        left, top, size, _ = self._layout.cell_rect(bit, 1 if goal else 0)
        return left + size // 2, top + size // 2

    def get_keys_to_action(self) -> dict[tuple[int, ...], Any]:
        """Keys for ``gymnasium.utils.play.play``: 1..9, 0 flip bits 0..9, then a, b, c, ...

        Bits past the 36th have no key (click them: :meth:`bit_at_pixel`). Continuous
        actions are float32 vectors (+1 on the bit, -1 elsewhere); their no-op is
        ``np.zeros(n_bits, np.float32)``. Discrete actions have no no-op.
        """
        keys = "1234567890abcdefghijklmnopqrstuvwxyz"
        mapping: dict[tuple[int, ...], Any] = {}
        for bit, key in zip(range(self.n_bits), keys, strict=False):
            if self.continuous:
                action = np.full(self.n_bits, -1.0, np.float32)
                action[bit] = 1.0
                mapping[(ord(key),)] = action
            else:
                mapping[(ord(key),)] = bit
        return mapping


def _make_canvas(layout: _Layout) -> Canvas:
    import_pygame()
    # World units are pixels (y up), so the layout's pixel rectangles draw as they are.
    return Canvas(
        (layout.width, layout.height),
        (0, layout.width, 0, layout.height),
        background=(250, 250, 250),
        title="goalenvs BitFlipping",
    )


# --------------------------------------------------------------------------- vector env


class BitFlippingVectorEnv(_BitFlippingGoals, GoalVectorEnv):
    """``num_envs`` bit flipping envs stepped in one numpy call.

    Sub-env ``i`` follows :class:`BitFlippingEnv` exactly (same kernel, same draws): a
    vector env reset with ``seed=s`` and given actions reproduces the single envs reset
    with ``s + i`` and given the same actions. Same arguments as :class:`BitFlippingEnv`,
    plus ``num_envs`` and gymnasium's ``autoreset_mode`` (``next_step`` by default,
    ``same_step`` or ``disabled``); ``max_episode_steps`` None means ``n_bits``.
    ``render_mode="rgb_array"`` draws sub-env 0.
    """

    metadata: dict[str, Any] = {
        "render_modes": ["rgb_array"],
        "render_fps": BitFlippingEnv.metadata["render_fps"],
        "autoreset_mode": None,
    }

    def __init__(
        self,
        num_envs: int = 1,
        n_bits: int = 10,
        continuous: bool = False,
        fixed_goal: bool = False,
        max_episode_steps: int | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ) -> None:
        self.n_bits = _check_n_bits(n_bits)
        self.continuous = bool(continuous)
        self.fixed_goal = bool(fixed_goal)
        bits = spaces.Box(0.0, 1.0, (self.n_bits,), np.float32)
        action_space: spaces.Space = (
            spaces.Box(-1.0, 1.0, (self.n_bits,), np.float32)
            if self.continuous
            else spaces.Discrete(self.n_bits)
        )
        super().__init__(
            num_envs,
            goal_dict_space(bits, bits),
            action_space,
            self.n_bits if max_episode_steps is None else max_episode_steps,
            autoreset_mode,
            render_mode,
        )
        self._state = np.zeros((self.num_envs, self.n_bits), np.float32)
        self._goal = np.zeros((self.num_envs, self.n_bits), np.float32)
        self._success = np.zeros(self.num_envs, bool)
        # Each sub-env's state's difference from its goal (BitChunks.difference): a
        # discrete flip updates it in place, so success needs no comparison of all bits.
        self._differs = np.zeros(self.num_envs, np.int64)
        self._flip_codes = 1 << np.arange(min(self.n_bits, 53), dtype=np.int64)
        # Row b flips bit b of a float32 0.0 / 1.0 by XOR of its bit pattern.
        one_bits = np.float32(1.0).view(np.uint32)
        self._flip_items = bit_items(np.eye(self.n_bits, dtype=np.uint32) * one_bits)
        self._state_bits = self._state.view(np.uint32)
        self._row_starts = np.arange(0, self.num_envs * self.n_bits, self.n_bits)
        self._state_flat = self._state.reshape(-1)
        self._goal_flat = self._goal.reshape(-1)
        self._chunks = BitChunks(self.num_envs, self.n_bits, pairs=not self.fixed_goal)
        self._state_items = bit_items(self._state)
        self._goal_items = bit_items(self._goal)
        self._ones_item = bit_items(np.ones(self.n_bits, np.float32))[()]
        # Resets that the chunks held are sure to cover; 0: check them first.
        self._safe_resets = 0
        # A seeded reset may have replaced generators: their read-ahead chunks are stale.
        self._seeded = True
        self._layout = _Layout(self.n_bits)
        self._canvas: Canvas | None = None
        # This step's rewards (the array step returns), for the heads-up text.
        self._rewards: np.ndarray | None = None

    def reset(
        self,
        *,
        seed: int | list[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Resets every sub-env (or ``options["reset_mask"]``); see :meth:`GoalVectorEnv.reset`.

        ``options["goal"]`` pins the goal: one bit pattern for all, or one per sub-env.
        """
        if seed is not None:
            self._seeded = True
        return super().reset(seed=seed, options=options)

    def _reset_envs(self, index: np.ndarray, options: dict[str, Any] | None) -> None:
        chunks = self._chunks
        if self._seeded:
            chunks.forget_replaced(self.np_randoms)
            self._seeded = False
            self._safe_resets = 0
        if options is not None and options.get("goal") is not None:
            space = self.single_observation_space["desired_goal"]
            goal = _check_bit_goal(check_goal_option(options["goal"], space, self.num_envs))
            goal = np.broadcast_to(goal, (self.num_envs, self.n_bits))
            for i in index.tolist():
                self._goal[i] = goal[i]
                self._state[i] = chunks.read_until_differs(self.np_randoms, i, goal[i])
                self._differs[i] = chunks.difference(self._state[i], goal[i])
            # Redraws read past the chunks that the countdown below allows for.
            self._safe_resets = 0
        else:
            self._draw_from_chunks(index)
        if self.render_mode is not None and 0 in index:
            self._rewards = None

    def _draw_from_chunks(self, index: np.ndarray) -> None:
        chunks = self._chunks
        per_episode = 1 if self.fixed_goal else 2
        # Every row may give one episode per call: a row holds enough chunks for as many
        # calls as the fewest chunks of any row allows, so the check runs once per many
        # calls rather than gathering every row's count on each.
        if self._safe_resets <= 0:
            chunks.refill_low(self.np_randoms)
            self._safe_resets = chunks.min_left() // per_episode
        self._safe_resets -= 1
        at = chunks.next[index]
        self._state_items[index] = chunks.items[at]
        if self.fixed_goal:
            self._goal_items[index] = self._ones_item
            differ = chunks.differs[at]
        else:
            self._goal_items[index] = chunks.items[at + 1]
            differ = chunks.differs[at]
        self._differs[index] = differ
        chunks.next[index] = at + per_episode
        if np.count_nonzero(differ) < len(index):
            for i in index[differ == 0].tolist():
                if self.fixed_goal:
                    self._state[i] = chunks.read_until_differs(self.np_randoms, i, self._goal[i])
                else:
                    self._goal[i] = chunks.read_until_differs(self.np_randoms, i, self._state[i])
                self._differs[i] = chunks.difference(self._state[i], self._goal[i])
            self._safe_resets = 0

    def _step_envs(self, actions: np.ndarray) -> None:
        if self.continuous:
            flip_bits(self._state, actions, True)
            # Several bits may flip: _step_info recounts, after this step's resets.
            return
        if self._chunks.codes:
            # One bit per sub-env: XOR flips it in the float32 state and in the code.
            flips = self._flip_items[actions].view(np.uint32).reshape(self._state.shape)
            np.bitwise_xor(self._state_bits, flips, out=self._state_bits)
            self._differs ^= self._flip_codes[actions]
            return
        # Counts: the flip moves the count up where the bit matched the goal, else down.
        flat = self._state_flat
        index = self._row_starts + actions
        bits = flat[index]
        matched = bits == self._goal_flat[index]
        flat[index] = 1.0 - bits
        differs = self._differs
        differs -= 1
        differs += matched
        differs += matched

    def _observation(self) -> dict[str, np.ndarray]:
        return {
            "observation": self._state.copy(),
            "achieved_goal": self._state.copy(),
            "desired_goal": self._goal.copy(),
        }

    def _step_info(self) -> dict[str, np.ndarray]:
        # Called after this step's resets (GoalVectorEnv.step), so it sees the state
        # that the observation shows.
        if self.continuous:
            self._differs = self._chunks.difference(self._state, self._goal)
        self._success = self._differs == 0
        return {"is_success": self._success.copy()}

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, None]:
        # The kernel's success of this step is what compute_reward / compute_terminated
        # recompute from obs; reusing it skips their validation and a second comparison.
        self._rewards = sparse_reward(self._success)
        return self._rewards, self._success.copy(), None

    def render(self) -> np.ndarray | None:
        """Sub-env 0's frame (``rgb_array``), as :meth:`BitFlippingEnv.render` draws it."""
        if self.render_mode is None:
            return None
        if self._canvas is None:
            self._canvas = _make_canvas(self._layout)
        state, goal = self._state[0], self._goal[0]
        hud = hud_line(
            int(self.elapsed_steps[0]),
            None if self._rewards is None else float(self._rewards[0]),
            bool(self._success[0]),
        )
        _draw_bits(self._canvas, self._layout, state, goal, hud)
        return self._canvas.rgb_array()

    def close_extras(self, **kwargs: Any) -> None:
        """Releases the drawing surface."""
        self._canvas = None
