"""Where a training cycle's time goes: seconds per phase, summed over an epoch.

The phases are the parts of the loop that can bound it: stepping the envs, acting
(the policy's forward pass and exploration noise), storing transitions and normalizer
statistics, sampling batches (with HER relabeling), the gradient steps (with the target
move), and the evaluation episodes. On a CPU the sum is the epoch's wall time up to the
loop's own bookkeeping; with CUDA the phases are host time (kernels run asynchronously,
so a phase that launches work may be charged to the next one that waits for it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

PHASES = ("env", "act", "store", "sample", "update", "eval")
# progress.csv columns: seconds per epoch of each phase (appended after the older ones).
TIME_COLUMNS = tuple(f"time_{phase}" for phase in PHASES)


class PhaseClock:
    """Adds up wall-clock seconds per phase; ``with clock("env"): ...`` times one."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        """Charges the time spent inside the ``with`` block to ``phase``."""
        if phase not in self.seconds:
            raise ValueError(f"phase={phase!r} is not a phase; expected one of {PHASES}")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - start

    def columns(self) -> dict[str, float]:
        """The progress.csv values: seconds per phase, rounded to 0.1 ms."""
        return {f"time_{phase}": round(s, 4) for phase, s in self.seconds.items()}

    def shares(self) -> str:
        """One line, e.g. ``env 28%  act 4%  store 3%  sample 6%  update 58%  eval 1%``."""
        total = sum(self.seconds.values())
        if total <= 0:
            return ""
        return "  ".join(f"{p} {100 * s / total:.0f}%" for p, s in self.seconds.items())

    def reset(self) -> None:
        """Starts a new epoch's sums."""
        self.seconds = dict.fromkeys(PHASES, 0.0)
