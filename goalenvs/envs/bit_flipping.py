"""Bit flipping (Andrychowicz et al. 2017, "Hindsight Experience Replay", section 3.1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode

from goalenvs.core import (
    GoalEnv,
    GoalVectorEnv,
    InfoLike,
    check_action,
    check_goal_option,
    check_positive,
    goal_batch,
    goal_dict_space,
    goal_obs,
    twin_metadata,
)
from goalenvs.core.backend import NumpyArrays, TorchArrays
from goalenvs.core.types import ArrayT, DeviceLike
from goalenvs.envs.canvas import Canvas, CanvasRendering, import_pygame
from goalenvs.envs.single import SingleEnv


@dataclass(frozen=True)
class BitFlippingParams:
    """The checked constants of a bit flipping env, shared by the single env and its twin."""

    n_bits: int = 10
    continuous: bool = False
    fixed_goal: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_bits", int(check_positive("n_bits", self.n_bits, integer=True)))
        object.__setattr__(self, "continuous", bool(self.continuous))
        object.__setattr__(self, "fixed_goal", bool(self.fixed_goal))

    def spaces(self) -> tuple[spaces.Dict, spaces.Space]:
        """The single env's (observation space, action space)."""
        bits = spaces.Box(0.0, 1.0, (self.n_bits,), np.float32)
        action: spaces.Space = (
            spaces.Box(-1.0, 1.0, (self.n_bits,), np.float32)
            if self.continuous
            else spaces.Discrete(self.n_bits)
        )
        return goal_dict_space(bits, bits), action

    def check_goal(self, goal: object, space: Space, batch: int | None = None) -> np.ndarray:
        """A pinned ``options["goal"]``, checked to hold only bits."""
        arr = check_goal_option(goal, space, batch)
        if not np.isin(arr, (0.0, 1.0)).all():
            raise ValueError(f"options['goal']={arr.tolist()} must hold only bits (0 or 1)")
        return arr

    def flip_action(self, bit: int) -> object:
        """The action that flips ``bit`` alone: its index, or +1 there and -1 elsewhere."""
        if not self.continuous:
            return int(bit)
        action = np.full(self.n_bits, -1.0, np.float32)
        action[bit] = 1.0
        return action


# --------------------------------------------------------------------------- kernel


def bits_match(achieved: ArrayT, desired: ArrayT, xp: ModuleType) -> ArrayT:
    """Success: every bit exactly equal. Bool array of the goals' leading shape."""
    return xp.all(achieved == desired, axis=-1)


def sparse_reward(success: ArrayT, xp: ModuleType) -> ArrayT:
    """0 on success, -1 otherwise (float32)."""
    zero = xp.zeros_like(success, dtype=xp.float32)
    return xp.where(success, zero, zero - 1.0)


def flip_bits(state: ArrayT, action: ArrayT, continuous: bool, xp: ModuleType) -> ArrayT:
    """The ``(batch, n_bits)`` states after one step: a new array.

    Discrete: ``action`` (batch,) holds the index of the bit to flip. Continuous:
    ``action`` (batch, n_bits) flips every bit whose value is > 0.
    """
    if continuous:
        return xp.where(action > 0, 1.0 - state, state)
    n = state.shape[-1]  # numpy 1.x's arange takes no device
    bits = np.arange(n) if isinstance(state, np.ndarray) else xp.arange(n, device=state.device)
    return xp.where(action[:, None] == bits, 1.0 - state, state)


def random_patterns(rngs: Sequence[np.random.Generator], n_bits: int, count: int) -> np.ndarray:
    """``count`` random bit patterns from each generator: float32 ``(len(rngs), count, n_bits)``,
    bit ``b`` of a pattern being bit ``b % 64`` of its ``b // 64``-th raw 64-bit word."""
    per = -(-n_bits // 64)
    words = np.array(
        [rng.bit_generator.random_raw(count * per) for rng in rngs], dtype="<u8"
    ).reshape(len(rngs), count, per)
    bits = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
    return bits[..., :n_bits].astype(np.float32)


def draw_bit_episodes(
    patterns: Callable[[Any, int], Any], count: int, params: BitFlippingParams, goal: Any,
    arrays: NumpyArrays,
) -> tuple[Any, Any]:  # fmt: skip
    """``count`` episodes' float32 ``(count, n_bits)`` ``(start, goal)`` on ``arrays``'
    backend, ``patterns(rows, k)`` drawing ``(len(rows), k, n_bits)`` patterns for the
    episodes ``rows`` (None: all). The goal is ``goal``, all ones (``fixed_goal``) or drawn
    after the start; one equal to its start redraws (the goal if drawn, else the start).
    """
    xp, random_goal = arrays.xp, goal is None and not params.fixed_goal
    drawn = patterns(None, 2 if random_goal else 1)
    start = arrays.fresh(drawn[:, 0])
    if random_goal:
        target = arrays.fresh(drawn[:, 1])
    else:
        pinned = arrays.constant(np.ones(params.n_bits, np.float32)) if goal is None else goal
        target = arrays.float32(arrays.fresh(xp.broadcast_to(pinned, start.shape)))
    redrawn = target if random_goal else start
    same = arrays.where_true(bits_match(start, target, xp))
    while len(same):  # 2 ** -n_bits of the episodes
        redrawn[same] = patterns(same, 1)[:, 0]
        same = same[bits_match(start[same], target[same], xp)]
    return start, target


def draw_episodes(
    rngs: Sequence[np.random.Generator], params: BitFlippingParams, goal: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`draw_bit_episodes` of one episode per generator, each reading
    :func:`random_patterns` of its own generator only (so batching never changes it)."""

    def patterns(rows: np.ndarray | None, k: int) -> np.ndarray:
        chosen = rngs if rows is None else [rngs[i] for i in rows.tolist()]
        return random_patterns(chosen, params.n_bits, k)

    return draw_bit_episodes(patterns, len(rngs), params, goal, NumpyArrays())


def draw_episodes_on_device(
    generator: Any, params: BitFlippingParams, count: int, goal: Any
) -> tuple[Any, Any]:
    """:func:`draw_bit_episodes` for ``count`` sub-envs of a device twin, uniform random
    bits from one ``torch.Generator`` (``goal``: None, or pinned goals as a tensor there)."""
    import torch

    def patterns(rows: Any, k: int) -> Any:
        shape, device = (count if rows is None else len(rows), params.n_bits), generator.device
        draws = [torch.randint(0, 2, shape, generator=generator, device=device) for _ in range(k)]
        return torch.stack(draws, dim=1).float()

    return draw_bit_episodes(patterns, count, params, goal, TorchArrays(generator.device))


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


class _BitFlippingFaces(CanvasRendering):
    """What both faces share: the goal functions and the frame (the twin's shows sub-env 0)."""

    episode_state = ("_state", "_goal")
    params: BitFlippingParams

    def compute_reward(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """0 where every bit matches, else -1 (float32, the goals' leading shape)."""
        _, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, self.params.n_bits)
        return sparse_reward(bits_match(achieved, desired, xp), xp)

    def compute_terminated(
        self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: InfoLike
    ) -> np.ndarray:
        """True where every bit matches (bool, the goals' leading shape)."""
        _, achieved, desired, xp = goal_batch(achieved_goal, desired_goal, self.params.n_bits)
        return bits_match(achieved, desired, xp)

    def _allocate(self, n: int) -> None:
        p = self.params
        self.n_bits, self.continuous, self.fixed_goal = p.n_bits, p.continuous, p.fixed_goal
        self._layout = _Layout(self.n_bits)
        self._state = self.zeros((n, self.n_bits), np.float32)
        self._goal = self.zeros((n, self.n_bits), np.float32)
        self._success = self.zeros(n, bool)

    def _draw_episodes(
        self, rngs: list[np.random.Generator], **pinned: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        return draw_episodes(rngs, self.params, **pinned)

    def _step_envs(self, actions: np.ndarray) -> None:
        self._state = flip_bits(self._state, actions, self.continuous, self.xp)

    def _observation(self) -> dict[str, np.ndarray]:
        return goal_obs(self.fresh(self._state), self.fresh(self._state), self.fresh(self._goal))

    def _step_info(self) -> dict[str, np.ndarray]:
        self._success = bits_match(self._state, self._goal, self.xp)
        return {"is_success": self.fresh(self._success)}

    def _goal_outcomes(
        self, obs: dict[str, np.ndarray], info: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, None]:
        self._rewards = sparse_reward(self._success, self.xp)
        return self.fresh(self._rewards), self.fresh(self._success), None

    def _frame_hud(self) -> str:
        return self._sub_env_hud(bool(self._success[0]))

    def _new_canvas(self) -> Canvas:
        import_pygame()
        layout = self._layout
        # World units are pixels (y up), so the layout's pixel rectangles draw as they are.
        return Canvas(
            (layout.width, layout.height),
            (0, layout.width, 0, layout.height),
            background=(250, 250, 250),
            title="goalenvs BitFlipping",
        )

    def _draw_frame(self, canvas: Canvas) -> None:
        pg, layout = canvas.pygame, self._layout
        state, goal = self._rows(self._state, self._goal)
        canvas.clear()
        canvas.text(self._frame_hud(), (layout.margin, 6), _TEXT, 20)
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


class BitFlippingEnv(_BitFlippingFaces, SingleEnv, GoalEnv):
    """Flip bits until the state matches the goal pattern: the HER paper's bit flipping.

    ## Description

    Each step flips bits of an ``n_bits`` state until it equals the goal pattern; past
    about 15 bits a random goal's reward is almost never seen without HER (the smallest
    test of a HER implementation). ``goalenvs/BitFlipping-v0`` has discrete actions,
    ``goalenvs/BitFlippingContinuous-v0`` continuous ones.

    ## Action Space

    - discrete (default): ``Discrete(n_bits)``, the index of the one bit to flip;
    - ``continuous=True``: ``Box(-1, 1, (n_bits,), float32)``, every bit whose action is
      > 0 flips (so one step may flip several bits, or none; clipping changes none).

    ## Observation Space

    ``Dict(observation, achieved_goal, desired_goal)``, each ``Box(0, 1, (n_bits,),
    float32)`` holding 0.0 or 1.0 (not ``MultiBinary``: networks and buffers take floats):
    the state's bits (twice) and the goal's.

    ## Goal

    The desired goal is a bit pattern drawn uniformly at random, different from the start
    (the paper's setting), or all ones with ``fixed_goal=True`` (stable-baselines3's
    ``BitFlippingEnv``), or the pattern passed as ``reset(options={"goal": bits})``.

    ## Success, rewards, start

    Success (``info["is_success"]``, which terminates): every bit of ``achieved_goal``
    equals ``desired_goal``. Sparse rewards from :meth:`compute_reward`: 0 on success,
    else -1. The start: uniformly random bits, redrawn while they equal the goal.

    ## Episode End

    Truncation: after ``max_episode_steps`` steps (default ``n_bits``, the paper's
    horizon), counted by the env (the ids have no ``TimeLimit``, so ``gym.make(id,
    n_bits=50)`` gives 50-step episodes; gymnasium's ``gym.make(id, max_episode_steps=k)``
    adds a ``TimeLimit(k)``, which can only shorten them: pass longer ones to the
    constructor or ``gym.make_vec``).

    ## Arguments

    ``n_bits`` (10, >= 1), ``continuous``, ``fixed_goal``, ``max_episode_steps`` (above),
    and ``render_mode`` (None, "human", "rgb_array"): two rows of cells, the state over the
    goal, mismatched state bits outlined in red, and the step, reward and success.
    """

    metadata: dict[str, object] = {"render_modes": ["human", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        n_bits: int = 10,
        continuous: bool = False,
        fixed_goal: bool = False,
        max_episode_steps: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        params = BitFlippingParams(n_bits, continuous, fixed_goal)
        if max_episode_steps is not None:
            check_positive("max_episode_steps", max_episode_steps, integer=True)
        self.max_episode_steps: int = max_episode_steps or params.n_bits
        self._setup(params, render_mode)

    def step(
        self, action: object
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Flips the chosen bit(s): :class:`SingleEnv`'s step written out, for speed."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        self._step_envs(check_action(action, self.action_space)[None])
        self._elapsed += 1
        self._success = bits_match(self._state, self._goal, np)
        self._rewards = sparse_reward(self._success, np)
        if self.render_mode == "human":
            self.render()
        state, success = self._state[0], bool(self._success[0])
        obs = goal_obs(state.copy(), state.copy(), self._goal[0].copy())
        truncated = self._elapsed >= self.max_episode_steps
        return obs, float(self._rewards[0]), success, truncated, {"is_success": success}

    def bit_at_pixel(self, column: int, row: int) -> int | None:
        """The bit whose cell (state or goal row) holds the frame pixel, or None."""
        return self._layout.bit_at(int(column), int(row))

    def action_at_pixel(self, column: int, row: int) -> object:
        """The action that flips the bit whose cell holds the frame pixel, or None.

        The click hook of keyboard-and-mouse play (``goalenvs play``).
        """
        bit = self.bit_at_pixel(column, row)
        return None if bit is None else self.params.flip_action(bit)

    def cell_pixel(self, bit: int, goal: bool = False) -> tuple[int, int]:
        """The frame pixel ``(column, row)`` at the centre of a bit's cell."""
        left, top, size, _ = self._layout.cell_rect(bit, 1 if goal else 0)
        return left + size // 2, top + size // 2

    def get_keys_to_action(self) -> dict[tuple[int, ...], Any]:
        """Keys for ``gymnasium.utils.play.play``: 1..9, 0 flip bits 0..9, then a, b, c, ...

        Bits past the 36th have no key (click them: :meth:`action_at_pixel`). Continuous
        actions are float32 vectors (+1 on the bit, -1 elsewhere); their no-op is
        ``np.zeros(n_bits, np.float32)``. Discrete actions have no no-op.
        """
        keys = "1234567890abcdefghijklmnopqrstuvwxyz"
        return {
            (ord(key),): self.params.flip_action(bit)
            for bit, key in zip(range(self.n_bits), keys, strict=False)
        }


# --------------------------------------------------------------------------- vector env


class BitFlippingVectorEnv(_BitFlippingFaces, GoalVectorEnv):  # type: ignore[misc]
    """The vector twin of :class:`BitFlippingEnv` (:class:`GoalVectorEnv`);
    ``max_episode_steps`` None means ``n_bits``."""

    metadata: dict[str, object] = twin_metadata(BitFlippingEnv)

    def __init__(
        self,
        num_envs: int = 1,
        n_bits: int = 10,
        continuous: bool = False,
        fixed_goal: bool = False,
        max_episode_steps: int | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
        device: DeviceLike = None,
    ) -> None:
        params = BitFlippingParams(n_bits, continuous, fixed_goal)
        steps = params.n_bits if max_episode_steps is None else max_episode_steps
        self._start(params, num_envs, steps, autoreset_mode, render_mode, device)

    def _draw_episodes_on_device(self, count: int, goal: object = None) -> tuple[Any, Any]:
        return draw_episodes_on_device(self.torch_generator, self.params, count, goal)
