"""stable-baselines3's own HER tests (its tests/test_her.py) with goalenvs' adapter swapped in.

The file comes from the source distribution of the installed stable-baselines3 (its wheel
ships no tests): the Makefile's setup downloads it and extracts the file into
``.venv/sb3-tests/stable-baselines3-VERSION/tests/`` (``python benchmarks/sb3_suite.py
fetch DEST``), so the tests need no network. ``$GOALENVS_SB3_TEST_HER`` names another
copy instead. The file runs in a child pytest whose plugin (tests/sb3_swap_plugin.py)
rebinds the test module's ``HerReplayBuffer`` to ``goalenvs.her.sb3.HerReplayBuffer``.

Every test of the file must pass but those in ``LEFT_OUT``, each named with its reason
and its pass rate over seeds on both buffers, measured by ``python
benchmarks/sb3_suite.py seeds NAME`` into benchmarks/results/sb3_left_out.jsonl (a test
below holds the reason's figures to that file).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

sb3 = pytest.importorskip("stable_baselines3")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import sb3_suite  # noqa: E402

LEFT_OUT = {
    "test_performance_her": (
        "DQN+HER on 10 bits must pass 0.9 training success at the one seed the test fixes; "
        "over seeds 0-39 it passed 17/40 with goalenvs' buffer and 21/40 with SB3's own "
        "(benchmarks/results/sb3_left_out.jsonl): a coin toss on either buffer"
    ),
}
RATE = re.compile(r"seeds (\d+)-(\d+) it passed (\d+)/(\d+) with goalenvs' buffer and (\d+)/(\d+)")


def sb3_test_her() -> Path | None:
    """The test_her.py to run: ``$GOALENVS_SB3_TEST_HER``, else the one setup fetched for
    the installed version; None where neither is a file."""
    override = os.environ.get("GOALENVS_SB3_TEST_HER")
    candidate = Path(override) if override else sb3_suite.fetched_test_her()
    return candidate if candidate.is_file() else None


def test_the_fetched_file_is_found_under_the_interpreters_prefix_by_version(monkeypatch):
    monkeypatch.delenv("GOALENVS_SB3_TEST_HER", raising=False)
    expected = Path(sys.prefix) / "sb3-tests" / f"stable-baselines3-{sb3.__version__}"
    assert sb3_suite.fetched_test_her() == expected / "tests" / "test_her.py"
    monkeypatch.setenv("GOALENVS_SB3_TEST_HER", __file__)
    assert sb3_test_her() == Path(__file__)


def test_fetch_extracts_test_her_and_its_companions_from_an_sdist(tmp_path):
    import tarfile

    top = tmp_path / "stable_baselines3-9.9.9"
    (top / "tests").mkdir(parents=True)
    (top / "tests" / "test_her.py").write_text("def test_x():\n    pass\n")
    (top / "tests" / "test_other.py").write_text("")
    (top / "tests" / "conftest.py").write_text("# fixtures\n")
    (top / "setup.py").write_text("")
    sdist = tmp_path / "stable_baselines3-9.9.9.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        archive.add(top, arcname=top.name)
    target = tmp_path / "out"
    assert sb3_suite.extract_tests(sdist, target) == ["conftest.py", "test_her.py"]
    assert (target / "test_her.py").read_text() == "def test_x():\n    pass\n"
    assert sorted(p.name for p in target.iterdir()) == ["conftest.py", "test_her.py"]
    empty = tmp_path / "empty.tar.gz"
    with tarfile.open(empty, "w:gz") as archive:
        archive.add(top / "setup.py", arcname="stable_baselines3-9.9.9/setup.py")
    with pytest.raises(FileNotFoundError, match=r"empty\.tar\.gz has no <top>/tests/test_her\.py"):
        sb3_suite.extract_tests(empty, tmp_path / "none")


def test_each_left_out_test_has_its_pass_rate_on_file():
    """The figures in LEFT_OUT's reasons are those of sb3_left_out.jsonl for the installed
    stable-baselines3 (the latest run of each seed and buffer)."""
    path = ROOT / "benchmarks" / "results" / "sb3_left_out.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for name, reason in LEFT_OUT.items():
        first, last, ours, ours_of, peer, peer_of = map(int, RATE.search(reason).groups())
        latest = {
            (r["buffer"], r["seed"]): r["passed"]
            for r in records
            if r["test"] == name and r["sb3_version"] == sb3.__version__
        }
        for who, passed, runs in (
            (sb3_suite.BUFFERS[True], ours, ours_of),
            (sb3_suite.BUFFERS[False], peer, peer_of),
        ):
            outcomes = [latest[(who, seed)] for seed in range(first, last + 1)]
            assert (sum(outcomes), len(outcomes)) == (passed, runs), (name, who, outcomes)


@pytest.mark.slow
def test_sb3s_own_her_tests_pass_with_our_buffer(tmp_path: Path, capsys) -> None:
    test_file = sb3_test_her()
    if test_file is None:
        pytest.skip(
            f"no tests/test_her.py of stable-baselines3 {sb3.__version__} at "
            f"{sb3_suite.fetched_test_her()}: `make setup` (or `python benchmarks/sb3_suite.py "
            "fetch DEST` with GOALENVS_SB3_TEST_HER=DEST/.../test_her.py) fetches it"
        )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    # Prepended, never replaced: packages found through PYTHONPATH stay reachable.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    start = time.perf_counter()
    # SB3's file runs under its own defaults (-c os.devnull), not our pytest settings.
    argv = [sys.executable, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", "-rs"]
    argv += ["-p", "sb3_swap_plugin", "-c", os.devnull, "--rootdir", str(tmp_path)]
    argv += ["-k", " and ".join(f"not {name}" for name in LEFT_OUT)]
    result = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    seconds = time.perf_counter() - start
    output = result.stdout + result.stderr
    swapped = f"HerReplayBuffer swapped for goalenvs.her.sb3.HerReplayBuffer in: {test_file.stem}"
    assert swapped in output, output[-4000:]
    summary = [line for line in output.splitlines() if re.search(r"\d+ passed", line)]
    assert summary, output[-4000:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary[-1])}
    assert result.returncode == 0, output[-4000:]
    # Nothing failed or errored, and the only skips are SB3's own (gSDE is SAC's only).
    assert set(counts) <= {"passed", "skipped", "deselected", "warnings"}, summary[-1]
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    assert all("Only SAC has gSDE support" in line for line in skips), skips
    assert counts.get("deselected", 0) == len(LEFT_OUT) and counts["passed"] > 0, summary[-1]
    with capsys.disabled():
        left_out = "; ".join(f"{name}: {why}" for name, why in LEFT_OUT.items())
        print(
            f"\nstable-baselines3 {sb3.__version__}'s {test_file.name} with goalenvs' buffer: "
            f"{counts['passed']} passed, {counts.get('skipped', 0)} skipped (gSDE, as for "
            f"SB3's own), {len(LEFT_OUT)} left out ({left_out}); {seconds:.0f} s"
        )
