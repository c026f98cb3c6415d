"""Runs stable-baselines3's own tests/test_her.py with goalenvs' HerReplayBuffer swapped in.

SB3's wheel ships no tests, so the file comes from an SB3 source checkout (give its path;
it is read where it is, never copied into this repository). The child pytest loads
tests/sb3_swap_plugin.py, which rebinds the test module's ``HerReplayBuffer`` to
``goalenvs.her.sb3.HerReplayBuffer``; ``--peer`` runs the same file unchanged, with
SB3's own buffer, for comparison. The output, with the command, SB3's version, the test
file's git blob hash and the pytest summary, goes to
``benchmarks/results/sb3_test_her.log`` and one JSON line per run to
``benchmarks/results/sb3_test_her.jsonl``.

    python benchmarks/sb3_suite.py PATH/TO/stable-baselines3/tests/test_her.py [--peer]

tests/test_sb3_suite.py runs the same thing in CI when ``GOALENVS_SB3_TEST_HER`` names the
file, and asks for every test of it to pass.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import RESULTS, append_jsonl, run_info  # noqa: E402


def git_blob_hash(path: Path) -> str:
    """The file's git blob hash (what ``git hash-object`` prints): names the exact file."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def summary_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line (passed, failed, skipped, ...)."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    if not lines:
        return {}
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", lines[-1])}


def run_suite(test_file: Path, swap: bool) -> tuple[list[str], int, str]:
    """Runs the file in a child pytest (with our buffer when ``swap``): command, rc, output."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "tests"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    command = [sys.executable, "-m", "pytest", str(test_file), "-q", "-rfEs"]
    command += ["-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(test_file.parent)]
    if swap:
        command += ["-p", "sb3_swap_plugin"]
    result = subprocess.run(
        command, cwd=test_file.parent, env=env, capture_output=True, text=True, timeout=1800
    )
    return command, result.returncode, result.stdout + result.stderr


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: runs the suite, appends the log and the JSON record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("test_file", type=Path, help="SB3's tests/test_her.py")
    parser.add_argument("--source", default="", help="where the file came from (repo@commit)")
    parser.add_argument("--peer", action="store_true", help="also run it with SB3's own buffer")
    args = parser.parse_args(argv)
    import stable_baselines3

    test_file = args.test_file.resolve()
    log = RESULTS / "sb3_test_her.log"
    for swap in [True, False] if args.peer else [True]:
        who = "goalenvs.her.sb3.HerReplayBuffer" if swap else "SB3's own HerReplayBuffer"
        info = run_info(
            buffer=who,
            sb3_version=stable_baselines3.__version__,
            test_file_source=args.source,
            test_file_blob=git_blob_hash(test_file),
        )
        start = time.perf_counter()
        command, rc, output = run_suite(test_file, swap)
        seconds = round(time.perf_counter() - start, 1)
        counts = summary_counts(output)
        short = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
        record = {
            **info,
            "pytest": " ".join(Path(c).name if c == str(test_file) else c for c in command[1:]),
            "returncode": rc,
            "counts": counts,
            "seconds": seconds,
            "not_passed": short,
        }
        append_jsonl("sb3_test_her.jsonl", record)
        with open(log, "a") as f:
            f.write(f"# {info['date']} UTC, buffer: {who}\n")
            f.write(f"# stable-baselines3 {info['sb3_version']}; test_her.py from {args.source}")
            f.write(f" (git blob {info['test_file_blob']})\n")
            f.write(f"# machine: {info['machine']}; load: {info['load']}; {seconds} s\n")
            f.write(f"# command: {info['command']}\n")
            f.write(f"# child: {record['pytest']}\n")
            # SB3's training printouts (tables of "|" and "-" lines) are left out.
            lines = [ln for ln in output.splitlines() if ln.strip() and ln[0] not in "|-"]
            f.write("\n".join(lines[-40:]) + "\n\n")
        print(who, rc, counts, seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
