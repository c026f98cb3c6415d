"""The docs' generated tables agree with benchmarks/results/ (benchmarks/report.py)."""

from __future__ import annotations

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
