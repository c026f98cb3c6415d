"""The tables of docs/baselines.md and docs/benchmarks.md, built from benchmarks/results/.

A generated table sits in its doc between two markers::

    <!-- report:NAME -->
    ... (written by this script: do not edit by hand)
    <!-- /report:NAME -->

``python benchmarks/report.py`` rewrites every marked block from the result files;
``python benchmarks/report.py --check`` changes nothing and exits 1, naming the blocks,
when a doc differs from what the files give (tests/test_report.py runs it). A block whose
name has no builder here, or a builder whose block is missing, is an error too.
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import RESULTS, read_jsonl  # noqa: E402

DOCS = ROOT / "docs"
BLOCK = re.compile(r"(<!-- report:([\w.-]+) -->\n)(.*?)(<!-- /report:\2 -->)", re.S)


# --------------------------------------------------------------------------- training


def _train_rows(tasks: Sequence[str]) -> list[dict[str, Any]]:
    """benchmarks/results/train.jsonl: the latest row per (task, trainer, seed) of ``tasks``."""
    latest: dict[tuple[str, str, int], dict[str, Any]] = {}
    for row in read_jsonl("train.jsonl"):
        if row["task"] in tasks:
            latest[(row["task"], row["who"], row["seed"])] = row
    order = {task: i for i, task in enumerate(tasks)}
    first_seen: dict[tuple[str, str], int] = {}
    for i, key in enumerate(latest):
        first_seen.setdefault(key[:2], i)
    return sorted(
        latest.values(),
        key=lambda r: (order[r["task"]], first_seen[(r["task"], r["who"])], r["seed"]),
    )


def train_table(*tasks: str) -> Callable[[], str]:
    """The summary table of benchmarks/train.py for ``tasks``."""

    def build() -> str:
        import train

        return train.table(_train_rows(tasks))

    return build


def train_ratio() -> str:
    """PointReach: our time to 0.95 over SB3's, per seed where both reached it."""
    import train

    return train.ratio_table(_train_rows(["point_reach"]))


def tuned_sb3(task: str) -> Callable[[], str]:
    """benchmarks/tuned_sb3.py's tables for ``task``."""

    def build() -> str:
        import tuned_sb3

        return tuned_sb3.table(tuned_sb3.logged_runs(), task)

    return build


def panda() -> str:
    """benchmarks/panda.py's table from panda.jsonl (the latest run per env and seed)."""
    import panda as bench

    latest = {(r["env"], r["seed"]): r for r in read_jsonl("panda.jsonl")}
    return bench.table(list(latest.values()))


def highway(*who: str) -> Callable[[], str]:
    """benchmarks/highway_parking.py's table for the trainers ``who``."""

    def build() -> str:
        import highway_parking

        latest = {(r["who"], r["seed"]): r for r in read_jsonl("highway_parking.jsonl")}
        return highway_parking.table([r for r in latest.values() if r["who"] in who])

    return build


def workers() -> str:
    """benchmarks/workers.py's table from fetch/workers_*.csv and .json."""
    import workers as bench

    return bench.table(list(bench.CONFIGS))


def _progress(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _first(rows: list[dict[str, float]], target: float) -> dict[str, float] | None:
    return next((r for r in rows if r["eval_success"] >= target), None)


def fetch_runs(task: str, seeds: Sequence[int]) -> Callable[[], str]:
    """Per seed of fetch/TASK_sSEED.csv (benchmarks/fetch.py): epochs, env and gradient
    steps, seconds (the trainer's wall_time), steps and seconds to 0.5 and 0.9, best
    (with where) and final eval success; then mean ± std of best and final."""

    def build() -> str:
        head = "| seed | epochs | env steps | gradient steps | seconds | env steps, seconds to 0.5 "
        head += "| env steps, seconds to 0.9 | best eval success | final eval success |"
        lines = [head, "|---|---|---|---|---|---|---|---|---|"]
        best_all, final_all = [], []
        for seed in seeds:
            rows = _progress(RESULTS / "fetch" / f"{task}_s{seed}.csv")
            last = rows[-1]
            best = max(r["eval_success"] for r in rows)
            where = [f"{r['env_steps'] / 1000:.0f}k" for r in rows if r["eval_success"] == best]
            best_all.append(best)
            final_all.append(last["eval_success"])
            cells = [str(seed), f"{last['epoch']:.0f}", f"{last['env_steps']:,.0f}"]
            cells += [f"{last['updates']:,.0f}", f"{last['wall_time']:,.0f}"]
            for target in (0.5, 0.9):
                hit = _first(rows, target)
                cells.append(
                    "not reached"
                    if hit is None
                    else f"{hit['env_steps']:,.0f}, {hit['wall_time']:.0f} s"
                )
            cells.append(f"{best:.2f} (at {', '.join(where[:4])} steps)")
            cells.append(f"{last['eval_success']:.2f}")
            lines.append("| " + " | ".join(cells) + " |")
        if len(seeds) > 1:
            mean_std = [
                f"{statistics.fmean(v):.2f} ± {statistics.pstdev(v):.2f}"
                for v in (best_all, final_all)
            ]
            label = f"mean ± std (population), seeds {seeds[0]}-{seeds[-1]}"
            lines.append(f"| {label} | | | | | | | {mean_std[0]} | {mean_std[1]} |")
        return "\n".join(lines)

    return build


def new_envs(prefix: str, seeds: Sequence[int], target: float = 0.9) -> Callable[[], str]:
    """Per seed of new_envs/PREFIX_sSEED.csv: the first eval >= ``target``, its env steps
    and seconds (the trainer's wall_time), and the first >= 0.95 when later."""

    def build() -> str:
        lines = [
            f"| seed | first eval >= {target} | env steps | seconds | first eval >= 0.95 |",
            "|------|------|------|------|------|",
        ]
        for seed in seeds:
            rows = _progress(RESULTS / "new_envs" / f"{prefix}_s{seed}.csv")
            hit, top = _first(rows, target), _first(rows, 0.95)
            if hit is None:
                best = max(r["eval_success"] for r in rows)
                lines.append(f"| {seed} | not reached (best {best:.2f}) | - | - | - |")
                continue
            later = (
                "-"
                if top is None
                else f"{top['eval_success']:.2f} at {top['env_steps'] / 1000:.0f}k "
                f"({top['wall_time']:.1f} s)"
            )
            lines.append(
                f"| {seed} | {hit['eval_success']:.2f} | {hit['env_steps']:,.0f} | "
                f"{hit['wall_time']:.1f} | {later} |"
            )
        return "\n".join(lines)

    return build


def new_env_line(name: str, target: float) -> Callable[[], str]:
    """One run of new_envs/NAME.csv in words: first eval >= target, best, last epoch."""

    def build() -> str:
        rows = _progress(RESULTS / "new_envs" / f"{name}.csv")
        hit, last = _first(rows, target), rows[-1]
        best = max(rows, key=lambda r: r["eval_success"])
        reached = (
            f"first eval >= {target} after {hit['env_steps']:,.0f} env steps "
            f"({hit['wall_time']:.1f} s)"
            if hit is not None
            else f"no eval >= {target}"
        )
        return (
            f"`{name}.csv`: {reached}; best eval {best['eval_success']:.2f} after "
            f"{best['env_steps']:,.0f} env steps ({best['wall_time']:.1f} s); last epoch "
            f"{last['epoch']:.0f}, {last['env_steps']:,.0f} env steps, "
            f"{last['wall_time']:.1f} s, eval {last['eval_success']:.2f}."
        )

    return build


def gpu_twins_cpu() -> str:
    """The CPU rows of gpu_twins_train_cpu.log (benchmarks/gpu_twins.py --tables train)."""
    text = (RESULTS / "gpu_twins_train_cpu.log").read_text()
    lines = [
        "| device, envs | seconds to 0.95, seeds 0-4 | median | env steps/s |",
        "|---|---|---|---|",
    ]
    for kind in ("numpy envs", "device loop"):
        match = re.search(rf"^cpu, {kind}\s+(\d+)\s+([\d. ]+?)\s{{2,}}([\d.]+)\s+(\d+)", text, re.M)
        if match is None:
            raise ValueError(f"gpu_twins_train_cpu.log has no 'cpu, {kind}' row")
        envs, seconds, median, rate = match.groups()
        lines.append(f"| cpu, {kind} ({envs} envs) | {seconds.strip()} | {median} | {rate} |")
    ratio = re.search(r"^cpu: the device loop .*$", text, re.M)
    if ratio is not None:
        lines += ["", ratio.group(0) + "."]
    return "\n".join(lines)


# --------------------------------------------------------------------------- buffers


def _load_words(record: dict[str, Any]) -> str:
    before, after = record["load"][0], record.get("load_after", record["load"])[0]
    return (
        f"{record['date']} UTC, {record['machine']}, load average (1 min) {before:.1f} at the "
        f"start and {after:.1f} at the end; {record['command']}"
    )


def her_buffer() -> str:
    """The ratio table of benchmarks/her_buffer.py's latest run (her_buffer.jsonl)."""
    record = read_jsonl("her_buffer.jsonl")[-1]
    lines = [
        f"{record['transitions']:,} transitions, Fetch-like sizes; " + _load_words(record) + ".",
        "",
        "| n_envs | add, x faster | add (ring wrapped), x faster | sample 256, x faster | "
        "sample 2048, x faster | memory, x SB3 | sample 256 / plain numpy gather |",
        "|---|---|---|---|---|---|---|",
    ]
    for n_envs, run in record["per_n_envs"].items():
        sb3, ours, floor = run["sb3"], run["goalenvs"], run["floor"]
        cells = [
            sb3["add"] / ours["add"],
            sb3["add_wrapped"] / ours["add_wrapped"],
            sb3["sample256"] / ours["sample256"],
            sb3["sample2048"] / ours["sample2048"],
            ours["rss"] / sb3["rss"],
            ours["sample256"] / floor["sample256"],
        ]
        lines.append(f"| {n_envs} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")
    prioritized = record.get("prioritized") or {}
    uniform = prioritized.get("uniform")
    if uniform:
        lines += ["", "| buffer (1 env) | sample 256, x uniform | sample 2048, x uniform |"]
        lines.append("|---|---|---|")
        for name in ("prioritized", "prioritized+update", "cpprb", "cpprb+update"):
            r = prioritized.get(name)
            if r:
                a = r["sample256"] / uniform["sample256"]
                b = r["sample2048"] / uniform["sample2048"]
                lines.append(f"| {name} | {a:.2f} | {b:.2f} |")
    return "\n".join(lines)


def device_buffer() -> str:
    """numpy time / device-buffer time from benchmarks/device_buffer.py's latest run."""
    record = read_jsonl("device_buffer.jsonl")[-1]
    devices = record["devices"]
    lines = [
        f"Buffer of {record['buffer_size']:,} transitions; " + _load_words(record) + ".",
        "",
        "| n_envs | device | add | sample 256 | sample 2048 |",
        "|---|---|---|---|---|",
    ]
    for n_envs, best in record["per_n_envs"].items():
        for device in devices:
            ratios = [best["numpy"][op] / best[device][op] for op in best["numpy"]]
            cells = " | ".join(f"{r:.2f}" for r in ratios)
            lines.append(f"| {n_envs} | {device} | {cells} |")
    return "\n".join(lines)


def _sb3_her_sections() -> list[tuple[str, list[list[str]]]]:
    """benchmarks/results/sb3_her.log (benchmarks/sb3_her.py's output): (title, rows) per
    section, in order (a title may come twice: a second run with other seeds)."""
    sections: list[tuple[str, list[list[str]]]] = []
    title = None
    for line in (RESULTS / "sb3_her.log").read_text().splitlines():
        if not line.strip():
            title = None
        elif title is None:
            title = line.strip()
            sections.append((title, []))
        else:
            sections[-1][1].append(line.split())
    return sections


def sb3_her_learning() -> str:
    """Ours beside SB3's buffer under SB3's algorithms, per seed (sb3_her.log)."""
    sections = _sb3_her_sections()
    runs = {
        "sac: SAC+HER PointReach, 5000 steps, success over 50": "SAC+HER, PointReach, 5000 "
        "steps (success over 50 episodes)",
        "DQN+HER 10 bits, 5000 steps, success over 200": "DQN+HER, 10 random bits, 5000 steps "
        "(success over 200 episodes)",
        "DDPG+HER PointReach, 4000 steps, success over 100": "DDPG+HER, PointReach, 4000 steps "
        "(success over 100 episodes)",
        "dqn: SB3's test_performance_her[10] setting, mean ep_success_buffer (> 0.9 passes)": (
            "SB3's `test_performance_her[10]` setting (> 0.9 passes)"
        ),
    }
    lines = [
        "| run | seeds | goalenvs adapter, per seed | SB3 buffer, per seed | mean: ours / SB3 |",
        "|---|---|---|---|---|",
    ]
    for title, label in runs.items():
        seeds: list[str] = []
        values: dict[str, list[float]] = {"goalenvs": [], "sb3": []}
        for header, *body in (rows for t, rows in sections if t == title):
            named = [s for s in header[2:] if s.isdigit()]
            seeds += named
            for cells in body:
                values[cells[0]] += [float(x) for x in cells[1 : 1 + len(named)]]
        ours, peer = values["goalenvs"], values["sb3"]
        passes = ""
        if "> 0.9" in label:
            passes = f"; > 0.9 on {sum(v > 0.9 for v in ours)} / {sum(v > 0.9 for v in peer)}"
        lines.append(
            f"| {label} | {seeds[0]}-{seeds[-1]} | {' '.join(f'{v:.3g}' for v in ours)} | "
            f"{' '.join(f'{v:.3g}' for v in peer)} | "
            f"{statistics.fmean(ours):.3f} / {statistics.fmean(peer):.3f}{passes} |"
        )
    return "\n".join(lines)


def sb3_her_arrays() -> str:
    """The cost of building SB3's public arrays (sb3_her.log's 'arrays' section)."""
    ((title, rows),) = [(t, rows) for t, rows in _sb3_her_sections() if t.startswith("arrays:")]
    by_name = {" ".join(c[:-2]): c[-2:] for c in rows[1:]}
    sample = by_name["sample(256)"][0]
    first = by_name["first public-array read after an add"]
    return (
        f"Building the public arrays once ({title.removeprefix('arrays: ')}): {first[0]}, "
        f"{first[1]} `sample(256)` calls of {sample} each (`python benchmarks/sb3_her.py arrays`)."
    )


def panda_push_means() -> str:
    """PandaPush: mean eval success over each run's first and last 20 evaluations."""
    parts = []
    for r in sorted(read_jsonl("panda.jsonl"), key=lambda r: r["seed"]):
        if r["env"] == "PandaPush-v3" and len(r["curve"]) >= 20:
            s = [point[2] for point in r["curve"]]
            parts.append(
                f"seed {r['seed']}: {len(s)} evaluations, mean {statistics.fmean(s[:20]):.3f} "
                f"over the first 20 and {statistics.fmean(s[-20:]):.3f} over the last 20, "
                f"range {min(s):.2f}-{max(s):.2f}"
            )
    return "; ".join(parts) + "."


def sb3_test_her() -> str:
    """SB3's own test_her.py with each buffer: the saved pytest summaries."""
    lines = [
        "| buffer | stable-baselines3 | pytest summary | not passed | date, load |",
        "|---|---|---|---|---|",
    ]
    for r in read_jsonl("sb3_test_her.jsonl"):
        counts = ", ".join(f"{n} {word}" for word, n in r["counts"].items())
        failed = "; ".join(r["not_passed"]) or "-"
        lines.append(
            f"| {r['buffer']} | {r['sb3_version']} | {counts} | {failed} | "
            f"{r['date']} UTC, {r['load'][0]:.1f} |"
        )
    return "\n".join(lines)


def seed_margins() -> str:
    """First epoch at eval success >= 0.9 per seed (benchmarks/seed_margins.py)."""
    import seed_margins as bench

    records = read_jsonl(bench.RESULTS_FILE)
    loads = [r["load"][0] for r in records] + [r["load_after"][0] for r in records]
    return (
        bench.table(records)
        + f"\n\n{len(records)} runs, {records[0]['date']} to {records[-1]['date']} UTC, "
        f"{records[0]['machine']}, load average (1 min) {min(loads):.1f}-{max(loads):.1f}."
    )


def manipulation() -> str:
    """benchmarks/fetch.py's table per task, from manipulation/TASK_sSEED.csv and .json."""
    import fetch

    parts = []
    for task, runs in fetch.kept_runs([]).items():
        if runs:
            parts.append(
                f"`{fetch.TASKS[task]}`\n\n{fetch.table(task, dict(sorted(runs.items())))}"
            )
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- the blocks

BUILDERS: dict[str, Callable[[], str]] = {
    "point_reach": train_table("point_reach"),
    "point_reach_ratio": train_ratio,
    "bit_flipping_50": train_table("bit_flipping_50"),
    "bit_continuous_15": train_table("bit_continuous_15"),
    "strategies_point_reach": train_table("strategies goalenvs/PointReach-v0"),
    "strategies_parking": train_table("strategies goalenvs/Parking-v0"),
    "parking": train_table("parking"),
    "fetch_push": fetch_runs("push", [0, 1, 2, 3, 4]),
    "fetch_pick_and_place": fetch_runs("pick_and_place", [0]),
    "fetch_workers": workers,
    "manipulation": manipulation,
    "point_maze_umaze": new_envs("point_maze_umaze", [0, 1, 2]),
    "point_maze_umaze_30": new_env_line("point_maze_umaze_s0_30epochs", 0.9),
    "point_maze_medium": new_env_line("point_maze_medium_s0", 0.95),
    "point_maze_large": new_env_line("point_maze_large_s0", 0.9),
    "push": new_envs("push", [0, 1, 2]),
    "highway_parking": highway("ours", "sb3"),
    "highway_crash": highway("ours", "ours-crash"),
    "panda": panda,
    "panda_push_means": panda_push_means,
    "gpu_twins_cpu": gpu_twins_cpu,
    "tuned_fetch_reach": tuned_sb3("fetch_reach"),
    "tuned_parking": tuned_sb3("parking"),
    "her_buffer": her_buffer,
    "device_buffer": device_buffer,
    "sb3_her_learning": sb3_her_learning,
    "sb3_her_arrays": sb3_her_arrays,
    "sb3_test_her": sb3_test_her,
    "seed_margins": seed_margins,
}

DOC_FILES = ("baselines.md", "benchmarks.md")


def render(text: str, found: set[str]) -> str:
    """``text`` with every marked block rebuilt; the names met are added to ``found``."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in BUILDERS:
            raise KeyError(f"<!-- report:{name} --> has no builder in benchmarks/report.py")
        found.add(name)
        return f"{match.group(1)}{BUILDERS[name]().rstrip()}\n{match.group(4)}"

    return BLOCK.sub(replace, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrites the docs' blocks, or with --check reports the ones that differ (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a diff")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    args = parser.parse_args(argv)
    found: set[str] = set()
    stale = []
    for name in DOC_FILES:
        path = args.docs / name
        text = path.read_text()
        new = render(text, found)
        if new != text:
            stale.append(name)
            if not args.check:
                path.write_text(new)
    missing = sorted(set(BUILDERS) - found)
    if missing:
        print(f"blocks with no place in {', '.join(DOC_FILES)}: {', '.join(missing)}")
        return 1
    if stale and args.check:
        print(f"out of date (run python benchmarks/report.py): {', '.join(stale)}")
        return 1
    print("rewritten: " + (", ".join(stale) if stale else "nothing (up to date)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
