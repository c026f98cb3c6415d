"""The broken-env library through three checkers: goalenvs check, SB3's and gymnasium's.

For every defect of tests/checker/broken_envs.py and of the user-style library
tests/checker/user_envs.py (``user_`` rows), each checker runs on the broken env and on
its correct twin. A checker *caught* a defect when it fails the broken env (goalenvs:
the expected check id at its severity; SB3 / gymnasium: an exception, or, in the lenient
count, a warning) and does not fail the twin the same way: an exception the twin raises
too (SB3 crashing on any wrapped env) is not a catch. Then every correct env (the
twins, the user-style cursor and its Push-like look-alike, every goalenvs env) goes
through the three checkers: a correct env must get 0 errors and 0 warnings.

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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evidence import child_env  # noqa: E402
from gymnasium.utils.env_checker import check_env as gym_check_env  # noqa: E402
from stable_baselines3.common.env_checker import check_env as sb3_check_env  # noqa: E402

from goalenvs.checker import check_goal_env  # noqa: E402
from tests.checker import user_envs  # noqa: E402
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


@dataclass(frozen=True)
class Case:
    """One defect: its row name, the check that must catch it, and how to build the
    broken env and its correct twin (with keyword arguments: a render mode)."""

    name: str
    what: str
    check_id: str
    severity: str
    broken: Callable[..., Any]
    twin: Callable[..., Any]


def cases() -> list[Case]:
    """The toy library's defects (rendered in rgb_array, so gymnasium's check_env checks
    render() too), then the user-style library's."""
    found = [
        Case(
            defect,
            what,
            check_id,
            severity,
            functools.partial(make, defect, render_mode="rgb_array"),
            functools.partial(make_twin, defect, render_mode="rgb_array"),
        )
        for defect, (check_id, severity, _, what) in DEFECTS.items()
    ]
    found += [
        Case(
            f"user_{defect}",
            what,
            check_id,
            severity,
            functools.partial(user_envs.make, defect),
            user_envs.make,
        )
        for defect, (check_id, severity, what) in user_envs.USER_DEFECTS.items()
    ]
    return found


def peer_verdict(check: Any, case: Case) -> tuple[str, bool, bool]:
    """(verdict text, caught strictly (raised), caught leniently (raised or new warning))."""
    kind, detail, warned = run_peer(check, case.broken())
    twin_kind, twin_detail, twin_warned = run_peer(check, case.twin())
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
    library = cases()
    for case in library:
        timeout = 0.5 if case.name == "hang_step" else TIMEOUT
        t0 = time.process_time()
        factory = functools.partial(case.broken)
        report = check_goal_env(case.broken(), timeout=timeout, factory=factory)
        cpu.append(time.process_time() - t0)
        ours = case.check_id in report.failed_ids(case.severity)
        counts["goalenvs"] += ours
        sb3, sb3_strict, sb3_lenient = peer_verdict(sb3_check_env, case)
        gym_, gym_strict, gym_lenient = peer_verdict(gym_check_env, case)
        counts["sb3"] += sb3_strict
        counts["sb3_lenient"] += sb3_lenient
        counts["gym"] += gym_strict
        counts["gym_lenient"] += gym_lenient
        ours_text = f"{case.check_id} ({case.severity})" if ours else "MISSED"
        rows.append((f"{case.name}: {case.what}", ours_text, sb3, gym_))
    n = len(library)
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
    correct_envs()


def peer_clean(check: Any, build: Callable[[], Any]) -> str:
    """A peer checker's verdict on a correct env: clean, warned or raised."""
    kind, detail, warned = run_peer(check, build())
    if kind != "passed":
        return f"{kind} {short(detail, 40)}".strip()
    return f"warned: {short(sorted(warned)[0], 40)}" if warned else "clean"


def correct_envs() -> None:
    """Every correct env of the libraries through the three checkers."""
    twins = {
        "ToyReach (every toy defect's twin)": functools.partial(make_twin, None),
        "ToyReach under an identity RescaleGoals": functools.partial(make_twin, "wrapper_rescales"),
        "user Cursor": user_envs.make,
        "user PushLike": user_envs.make_push_like,
    }
    print()
    print("| correct env | goalenvs check | SB3 check_env | gymnasium check_env |")
    print("|---|---|---|---|")
    clean = 0
    for name, build in twins.items():
        report = check_goal_env(build(), factory=build)
        ok = not report.errors and not report.warnings
        clean += ok
        failed = report.failed_counts()
        ours = f"{failed['error']} errors, {failed['warning']} warnings"
        sb3, gym_ = peer_clean(sb3_check_env, build), peer_clean(gym_check_env, build)
        print(f"| {name} | {ours} | {sb3} | {gym_} |")
    print()
    print(
        f"correct library envs with 0 errors and 0 warnings (goalenvs check): "
        f"{clean} / {len(twins)}"
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
    clean = checked = 0
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
        checked += 1
        clean += data["errors"] == 0 and data["warnings"] == 0
        print(
            f"| {entry.id} | {data['errors']} | {data['warnings']} | "
            f"{data['cpu_seconds']:.2f} | < 5 |"
        )
    print()
    print(f"goalenvs envs with 0 errors and 0 warnings: {clean} / {checked}")


if __name__ == "__main__":
    main()
    goalenvs_check_cpu()
