"""The docs' generated tables agree with benchmarks/results/ (benchmarks/report.py)."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import report  # noqa: E402

from tests.test_docs import MEASURED_FIGURE  # noqa: E402


@pytest.fixture
def docs_copy(tmp_path: Path) -> Path:
    for path in (ROOT / "docs").glob("*.md"):
        shutil.copy(path, tmp_path / path.name)
    return tmp_path


def test_every_generated_table_matches_its_records(capsys):
    rc = report.main(["--check"])
    assert rc == 0, capsys.readouterr().out


def test_a_figure_edited_by_hand_is_caught(docs_copy, capsys):
    path = docs_copy / "baselines.md"
    text = path.read_text()
    # FetchPush seed 1: the env steps at which it first reached 0.9, as its record gives them.
    row = next(line for line in text.splitlines() if line.startswith("| 1 | 220,000 | 240,000 |"))
    path.write_text(
        text.replace(row, row.replace("| 240,000 | 280,000 |", "| 240,000 | 260,000 |"))
    )
    assert report.main(["--check", "--docs", str(docs_copy)]) == 1
    assert "out of date" in capsys.readouterr().out
    assert "| 240,000 | 260,000 |" in path.read_text()  # --check changed nothing
    assert report.main(["--docs", str(docs_copy)]) == 0  # rewriting puts the record's back
    assert row in path.read_text()


def test_a_block_without_a_table_or_a_table_without_a_block_fails(docs_copy, capsys):
    path = docs_copy / "benchmarks.md"
    text = path.read_text()
    path.write_text(text + "\n<!-- report:nothing_here -->\nx\n<!-- /report:nothing_here -->\n")
    assert report.main(["--check", "--docs", str(docs_copy)]) == 1
    assert capsys.readouterr().out == (
        "report: report:nothing_here is declared nowhere in benchmarks/tables.toml\n"
    )
    path.write_text(text.replace("<!-- report:seed_margins -->", "<!-- gone -->"))
    assert report.main(["--check", "--docs", str(docs_copy)]) == 1
    assert "seed_margins" in capsys.readouterr().out


# ------------------------------------------------------------------ bad input


@pytest.fixture
def results(tmp_path: Path, monkeypatch) -> Path:
    """A results folder of its own: the kept FetchPush runs and the seed margins."""
    folder = tmp_path / "results"
    (folder / "manipulation").mkdir(parents=True)
    for path in (report.RESULTS / "manipulation").glob("push_s*"):
        shutil.copy(path, folder / "manipulation" / path.name)
    shutil.copy(report.RESULTS / "seed_margins.jsonl", folder / "seed_margins.jsonl")
    monkeypatch.setattr(report, "RESULTS", folder)
    return folder


def test_a_record_without_a_field_a_table_needs_names_file_and_field(results):
    path = results / "manipulation" / "push_s1.json"
    meta = json.loads(path.read_text())
    del meta["commit"]
    path.write_text(json.dumps(meta))
    with pytest.raises(
        report.ReportError, match=r"manipulation/push_s1.json has no field 'commit'"
    ):
        report.draw("runs_fetch", report.declared()["runs_fetch"])


def test_a_missing_field_fails_the_check_in_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "results"
    shutil.copytree(report.RESULTS, folder)
    monkeypatch.setattr(report, "RESULTS", folder)
    lines = (folder / "seed_margins.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    del first["first_epoch_at_threshold"]
    (folder / "seed_margins.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert report.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert out == (
        "report: table seed_margins: seed_margins.jsonl has no field 'first_epoch_at_threshold'\n"
    )


def test_a_filter_that_matches_no_record_fails():
    spec = {**report.declared()["runs_fetch"], "where": {"task": "no_such_task"}}
    with pytest.raises(report.ReportError, match="matches no record"):
        report.draw("runs_fetch", spec)
    spec = {**spec, "source": "no_such_folder/*.json"}
    with pytest.raises(report.ReportError, match="no record in benchmarks/results/no_such_folder"):
        report.draw("runs_fetch", spec)


def test_the_shadow_hand_table_says_so_until_a_run_lands_and_then_shows_it(results):
    spec = report.declared()["runs_hand"]
    assert report.draw("runs_hand", spec) == spec["empty"]
    runs = results / "manipulation"  # a HandReach run as benchmarks/fetch.py keeps it
    shutil.copy(runs / "push_s0.csv", runs / "hand_reach_s0.csv")
    meta = json.loads((runs / "push_s0.json").read_text())
    meta.update(task="hand_reach", env_id="gymnasium_robotics:HandReach-v3")
    (runs / "hand_reach_s0.json").write_text(json.dumps(meta))
    table = report.draw("runs_hand", spec)
    assert table.startswith("`gymnasium_robotics:HandReach-v3`")
    assert "| 0 |" in table and "| 85f5e3d | Intel Xeon | bf16 |" in table


def test_merged_rows_join_what_differs_and_keep_what_agrees():
    """The tried table's row for the FetchPush preset: its three seeds' figures each, their
    one commit once."""
    table = report.draw("tried", report.declared()["tried"])
    push = table[table.index("`gymnasium_robotics:FetchPush-v4`") :]
    row = next(line for line in push.splitlines() if line.startswith("| the preset now |"))
    assert row.startswith(
        "| the preset now | 0 / 1 / 2 | 240,000 / 240,000 / 280,000 | 300,000 / 280,000 / 280,000 |"
    )
    assert row.endswith("| 85f5e3d |")


def test_a_records_cpu_is_named_as_a_reader_names_it():
    assert report.cpu_words({"cpu": "Intel(R) Xeon(R) Processor"}) == "Intel Xeon"
    assert report.cpu_words({"cpu": "AMD EPYC 7B13 64-Core Processor"}) == "AMD EPYC 7B13 64-Core"
    # older records keep the machine as a line of text, the model after the cores or none
    for machine in ("x86_64, 2 cores, AMD EPYC", {"cpu": "AMD EPYC", "cores": 2}):
        assert report.cpu_words(machine) == "AMD EPYC", machine
    # a bare architecture, or nothing: no CPU model (test_evidence's records need one)
    for machine in ({"cpu": "x86_64"}, {"cores": 2, "cpu": "x86_64"}, "x86_64, 2 cores", None):
        assert report.cpu_words(machine) == "", machine
    assert report.cpu_words("x86_64, 2 cores, ") == ""


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
    comments explain the settings and quote no measurement, in words (MEASURED) or as the
    docs' figures (test_docs.MEASURED_FIGURE)."""
    text = path.read_text()
    quoted = [
        f"line {n}: {line}"
        for n, line in hand_written_comments(text)
        if MEASURED.search(line) or MEASURED_FIGURE.search(line)
    ]
    assert not quoted, f"{path.name} quotes figures outside a generated block: {quoted}"
    blocks = re.findall(r"^# report:(\S+)\n(.*?)^# /report:\1$", text, re.M | re.S)
    if "[measured]" in text:
        assert any("[measured]" in body for _, body in blocks), path.name


def test_a_preset_figure_edited_by_hand_is_caught(tmp_path, capsys):
    presets = tmp_path / "presets"
    shutil.copytree(PRESETS, presets, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    path = presets / "point_reach.toml"
    text = path.read_text()
    measured = next(line for line in text.splitlines() if line.startswith("env_steps_per_s = "))
    path.write_text(text.replace(measured, "env_steps_per_s = 1"))
    assert report.main(["--check", "--presets", str(presets)]) == 1
    assert "point_reach.toml" in capsys.readouterr().out
    assert report.main(["--presets", str(presets)]) == 0
    assert path.read_text() == text
