"""Where a training cycle's time goes: seconds per phase, summed over an epoch.

The phases are the parts of the loop that can bound it: stepping the envs, acting,
storing transitions and normalizer statistics, sampling batches (with HER relabeling),
the gradient steps, and the evaluation episodes. With CUDA the phases are host time: a
phase that launches kernels may be charged to the next one that waits for them."""

from __future__ import annotations

import time

PHASES = ("env", "act", "store", "sample", "update", "eval")
# progress.csv columns: seconds per epoch of each phase (appended after the older ones).
TIME_COLUMNS = tuple(f"time_{phase}" for phase in PHASES)


class _Phase:
    """The ``with`` block of one phase: adds its seconds to the clock's sum."""

    __slots__ = ("clock", "name", "start")

    def __init__(self, clock: PhaseClock, name: str) -> None:
        self.clock, self.name, self.start = clock, name, 0.0

    def __enter__(self) -> None:
        self.start = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.clock.seconds[self.name] += time.perf_counter() - self.start


class PhaseClock:
    """Adds up wall-clock seconds per phase; ``with clock("env"): ...`` times one (a
    reusable context object per phase: a third of ``contextmanager``'s cost)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self._phases = {name: _Phase(self, name) for name in PHASES}

    def __call__(self, phase: str) -> _Phase:
        """The context that charges the time spent inside its ``with`` block to ``phase``."""
        try:
            return self._phases[phase]
        except KeyError:
            raise ValueError(f"phase={phase!r} is not a phase; expected one of {PHASES}") from None

    def columns(self) -> dict[str, float]:
        """The progress.csv values: seconds per phase, rounded to 0.1 ms."""
        return {f"time_{phase}": round(s, 4) for phase, s in self.seconds.items()}

    def shares(self) -> str:
        """One line, e.g. ``env 28%  act 4%  store 3%  sample 6%  update 58%  eval 1%``."""
        return shares(self.seconds)

    def reset(self) -> None:
        """Starts a new epoch's sums."""
        self.seconds = dict.fromkeys(PHASES, 0.0)


def shares(seconds: dict[str, float]) -> str:
    """Each phase's share of the ``seconds`` per phase, in one line (empty without any)."""
    total = sum(seconds.values())
    if total <= 0:
        return ""
    return "  ".join(f"{p} {100 * s / total:.0f}%" for p, s in seconds.items())
