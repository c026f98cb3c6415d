"""pytest plugin for tests/test_sb3_suite.py: stable-baselines3's test_her.py with our class.

Loaded with ``-p sb3_swap_plugin`` in the child pytest that runs SB3's own test file; it
rebinds the test module's global ``HerReplayBuffer`` (the name its tests construct and
pass as ``replay_buffer_class``) to ``goalenvs.her.sb3.HerReplayBuffer`` before any test
runs. SB3's file is read where setup extracted it: nothing of it is copied here.

Two options serve benchmarks/sb3_suite.py's pass rates over seeds:

- ``--sb3-keep-buffer``: leave SB3's own ``HerReplayBuffer`` in place (the peer run);
- ``--sb3-seed N``: every SB3 algorithm the module builds (``DQN``, ``SAC``, ``TD3``,
  ``DDPG``) takes ``seed=N`` instead of the seed the test wrote, and the mean of
  ``ep_success_buffer`` after each ``learn`` call is printed in the summary
  (``ep_success_buffer mean after learn: ...``), so a test that fixes one seed runs at
  another with nothing else changed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from goalenvs.her.sb3 import HerReplayBuffer

SWAPPED: list[str] = []
SUCCESS_AFTER_LEARN: list[float] = []
ALGORITHMS = ("DQN", "SAC", "TD3", "DDPG")


def pytest_addoption(parser: Any) -> None:
    """The plugin's two options (see the module docstring)."""
    group = parser.getgroup("sb3_swap_plugin")
    group.addoption("--sb3-keep-buffer", action="store_true", help="keep SB3's own HerReplayBuffer")
    group.addoption("--sb3-seed", type=int, default=None, help="seed every SB3 algorithm with N")


def reseeded(algorithm: Any, seed: int) -> type:
    """A subclass of ``algorithm`` built with ``seed`` whatever the caller passes, which
    records ``np.mean(ep_success_buffer)`` after every ``learn`` call."""

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs["seed"] = seed
        algorithm.__init__(self, *args, **kwargs)

    def learn(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = algorithm.learn(self, *args, **kwargs)
        if len(self.ep_success_buffer):
            SUCCESS_AFTER_LEARN.append(float(np.mean(self.ep_success_buffer)))
        return result

    return type(algorithm.__name__, (algorithm,), {"__init__": init, "learn": learn})


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Points every collected module's ``HerReplayBuffer`` at goalenvs' adapter (unless
    ``--sb3-keep-buffer``) and its algorithms at reseeded ones (with ``--sb3-seed``)."""
    keep = config.getoption("sb3_keep_buffer")
    seed = config.getoption("sb3_seed")
    for item in items:
        module = getattr(item, "module", None)
        if module is None or module.__name__ in SWAPPED:
            continue
        if not keep and hasattr(module, "HerReplayBuffer"):
            module.HerReplayBuffer = HerReplayBuffer
        if seed is not None:
            for name in ALGORITHMS:
                if isinstance(getattr(module, name, None), type):
                    setattr(module, name, reseeded(getattr(module, name), seed))
        SWAPPED.append(module.__name__)


def pytest_terminal_summary(terminalreporter: Any, config: Any) -> None:
    """Says in the child's output (even with -q) which buffer and seed the modules ran with."""
    modules = ", ".join(SWAPPED)
    if config.getoption("sb3_keep_buffer"):
        terminalreporter.write_line(
            f"HerReplayBuffer kept as stable-baselines3's own in: {modules}"
        )
    else:
        name = f"{HerReplayBuffer.__module__}.HerReplayBuffer"
        terminalreporter.write_line(f"HerReplayBuffer swapped for {name} in: {modules}")
    seed = config.getoption("sb3_seed")
    if seed is not None:
        values = " ".join(f"{v:.4f}" for v in SUCCESS_AFTER_LEARN)
        terminalreporter.write_line(f"seed {seed}; ep_success_buffer mean after learn: {values}")
