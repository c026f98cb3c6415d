"""The broken-env library through three checkers: goalenvs check, SB3's and gymnasium's.

For every defect of tests/checker/broken_envs.py, each checker runs on the broken env
and on its correct twin. A checker *caught* a defect when it fails the broken env
(goalenvs: the expected check id at its severity; SB3 / gymnasium: an exception, or,
in the lenient count, a warning) and does not fail the twin the same way: an exception
the twin raises too (SB3 crashing on any wrapped env) is not a catch.

Run from the repository root: ``python benchmarks/checker.py``.
"""

from __future__ import annotations

import functools
import io
import os
import re
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evidence import child_env  # noqa: E402
from gymnasium.utils.env_checker import check_env as gym_check_env  # noqa: E402
from stable_baselines3.common.env_checker import check_env as sb3_check_env  # noqa: E402

from goalenvs.checker import check_goal_env  # noqa: E402
from tests.checker.broken_envs import DEFECTS, make, make_twin  # noqa: E402

TIMEOUT = 5.0  # seconds a peer checker may take before it is "hung"


def run_peer(check: Any, env: Any) -> tuple[str, str, set[str]]:
    """(kind, detail, warnings): kind is raised / hung / passed."""
    box: list = []

    def target() -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                check(env)
                box.append(("passed", "", caught))
            except Exception as error:  # the verdict we are measuring
                box.append(("raised", f"{type(error).__name__}: {error}", caught))

    thread = threading.Thread(target=target, daemon=True)
    # SB3 prints a goal-env notice to stdout; silenced here and restored by this thread
    # even when the check hangs (a context manager inside the hung thread never exits).
    stdout, sys.stdout = sys.stdout, io.StringIO()
    try:
        thread.start()
        thread.join(TIMEOUT)
    finally:
        sys.stdout = stdout
    if not box:
        return "hung", f"no verdict after {TIMEOUT:g} s", set()
    kind, detail, caught = box[0]
    return kind, detail, {str(w.message).split("\n")[0] for w in caught}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def short(text: str, width: int = 58) -> str:
    text = " ".join(_ANSI.sub("", text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def peer_verdict(check: Any, defect: str) -> tuple[str, bool, bool]:
    """(verdict text, caught strictly (raised), caught leniently (raised or new warning))."""
    # A render mode set, so that gymnasium's check_env checks render() too.
    kind, detail, warned = run_peer(check, make(defect, render_mode="rgb_array"))
    twin_kind, twin_detail, twin_warned = run_peer(
        check, make_twin(defect, render_mode="rgb_array")
    )
    if kind == "raised":
        same_as_twin = twin_kind == "raised" and twin_detail.split(":")[0] == detail.split(":")[0]
        if same_as_twin:
            return f"raises on twin too ({short(detail, 40)})", False, False
        return f"raised {short(detail)}", True, True
    if kind == "hung":
        return "hung (never returned)", False, False
    new = sorted(warned - twin_warned)
    if new:
        return f"passed, warned: {short(new[0], 44)}", False, True
    return "passed", False, False


def main() -> None:
    rows = []
    counts = {"goalenvs": 0, "sb3": 0, "sb3_lenient": 0, "gym": 0, "gym_lenient": 0}
    cpu = []
    for defect, (check_id, severity, _, what) in DEFECTS.items():
        timeout = 0.5 if defect == "hang_step" else TIMEOUT
        t0 = time.process_time()
        report = check_goal_env(
            make(defect), timeout=timeout, factory=functools.partial(make, defect)
        )
        cpu.append(time.process_time() - t0)
        ours = check_id in report.failed_ids(severity)
        counts["goalenvs"] += ours
        sb3, sb3_strict, sb3_lenient = peer_verdict(sb3_check_env, defect)
        gym_, gym_strict, gym_lenient = peer_verdict(gym_check_env, defect)
        counts["sb3"] += sb3_strict
        counts["sb3_lenient"] += sb3_lenient
        counts["gym"] += gym_strict
        counts["gym_lenient"] += gym_lenient
        ours_text = f"{check_id} ({severity})" if ours else "MISSED"
        rows.append((f"{defect}: {what}", ours_text, sb3, gym_))
    n = len(DEFECTS)
    header = ("defect", "goalenvs check", "SB3 check_env", "gymnasium check_env")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    print()
    print(f"caught (an error on the broken env, not on its twin), of {n} defects:")
    print(f"  goalenvs check        {counts['goalenvs']:>3} / {n}")
    print(
        f"  SB3 check_env         {counts['sb3']:>3} / {n}"
        f"   ({counts['sb3_lenient']} counting a new warning as a catch)"
    )
    print(
        f"  gymnasium check_env   {counts['gym']:>3} / {n}"
        f"   ({counts['gym_lenient']} counting a new warning as a catch)"
    )
    print(
        f"goalenvs check CPU per env: median {sorted(cpu)[len(cpu) // 2]:.2f} s, "
        f"max {max(cpu):.2f} s"
    )


def goalenvs_check_cpu() -> None:
    """CPU seconds of a default `goalenvs check` of every goalenvs env (target: < 5 s).

    Each runs in a fresh process, so the figure includes the lazy stable-baselines3
    import of compat.sb3_her, as a user's first run does.
    """
    import importlib
    import json
    import subprocess

    from goalenvs.registration import ENTRIES

    print()
    print("| goalenvs env | errors | warnings | CPU s (footer) | target |")
    print("|---|---|---|---|---|")
    env = child_env(ROOT, SDL_AUDIODRIVER="dummy")
    for entry in ENTRIES:
        try:
            importlib.import_module(entry.module)
        except ImportError:
            print(f"| {entry.id} | - | - | not in this checkout | < 5 |")
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "goalenvs", "check", entry.id, "--json"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
        data = json.loads(proc.stdout)
        print(
            f"| {entry.id} | {data['errors']} | {data['warnings']} | "
            f"{data['cpu_seconds']:.2f} | < 5 |"
        )


if __name__ == "__main__":
    main()
    goalenvs_check_cpu()
