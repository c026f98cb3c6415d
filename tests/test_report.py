"""The docs' generated tables agree with benchmarks/results/ (benchmarks/report.py)."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import report  # noqa: E402


@pytest.fixture
def docs_copy(tmp_path: Path) -> Path:
    for name in report.DOC_FILES:
        shutil.copy(ROOT / "docs" / name, tmp_path / name)
    return tmp_path


def test_every_generated_table_matches_its_result_file(capsys):
    rc = report.main(["--check"])
    assert rc == 0, capsys.readouterr().out


def test_a_figure_edited_by_hand_is_caught(docs_copy, capsys):
    path = docs_copy / "baselines.md"
    text = path.read_text()
    # PointMaze U-maze seed 0's seconds to 0.9, as the file gives them, changed by hand.
    assert "| 0 | 1.00 | 6,000 | 14.5 |" in text
    path.write_text(text.replace("| 0 | 1.00 | 6,000 | 14.5 |", "| 0 | 1.00 | 6,000 | 18 |"))
    assert report.main(["--check", "--docs", str(docs_copy)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert "| 0 | 1.00 | 6,000 | 18 |" in path.read_text()  # --check changed nothing
    assert report.main(["--docs", str(docs_copy)]) == 0  # rewriting puts the file's back
    assert "| 0 | 1.00 | 6,000 | 14.5 |" in path.read_text()


def test_a_block_without_a_builder_or_a_builder_without_a_block_fails(docs_copy, capsys):
    path = docs_copy / "benchmarks.md"
    text = path.read_text()
    path.write_text(text + "\n<!-- report:nothing_here -->\nx\n<!-- /report:nothing_here -->\n")
    with pytest.raises(KeyError, match="nothing_here"):
        report.main(["--check", "--docs", str(docs_copy)])
    path.write_text(text.replace("<!-- report:seed_margins -->", "<!-- gone -->"))
    assert report.main(["--check", "--docs", str(docs_copy)]) == 1
    assert "seed_margins" in capsys.readouterr().out


# ------------------------------------------------------------------ the presets' figures

# A measured figure in words: a duration, a rate, a load, a success rate, or what a run
# reached after so many steps. Outside a generated block a preset comment holds none.
MEASURED = re.compile(
    r"\b\d[\d,.]*\s*(?:s|ms|min|minutes|seconds|hours)\b"
    r"|steps/s|\bper (?:CPU )?second\b|\bload average\b"
    r"|\b[01]\.\d+\s+(?:best\s+)?(?:eval\s+)?success\b"
    r"|\bsuccess\s+(?:\S+\s+){0,3}[01]\.\d+"
    r"|\bafter [\d,.]+k? (?:env steps|steps|updates)\b",
    re.IGNORECASE,
)
PRESETS = ROOT / "goalenvs" / "train" / "presets"


def hand_written_comments(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the comment lines outside ``# report:`` blocks."""
    found, inside = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("# report:"):
            inside = line.removeprefix("# report:")
        elif line == f"# /report:{inside}":
            inside = None
        elif inside is None and line.lstrip().startswith("#"):
            found.append((number, line))
    return found


def test_the_figure_pattern_sees_figures_and_passes_settings():
    for figure in (
        "# Measured: PointReach reaches 1.0 eval success in 16-19 s on one CPU core",
        "# 0.23 +- 0.05 best eval success on 5 seeds",
        "# a pybullet step costs about 2 ms of CPU here",
        "# highway-env steps at about 100 env steps per CPU second",
        "# seed 1 0.92 at 640k (46.8 min), at 200-230 env steps/s",
        "# (2 cores, load average 5-12 from other work)",
        "# 0.954 eval success (1,000 episodes) after 300 updates",
        "# averaged over every goal cell, all cells reach 1.00 after 30k steps",
    ):
        assert MEASURED.search(figure), figure
    for setting in (
        "# cycles of 2 steps and 2 updates, polyak 0.6; 8 envs x 50 steps",
        "# 50 eval episodes (+-0.04 at 0.9); gamma 1 - 1/50; targets clipped to [-20, 0]",
        "# epochs of 25 cycles (20k env steps), 40 updates of 2,048, 3x256",
    ):
        assert not MEASURED.search(setting), setting


@pytest.mark.parametrize("path", sorted(PRESETS.glob("*.toml")), ids=lambda p: p.name)
def test_every_preset_figure_comes_from_a_generated_block(path):
    """Measured figures and [measured] tables sit in blocks that benchmarks/report.py
    writes from benchmarks/results/ (and --check holds to them); the hand-written
    comments explain the settings and quote no measurement."""
    text = path.read_text()
    quoted = [
        f"line {n}: {line}" for n, line in hand_written_comments(text) if MEASURED.search(line)
    ]
    assert not quoted, f"{path.name} quotes figures outside a generated block: {quoted}"
    blocks = re.findall(r"^# report:(\S+)\n(.*?)^# /report:\1$", text, re.M | re.S)
    if "[measured]" in text:
        assert any("[measured]" in body for _, body in blocks), path.name


def test_a_preset_figure_edited_by_hand_is_caught(tmp_path, capsys):
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = presets / "parking.toml"
    text = path.read_text()
    assert "env_steps_per_s = 580\n" in text
    path.write_text(text.replace("env_steps_per_s = 580\n", "env_steps_per_s = 600\n"))
    assert report.main(["--check", "--presets", str(presets)]) == 1
    assert "parking.toml" in capsys.readouterr().out
    assert report.main(["--presets", str(presets)]) == 0
    assert path.read_text() == text


def test_the_readmes_fetch_push_figure_is_the_files():
    """README's FetchPush line: the env steps at which each run of the fetch_push preset
    (benchmarks/results/manipulation/push_s*.csv) first reached 0.9."""
    steps = []
    for csv_path in sorted((report.RESULTS / "manipulation").glob("push_s*.csv")):
        rows = report._progress(csv_path)
        steps.append(next(r["env_steps"] for r in rows if r["eval_success"] >= 0.9))
    span = f"{min(steps) / 1000:.0f}" + (
        f"-{max(steps) / 1000:.0f}" if max(steps) > min(steps) else ""
    )
    figure = f">= 0.9 in {span}k env steps"
    assert figure in (ROOT / "README.md").read_text(), figure


def test_each_average_actor_command_names_its_own_date_and_load(monkeypatch):
    """Rows measured by a later command are not described by the first command's header."""
    machine = {"cpu": "AMD EPYC", "cores": 2, "torch": "2.13.0+cpu", "cpu_bf16": True}

    def record(run: str, epoch: int, command: str, date: str, load: float) -> dict:
        return {
            "run": run,
            "epoch": epoch,
            "env_steps": epoch * 20_000,
            "polyak": 0.9,
            "episodes": 200,
            "success": {"actor": 0.7, "target": 0.75},
            "date": date,
            "command": command,
            "machine": machine,
            "load": [load, load, load],
        }

    records = [
        record("a", 49, "python average_actor.py a", "2026-01-01 01:00", 3.2),
        record("a", 50, "python average_actor.py a", "2026-01-01 01:02", 3.5),
        record("b", 50, "python average_actor.py b", "2026-01-02 07:00", 1.1),
    ]
    monkeypatch.setattr(report, "read_jsonl", lambda name: records)
    text = report.average_actor()
    headers = [line for line in text.splitlines() if line.startswith("`python")]
    assert len(headers) == 2
    assert "2026-01-01 01:00 UTC" in headers[0] and "load average 3.2-3.5" in headers[0]
    assert "2026-01-02 07:00 UTC" in headers[1] and "load average 1.1 from" in headers[1]
    assert text.index("| b | 50 |") > text.index(headers[1]) > text.index("| a | 50 |")


def test_a_kept_runs_cpu_is_named_as_a_reader_names_it():
    assert report._cpu_words({"cpu": "Intel(R) Xeon(R) Processor"}) == "Intel Xeon"
    assert report._cpu_words({"cpu": "AMD EPYC 7B13 64-Core Processor"}) == "AMD EPYC 7B13 64-Core"
    # older records keep the machine as a line of text, the model after the cores or none
    assert report._cpu_words("x86_64, 2 cores, AMD EPYC") == "AMD EPYC"
    assert report._cpu_words("x86_64, 2 cores, ") == ""


def test_a_scaling_block_beside_a_revision_never_measured_names_env_and_revision():
    with pytest.raises(SystemExit, match="no preset run on FetchSlide-v4 beside 0000000"):
        report._preset_beside("FetchSlide-v4", "0000000")
    _, now, before, rev = report._preset_beside("FetchSlide-v4", "b7f69dc")
    assert rev == "b7f69dc" and now and before
    assert all(row["mode"] == "preset @ b7f69dc" for row in before)
