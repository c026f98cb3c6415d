"""Goal envs for the env-worker tests, built by file path in each worker process."""

from __future__ import annotations

import os
import signal
from typing import Any

from goalenvs.envs.point_reach import PointReachEnv


class FailingReach(PointReachEnv):
    """PointReach whose step raises (``fail_after`` steps in) or kills its own process
    (``die_after``), as a simulator's bug or segfault would."""

    def __init__(self, fail_after: int | None = None, die_after: int | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.fail_after, self.die_after, self.steps = fail_after, die_after, 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.fail_after is not None and self.steps > self.fail_after:
            raise FloatingPointError(f"the simulator diverged at step {self.steps}")
        if self.die_after is not None and self.steps > self.die_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)
