"""The README and docs/*.md: every Python block runs as written, and they speak of the
project alone (no words about how it was built).

Each file's ```python blocks run in order in one namespace (a block may use what an
earlier one made), in a temporary folder. A block whose first line is ``# needs: a, b``
needs those importable modules (``cuda``: a CUDA device) and is skipped with that reason,
never silently; the blocks after a skipped one still run. A block that is deliberately
not runnable takes another info string (```text).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)
NEEDS = re.compile(r"\A# needs: *(.+)\n")

# Words about how the project was made, not about the project.
BUILD_HISTORY = re.compile(
    r"\bsessions?\b|\bissues? ?#?\d+|\blent to\b|\bhelpers?\b|\bwaves?\b|\bthis work\b"
    r"|\bengineers?\b|\bthe lead\b|\bowed\b|\bthe CEO\b",
    re.IGNORECASE,
)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _params() -> list:
    return [pytest.param(path, id=_name(path)) for path in DOCS]


def python_blocks(text: str) -> list[str]:
    """The ```python blocks of a markdown text, in order."""
    return [body for info, body in FENCE.findall(text) if info.strip() == "python"]


def _missing(needs: str) -> list[str]:
    missing = []
    for name in (n.strip() for n in needs.split(",")):
        if name == "cuda":
            torch_spec = importlib.util.find_spec("torch")
            if torch_spec is None or not __import__("torch").cuda.is_available():
                missing.append("a CUDA device")
        elif importlib.util.find_spec(name) is None:
            missing.append(name)
    return missing


@pytest.fixture
def one_torch_thread():
    """Small nets gain nothing from more threads; on a shared machine they only contend."""
    if importlib.util.find_spec("torch") is None:
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_block_parser_sees_every_fence_kind():
    text = "a\n```python\nx = 1\n```\n```text\nnot python\n```\n```python\ny = x\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = x\n"]


@pytest.mark.parametrize("path", _params())
def test_every_python_block_runs_as_written(path, tmp_path, monkeypatch, one_torch_thread):
    blocks = python_blocks(path.read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    skipped = []
    for number, block in enumerate(blocks, 1):
        needs = NEEDS.match(block)
        missing = _missing(needs.group(1)) if needs else []
        if missing:
            skipped.append(f"block {number} needs {', '.join(missing)}")
            continue
        code = compile(block, f"{_name(path)} python block {number}", "exec")
        exec(code, namespace)
    if skipped:
        pytest.skip(
            f"{_name(path)}: ran {len(blocks) - len(skipped)} blocks; " + "; ".join(skipped)
        )


def test_the_readme_starts_where_a_user_starts_keeps_its_setup_facts_and_names_every_env():
    import goalenvs

    raw = (ROOT / "README.md").read_text()
    first_screen = "\n".join(raw.splitlines()[:45])
    for step in ("make demo", "pip install 'goalenvs[train]'", "goalenvs train ", "goalenvs play ",
                 "goalenvs check ", "replay_buffer_class=HerReplayBuffer"):  # fmt: skip
        assert step in first_screen, step
    assert "|---|" not in first_screen  # no tables before the first commands
    text = " ".join(raw.split())
    for fact in (
        "`make demo` — creates `.venv` if missing, installs, trains DDPG+HER on "
        "`goalenvs/PointReach-v0` to full success, and prints where the policy and the "
        "learning-curve picture went.",
        "`make test` — creates `.venv` if missing, installs, runs the whole test suite.",
        "The Makefile installs torch==2.13.0 first",
        "mujoco==3.3.7 for its Fetch envs (mujoco 4.0 breaks them)",
        "pip install 'goalenvs[train]'",
    ):
        assert fact in text
    assert "TORCH := torch==2.13.0" in (ROOT / "Makefile").read_text()
    assert "mujoco==3.3.7" in (ROOT / "pyproject.toml").read_text()
    table = raw[raw.index("## Environments") : raw.index("PointMaze takes any layout")]
    for env_id in goalenvs.ENV_IDS:
        assert f"`{env_id}`" in table, env_id
    pictures = re.findall(r'<img src="(docs/images/[^"]+)"', table)
    assert len(pictures) == 5 and all((ROOT / p).is_file() for p in pictures)


def test_the_docs_link_only_to_files_that_exist_or_come_with_the_evidence():
    expected_elsewhere = {"docs/benchmarks.md"}  # written from benchmarks/results/
    for path in DOCS:
        for target in re.findall(r"\]\(([^)#]+\.md)\)", path.read_text()):
            linked = (path.parent / target).resolve().relative_to(ROOT).as_posix()
            assert (ROOT / linked).is_file() or linked in expected_elsewhere, (path, target)


# ------------------------------------------------------------------ measured figures

# A measured figure: a rate (env steps/s, updates/s), env steps something took ("at 260,000
# env steps"; "N env steps an epoch" and "a cycle" are settings), a duration, a ratio
# ("1.32x"; "3x256" is a network) or a count in thousands ("340k"). Outside a block that
# benchmarks/report.py draws from benchmarks/results/, README, docs and the presets'
# comments hold none (test_report.py reads the presets' comments).
MEASURED_FIGURE = re.compile(
    r"\b\d[\d,.]*\s*[kKM]?\s+(?:env steps|steps|updates|transitions)/s\b"
    r"|\b\d[\d,.]*[kM]?\s+env steps\b(?! an epoch| a cycle)"
    r"|\b\d[\d,.]*\s*(?:min|minutes|hours?|seconds|s|ms|us|µs)\b(?![-\w])"
    r"|\b\d+(?:\.\d+)?x\b(?!\d)"
    r"|\b\d+(?:\.\d+)?k\b",
)
GENERATED = re.compile(r"<!-- report:([\w.-]+) -->\n.*?<!-- /report:\1 -->", re.S)


def figures_outside_blocks(text: str) -> list[str]:
    """``line N: figure`` for each measured figure of ``text`` outside generated blocks."""
    rest = GENERATED.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    return [
        f"line {number}: {match.group(0)!r}"
        for number, line in enumerate(rest.splitlines(), 1)
        for match in MEASURED_FIGURE.finditer(line)
    ]


def test_the_figure_pattern_sees_figures_outside_blocks_and_passes_settings():
    for figure in (
        "reached 0.9 at 260,000 env steps",
        "at 664 env steps/s",
        "after 16.6 s",
        "a 58.4 s first epoch",
        "1.32x the single env",
        "in 260-300k",
        "45.4 min",
        "20 updates/s",
        "643 us",
    ):
        assert MEASURED_FIGURE.search(figure), figure
    for setting in (
        "16 envs x 50 steps a cycle, 40 updates of 2,048, 3x256",
        "= 6,000 env steps an epoch, 900,000 in all",
        "`--minutes 30`",
        "mujoco==3.3.7 for its Fetch envs",
        "torch==2.13.0",
        "goalenvs/PointReach-v0",
    ):
        assert not MEASURED_FIGURE.search(setting), setting
    # a figure inside a generated block is not counted
    text = "a\n<!-- report:t -->\n| 260,000 env steps |\n<!-- /report:t -->\nat 1.5x\n"
    assert figures_outside_blocks(text) == ["line 5: '1.5x'"]


@pytest.mark.parametrize("path", _params())
def test_docs_speak_of_the_project_alone_and_quote_figures_only_in_generated_blocks(path):
    text = path.read_text()
    found = [f"line {text[: m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
             for m in BUILD_HISTORY.finditer(text)]  # fmt: skip
    assert not found, f"{_name(path)} speaks of how it was built: {found}"
    found = figures_outside_blocks(text)
    assert not found, f"{_name(path)} quotes measured figures by hand: {found}"


@pytest.mark.parametrize(
    ("path", "most"),
    [("README.md", 200), ("docs/baselines.md", 500), ("benchmarks/report.py", 800)],
)
def test_the_readme_the_results_page_and_the_renderer_stay_short(path, most):
    # A manual and a results page, not a notebook: each grows by a link, not a chapter.
    count = len((ROOT / path).read_text().splitlines())
    assert count <= most, f"{path} has {count} lines; at most {most}"
