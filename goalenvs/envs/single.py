"""The single envs are their twins at a batch of one: :class:`SingleEnv` runs the hooks of
each env's faces class (shared with its twin) on numpy arrays of one row, inside
gymnasium's single-env API, so a single env and a numpy sub-env run the same code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from goalenvs.core import check_action, check_choice, check_goal_option
from goalenvs.envs.canvas import CanvasRendering

_ROW = (0,)  # the index of the one row, for the hooks that take the rows that reset


class SingleEnv(CanvasRendering):
    """Mixin of the single envs (before :class:`~goalenvs.core.GoalEnv` in the bases): the
    checked render mode, the params' spaces, ``reset`` (drawing from ``np_random``) before
    ``step``, one action checked by :func:`~goalenvs.core.check_action`, an optional
    ``max_episode_steps`` truncation, and Python scalars out (``info`` too)."""

    params: Any
    metadata: dict[str, Any]
    observation_space: Any
    action_space: Any
    np_random: np.random.Generator
    # The faces' hooks, as the twin's (see goalenvs.core.GoalVectorEnv).
    _allocate: Callable[[int], None]
    _step_envs: Callable[[Any], None]
    _observation: Callable[[], dict[str, Any]]
    _step_info: Callable[[], dict[str, Any]]
    _goal_outcomes: Callable[[dict[str, Any], dict[str, Any]], tuple[Any, Any, Any]]
    # The twins' array helpers, numpy's (goalenvs.core.backend.NumpyArrays).
    xp = np
    zeros, constant = staticmethod(np.zeros), staticmethod(np.asarray)
    to_numpy = staticmethod(np.array)
    # The batch of one: its shape, the index of its row, the index that adds the row to an
    # action. Parking's single env runs its kernel on scalars (shape ()): it is faster.
    _batch: Any = 1
    _row: Any = 0
    _add_row: Any = None
    max_episode_steps: int | None = None

    @staticmethod
    def fresh(value: Any) -> Any:
        """``value`` itself: :meth:`_rows_out` copies the rows that the env hands out."""
        return value

    @staticmethod
    def float32(value: Any) -> Any:
        """``value`` as float32."""
        return value.astype(np.float32)

    def _setup(self, params: Any, render_mode: str | None) -> None:
        """Sets ``params``, checks ``render_mode`` and sets it, the params' spaces and the
        state of one row."""
        self.params = params
        if render_mode is not None:
            check_choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.observation_space, self.action_space = self.params.spaces()
        self._elapsed, self._has_reset = 0, False
        self._allocate(self._batch)

    def _reset_options(self, options: dict[str, object] | None) -> dict[str, np.ndarray]:
        """``options["goal"]`` checked against the goal space (by the params'
        ``check_goal`` where they have one), as ``{"goal": ...}``, or nothing."""
        goal = None if options is None else options.get("goal")
        if goal is None:
            return {}
        check = getattr(self.params, "check_goal", check_goal_option)
        return {"goal": check(goal, self.observation_space["desired_goal"])}

    def _store_episodes(self, index: object, drawn: tuple[Any, ...]) -> None:
        # The drawn episode becomes the state, uncopied: rows of one (index None) or the
        # one episode that _draw_episode draws (index 0).
        for name, rows in zip(self.episode_state, drawn, strict=True):
            setattr(self, name, rows if index is None else rows[None])

    def _steps(self) -> int:
        return self._elapsed

    def reset(
        self, *, seed: int | None = None, options: dict[str, object] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Starts an episode; ``options`` may pin ``"goal"`` (see the class docstring)."""
        super().reset(seed=seed)  # type: ignore[misc]
        pinned = self._reset_options(options)
        if hasattr(self, "_draw_episodes"):  # the twin's draw of a batch
            self._store_episodes(None, self._draw_episodes([self.np_random], **pinned))
        else:
            self._store_episodes(self._row, self._draw_episode(self.np_random, **pinned))  # type: ignore[attr-defined]
        for name in self.zeroed_on_reset:
            getattr(self, name)[...] = 0
        self._elapsed, self._has_reset = 0, True
        self._episodes_started(_ROW)
        return self._rows_out(self._observation(), self._step_info())

    def step(
        self, action: object
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Advances the episode one step with ``action`` (see the class docstring)."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        self._step_envs(check_action(action, self.action_space)[self._add_row])
        self._elapsed += 1
        obs, info = self._observation(), self._step_info()
        reward, terminated, _ = self._goal_outcomes(obs, info)
        limit = self.max_episode_steps
        truncated = limit is not None and self._elapsed >= limit
        obs, info = self._rows_out(obs, info)
        return obs, reward.item(), terminated.item(), truncated, info

    def _rows_out(
        self, obs: dict[str, Any], info: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The row of ``obs`` and ``info`` (as Python scalars), after showing the frame in
        the window when rendering for a human."""
        if self.render_mode == "human":
            self.render()
        row = self._row
        obs = {k: v[row].copy() for k, v in obs.items()}
        return obs, {k: v.item() for k, v in info.items()}  # a batch of one: its row

    def close(self) -> None:
        """Closes the human window, if one is open."""
        self._close_canvas()
