"""What each single env keeps around its kernel: the checked render mode, the spaces of
its params, the step count, the last reward and success, and the rule that ``reset``
comes before ``step``. Each single env calls these helpers instead of writing them out."""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.core import check_action, check_choice, check_goal_option
from goalenvs.envs.canvas import hud_line


class EpisodeBookkeeping:
    """Mixin of the single envs (before :class:`~goalenvs.core.GoalEnv` in the bases)."""

    params: Any
    metadata: dict[str, Any]
    render_mode: str | None
    observation_space: Any
    action_space: Any

    def _setup(self, render_mode: str | None) -> None:
        """Checks ``render_mode`` and sets it, the params' spaces and the episode counters."""
        if render_mode is not None:
            check_choice("render_mode", render_mode, self.metadata["render_modes"])
        self.render_mode = render_mode
        self.observation_space, self.action_space = self.params.spaces()
        self._elapsed = 0
        self._success = False
        self._last_reward: float | None = None
        self._has_reset = False

    def _pinned_goal(self, options: dict[str, object] | None) -> np.ndarray | None:
        """``options["goal"]`` checked against the goal space (by the params' ``check_goal``
        where they have one), or None."""
        if options is None or options.get("goal") is None:
            return None
        check = getattr(self.params, "check_goal", check_goal_option)
        return check(options["goal"], self.observation_space["desired_goal"])

    def _started(self, success: bool = False) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Ends a reset: counts a new episode from step 0 with no reward yet and
        ``success``, shows its frame, and returns ``(obs, info)``."""
        self._elapsed = 0
        self._last_reward = None
        self._success = success
        self._has_reset = True
        self._show_frame()
        return self._obs(), {"is_success": success}

    def _stepped(
        self, reward: float, success: bool, truncated: bool = False
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Ends a step (``_elapsed`` already counts it): keeps its reward and success for
        the frame, shows it, and returns gymnasium's five values (success terminates)."""
        self._last_reward = reward
        self._success = success
        self._show_frame()
        return self._obs(), reward, success, truncated, {"is_success": success}

    def _checked_action(self, action: object) -> np.ndarray:
        """``action`` checked with :func:`~goalenvs.core.check_action`, after a reset."""
        if not self._has_reset:
            raise RuntimeError("call reset() before step()")
        return check_action(action, self.action_space)

    def _frame_hud(self) -> str:
        """The heads-up text: the step count, the last reward and the success."""
        return hud_line(self._elapsed, self._last_reward, self._success)

    def _rows(self, *arrays: np.ndarray) -> tuple[np.ndarray, ...]:
        """The frame's rows of the state arrays (a batch of one)."""
        return tuple(a[0] for a in arrays)

    def close(self) -> None:
        """Closes the human window, if one is open."""
        self._close_canvas()  # type: ignore[attr-defined]

    def _obs(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _show_frame(self) -> None:
        """Draws the frame in the window when rendering for a human."""
        if self.render_mode == "human":
            self.render()  # type: ignore[attr-defined]
