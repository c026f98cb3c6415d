"""stable-baselines3's own tests/test_her.py with goalenvs' HerReplayBuffer swapped in.

SB3's wheel ships no tests; its source distribution on the package registry does. Three
commands:

``fetch DEST``
    downloads the source distribution of the installed stable-baselines3 (``pip download
    --no-binary :all: --no-deps stable-baselines3==VERSION``) and extracts its
    ``tests/test_her.py`` (with the ``conftest.py`` and ``__init__.py`` of its tests/, where
    the release has them) to ``DEST/stable-baselines3-VERSION/tests/``. The Makefile's
    setup runs it into ``.venv/sb3-tests``, where tests/test_sb3_suite.py finds it: the
    file is never copied into this repository, and the tests need no network.

``run [TEST_FILE] [--peer]``
    runs the whole file in a child pytest whose plugin (tests/sb3_swap_plugin.py) rebinds
    the test module's ``HerReplayBuffer`` to ``goalenvs.her.sb3.HerReplayBuffer``;
    ``--peer`` runs it again unchanged, with SB3's own buffer. The output (command, SB3's
    version, the file's git blob hash, the pytest summary) goes to
    ``benchmarks/results/sb3_test_her.log`` and one JSON line per run to
    ``sb3_test_her.jsonl``.

``seeds TEST_NAME [--seeds 0 1 ...] [TEST_FILE]``
    runs one test of the file (one that fixes its seed) once per seed and buffer, with
    every SB3 algorithm it builds reseeded (the plugin's ``--sb3-seed``): its pass rate
    over seeds on both buffers, one JSON line per run to ``sb3_left_out.jsonl``. A test
    that tests/test_sb3_suite.py leaves out is named there with this rate.

TEST_FILE defaults to the file ``fetch`` put under this interpreter's prefix.

    python benchmarks/sb3_suite.py fetch .venv/sb3-tests
    python benchmarks/sb3_suite.py run --peer
    python benchmarks/sb3_suite.py seeds test_performance_her --seeds 0 1 2 3 4 5 6 7 8 9
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import RESULTS, append_jsonl, machine_words, run_info  # noqa: E402

DIST = "stable-baselines3"
# What test_her.py may need beside it in SB3's tests/ (the 2.x releases need neither).
COMPANIONS = ("test_her.py", "conftest.py", "__init__.py")
BUFFERS = {True: "goalenvs.her.sb3.HerReplayBuffer", False: "SB3's own HerReplayBuffer"}


def installed_version() -> str:
    """The version of stable-baselines3 installed beside this interpreter."""
    return version(DIST)


def fetched_test_her(root: Path | None = None, sb3_version: str | None = None) -> Path:
    """Where ``fetch`` puts test_her.py: ``ROOT/stable-baselines3-VERSION/tests/test_her.py``,
    with ``root`` defaulting to ``sys.prefix/sb3-tests`` (``.venv/sb3-tests`` under make)."""
    root = Path(sys.prefix) / "sb3-tests" if root is None else root
    sb3_version = installed_version() if sb3_version is None else sb3_version
    return root / f"{DIST}-{sb3_version}" / "tests" / "test_her.py"


def extract_tests(sdist: Path, target: Path) -> list[str]:
    """Extracts the COMPANIONS found directly under the source distribution's tests/ into
    ``target`` (a folder); returns their names. Fails when test_her.py is not among them."""
    with tarfile.open(sdist) as archive:
        members = {
            Path(m.name).name: m
            for m in archive.getmembers()
            if m.isfile()
            and len(Path(m.name).parts) == 3
            and Path(m.name).parts[1] == "tests"
            and Path(m.name).name in COMPANIONS
        }
        if "test_her.py" not in members:
            raise FileNotFoundError(f"{sdist.name} has no <top>/tests/test_her.py")
        target.mkdir(parents=True, exist_ok=True)
        for name, member in members.items():
            source = archive.extractfile(member)
            assert source is not None  # a regular file, checked above
            (target / name).write_bytes(source.read())
    return sorted(members)


def fetch(dest: Path) -> Path:
    """Downloads the installed version's source distribution and extracts its test_her.py
    under ``dest``; returns the extracted file's path."""
    sb3_version = installed_version()
    target = fetched_test_her(dest, sb3_version).parent
    with tempfile.TemporaryDirectory() as download:
        command = [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:"]
        command += ["--no-deps", f"{DIST}=={sb3_version}", "--dest", download]
        subprocess.run(command, check=True)
        (sdist,) = Path(download).glob("*.tar.gz")
        names = extract_tests(sdist, target)
        digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    (target.parent / "SOURCE").write_text(
        f"{sdist.name} sha256 {digest}\nextracted: {', '.join(names)}\n"
    )
    return target / "test_her.py"


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


def child_env() -> dict[str, str]:
    """The child pytest's environment: one thread, tests/ (the plugin) and the checkout
    first on the path, whatever PYTHONPATH held kept after them."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "tests"), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return env


def run_suite(test_file: Path, swap: bool, extra: Sequence[str] = ()) -> tuple[list[str], int, str]:
    """Runs the file in a child pytest (with our buffer when ``swap``): command, rc, output."""
    command = [sys.executable, "-m", "pytest", str(test_file), "-q", "-rfEs"]
    command += ["-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(test_file.parent)]
    command += ["-p", "sb3_swap_plugin", *([] if swap else ["--sb3-keep-buffer"]), *extra]
    result = subprocess.run(
        command,
        cwd=test_file.parent,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return command, result.returncode, result.stdout + result.stderr


def _child_words(command: list[str], test_file: Path) -> str:
    return " ".join(Path(c).name if c == str(test_file) else c for c in command[1:])


def run(test_file: Path, peer: bool, source: str) -> None:
    """The whole file with each buffer: sb3_test_her.log and one JSON line per run."""
    log = RESULTS / "sb3_test_her.log"
    for swap in [True, False] if peer else [True]:
        who = BUFFERS[swap]
        info = run_info(
            buffer=who,
            sb3_version=installed_version(),
            test_file_source=source,
            test_file_blob=git_blob_hash(test_file),
        )
        start = time.perf_counter()
        command, rc, output = run_suite(test_file, swap)
        seconds = round(time.perf_counter() - start, 1)
        counts = summary_counts(output)
        short = [line for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
        record = {
            **info,
            "pytest": _child_words(command, test_file),
            "returncode": rc,
            "counts": counts,
            "seconds": seconds,
            "not_passed": short,
            "load_after": [round(x, 2) for x in os.getloadavg()],
        }
        append_jsonl("sb3_test_her.jsonl", record)
        with open(log, "a") as f:
            f.write(f"# {info['date']} UTC, buffer: {who}\n")
            f.write(f"# stable-baselines3 {info['sb3_version']}; test_her.py from {source}")
            f.write(f" (git blob {info['test_file_blob']})\n")
            f.write(
                f"# machine: {machine_words(info['machine'])}; load: {info['load']}; {seconds} s\n"
            )
            f.write(f"# command: {info['command']}\n")
            f.write(f"# child: {record['pytest']}\n")
            # SB3's training printouts (tables of "|" and "-" lines) are left out.
            lines = [ln for ln in output.splitlines() if ln.strip() and ln[0] not in "|-"]
            f.write("\n".join(lines[-40:]) + "\n\n")
        print(who, rc, counts, seconds)


def seeds(test_file: Path, test_name: str, seed_list: Sequence[int], source: str) -> None:
    """``test_name`` once per seed and buffer, reseeded: sb3_left_out.jsonl."""
    for swap in (True, False):
        for seed in seed_list:
            info = run_info(
                buffer=BUFFERS[swap],
                sb3_version=installed_version(),
                test_file_source=source,
                test_file_blob=git_blob_hash(test_file),
                test=test_name,
                seed=seed,
            )
            start = time.perf_counter()
            extra = ["-k", test_name, "--sb3-seed", str(seed)]
            command, rc, output = run_suite(test_file, swap, extra)
            seconds = round(time.perf_counter() - start, 1)
            counts = summary_counts(output)
            found = re.search(r"ep_success_buffer mean after learn: ([\d. ]*)$", output, re.M)
            values = [float(v) for v in found.group(1).split()] if found else []
            record = {
                **info,
                "pytest": _child_words(command, test_file),
                "passed": rc == 0 and counts.get("passed", 0) > 0,
                "counts": counts,
                "success_after_learn": values,
                "seconds": seconds,
                "load_after": [round(x, 2) for x in os.getloadavg()],
            }
            append_jsonl("sb3_left_out.jsonl", record)
            print(BUFFERS[swap], seed, record["passed"], values, seconds)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: fetch, run or seeds (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    fetch_parser = commands.add_parser("fetch", help="download and extract test_her.py")
    fetch_parser.add_argument("dest", type=Path, help="the folder to extract under")
    run_parser = commands.add_parser("run", help="the whole file, with our buffer")
    seeds_parser = commands.add_parser("seeds", help="one test over seeds, both buffers")
    seeds_parser.add_argument("test_name", help="the test's name, as for pytest -k")
    seeds_parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    run_parser.add_argument("--peer", action="store_true", help="also with SB3's own buffer")
    for sub in (run_parser, seeds_parser):
        sub.add_argument("test_file", type=Path, nargs="?", help="default: the fetched one")
        sub.add_argument("--source", default="", help="where the file came from")
    args = parser.parse_args(argv)
    if args.command == "fetch":
        print(fetch(args.dest))
        return 0
    test_file = (args.test_file or fetched_test_her()).resolve()
    if not test_file.is_file():
        parser.error(f"test_file {str(test_file)!r} does not exist; run the fetch command")
    source = args.source
    if not source and args.test_file is None:
        sidecar = test_file.parent.parent / "SOURCE"
        source = sidecar.read_text().splitlines()[0] if sidecar.is_file() else ""
    if args.command == "run":
        run(test_file, args.peer, source)
    else:
        seeds(test_file, args.test_name, args.seeds, source)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
