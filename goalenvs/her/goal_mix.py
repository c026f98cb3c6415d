"""Relabelling mixes: where the goals of a sampled batch come from, as data (the sources
and the strategies' mixes: docs/buffer.md, "Goal mixes")."""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from typing import Any

__all__ = ["COMPONENTS", "FUTURE_ONLY", "RELABELLING", "GoalMix"]

#: The sources of a goal, in the order the buffers draw them; "original" last.
COMPONENTS = ("future", "final", "episode", "achieved", "desired", "original")
#: The sources that replace the goal (every one but "original").
RELABELLING = COMPONENTS[:-1]
# How far the fractions' sum may stray from 1 (decimal fractions such as 0.1 + 0.2 + 0.7).
_SUM_TOLERANCE = 1e-6
_EXAMPLE = "'future=0.4,desired=0.4,original=0.2'"


@dataclasses.dataclass(frozen=True)
class GoalMix:
    """The fraction of sampled transitions whose goal comes from each source, for a
    transition ``t`` of an episode of ``T``: ``future``, the next achieved goal of a ``j``
    uniform in ``t .. T-1``; ``final``, of ``T-1``; ``episode``, of a ``j`` uniform in
    ``0 .. T-1``; ``achieved``, of any stored transition; ``desired``, the desired goal of
    another episode's transition; ``original``, its own. Numbers >= 0 that sum to 1."""

    future: float = 0.0
    final: float = 0.0
    episode: float = 0.0
    achieved: float = 0.0
    desired: float = 0.0
    original: float = 0.0

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"goal_mix: {name}={value!r} is not a number; expected fractions >= 0 "
                    f"that sum to 1, e.g. {_EXAMPLE}"
                )
            value = float(value)
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"goal_mix: {name}={value!r} is {'negative' if value < 0 else 'not finite'}"
                    f"; expected fractions >= 0 that sum to 1, e.g. {_EXAMPLE}"
                )
            object.__setattr__(self, name, value)
        total = math.fsum(getattr(self, name) for name in COMPONENTS)
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise ValueError(
                f"goal_mix: the fractions sum to {total:.6g} ({self}); expected them to sum "
                f"to 1, e.g. {_EXAMPLE}"
            )

    @classmethod
    def parse(cls, value: GoalMix | Mapping[str, Any] | str) -> GoalMix:
        """The mix ``value`` describes: a :class:`GoalMix`, a mapping of components to
        fractions (a preset's TOML table) or text (``"future=0.4,original=0.6"``)."""
        if isinstance(value, GoalMix):
            return value
        if isinstance(value, str):
            value = _parse_text(value)
        if not isinstance(value, Mapping):
            raise TypeError(
                f"goal_mix must be a mapping of components to fractions or text such as "
                f"{_EXAMPLE}, got {value!r}"
            )
        unknown = [key for key in value if key not in COMPONENTS]
        if unknown:
            raise ValueError(
                f"goal_mix: {unknown[0]!r} is not a goal source; expected some of "
                f"{list(COMPONENTS)}, e.g. {_EXAMPLE}"
            )
        return cls(**dict(value))

    @classmethod
    def from_strategy(cls, strategy: str, n_sampled_goal: int) -> GoalMix:
        """The mix of a ``goal_selection_strategy`` value and ``n_sampled_goal = k``:
        ``k / (k + 1)`` of that strategy's goals (``random``: "achieved"), the rest original."""
        original = 1.0 / (n_sampled_goal + 1)
        # 1 - 1/(k+1), not k/(k+1): the relabel probability the buffers have always
        # compared with, to the last bit, so seeded samples stay as they were.
        relabelled = 1.0 - original
        source = "achieved" if strategy == "random" else strategy
        return cls(**{source: relabelled, "original": original})

    def fractions(self) -> dict[str, float]:
        """The nonzero fractions by component, in :data:`COMPONENTS` order (plain JSON)."""
        return {name: getattr(self, name) for name in COMPONENTS if getattr(self, name) > 0}

    @property
    def sources(self) -> tuple[str, ...]:
        """The relabelling components with a nonzero fraction, in draw order."""
        return tuple(name for name in RELABELLING if getattr(self, name) > 0)

    def thresholds(self) -> tuple[float, ...]:
        """The cumulative fractions of :data:`RELABELLING`: a uniform ``u`` in [0, 1) picks
        the first ``i`` with ``u < thresholds[i]``, "original" past the last (future 0.4,
        desired 0.4, original 0.2: (0.4, 0.4, 0.4, 0.4, 0.8); u = 0.5 is a desired goal)."""
        running, out = 0.0, []
        for name in RELABELLING:
            running += getattr(self, name)
            out.append(running)
        return tuple(out)

    def __str__(self) -> str:
        return ",".join(f"{name}={value:g}" for name, value in self.fractions().items())


#: The mix of a warm-up: every goal a future one.
FUTURE_ONLY = GoalMix(future=1.0)


def _parse_text(text: str) -> dict[str, float]:
    """``"future=0.4,desired=0.4,original=0.2"`` as a dict, or the error that says why not."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, number = (piece.strip() for piece in part.partition("="))
        if not sep or not name:
            raise ValueError(
                f"goal_mix={text!r}: expected COMPONENT=FRACTION pairs separated by commas, "
                f"e.g. {_EXAMPLE}"
            )
        if name in out:
            raise ValueError(f"goal_mix={text!r}: {name} is given twice")
        try:
            out[name] = float(number)
        except ValueError:
            raise ValueError(
                f"goal_mix={text!r}: {name}={number!r} is not a number; e.g. {_EXAMPLE}"
            ) from None
    return out
