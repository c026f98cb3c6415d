"""Shared test setup: headless rendering and a quiet, single-threaded torch."""

from __future__ import annotations

import os

from hypothesis import settings

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
os.environ.setdefault("MPLBACKEND", "Agg")


# CI explores the same examples on every run (a red build must be reproducible) and has
# no per-example deadline (2 loaded cores); local runs keep drawing new examples.
settings.register_profile("ci", derandomize=True, deadline=None)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
