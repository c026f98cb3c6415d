"""pytest plugin for tests/test_sb3_suite.py: stable-baselines3's test_her.py with our class.

Loaded with ``-p sb3_swap_plugin`` in the child pytest that runs SB3's own test file; it
rebinds the test module's global ``HerReplayBuffer`` (the name its tests construct and
pass as ``replay_buffer_class``) to goalenvs' adapter before any test runs. SB3's file
is read where it is installed: nothing of it is copied here.
"""

from __future__ import annotations

from typing import Any

from goalenvs.her.sb3 import HerReplayBuffer

SWAPPED: list[str] = []


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Points every collected module's ``HerReplayBuffer`` at goalenvs' adapter."""
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "HerReplayBuffer"):
            module.HerReplayBuffer = HerReplayBuffer
            if module.__name__ not in SWAPPED:
                SWAPPED.append(module.__name__)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Says in the child's output (even with -q) which modules ran with our class."""
    name = f"{HerReplayBuffer.__module__}.HerReplayBuffer"
    terminalreporter.write_line(f"HerReplayBuffer swapped for {name} in: {', '.join(SWAPPED)}")
