"""The docs' tables and the presets' measured figures, built from benchmarks/results/.

A generated table sits in its doc (docs/baselines.md, benchmarks.md, gpu.md, checks.md)
between two markers::

    <!-- report:NAME -->
    ... (written by this script: do not edit by hand)
    <!-- /report:NAME -->

and a preset's measured figures (goalenvs/train/presets/*.toml: comment lines, and the
``[measured]`` table the run-length estimate reads) between two comment lines::

    # report:preset.NAME
    # ... (written by this script)
    # /report:preset.NAME

``python benchmarks/report.py`` rewrites every marked block from the result files;
``python benchmarks/report.py --check`` changes nothing and exits 1, naming the files,
when one differs from what the result files give (tests/test_report.py runs it). A block
whose name has no builder here, or a builder whose block is missing, is an error too.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
import textwrap
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from evidence import RESULTS, machine_words, read_jsonl, read_record  # noqa: E402

DOCS = ROOT / "docs"
# The kept Fetch/Panda/parking runs of the presets as they are, and the fetch_push preset's
# Fetch runs from before it replayed by goal motion.
MANIPULATION = RESULTS / "manipulation"
UNIFORM = MANIPULATION / "uniform"
#: FetchPush runs of the fetch_push preset when it drew by goal motion at priority_alpha 1.0.
MOTION_ALPHA1 = MANIPULATION / "motion_alpha1"
#: FetchPush and FetchSlide runs of their presets at priority_alpha 0.5 with polyak 0.95.
MOTION_ALPHA05 = MANIPULATION / "motion_alpha05"
#: FetchSlide runs of fetch_slide when it trained by DDPG (goal motion at 0.5, polyak 0.9).
SLIDE_DDPG = MANIPULATION / "ddpg"
#: FetchSlide runs of fetch_slide on one-step returns (TD3, the policy average 0.9).
SLIDE_ONE_STEP = MANIPULATION / "one_step"
#: FetchSlide runs of fetch_slide on 2-step returns with the exploration and the policy
#: average of fetch_push (N(0, 0.2) noise, 30% random actions, policy_average 0.9).
SLIDE_TWO_STEP = MANIPULATION / "two_step"
PRESETS = ROOT / "goalenvs" / "train" / "presets"
BLOCK = re.compile(r"(<!-- report:([\w.-]+) -->\n)(.*?)(<!-- /report:\2 -->)", re.S)
TOML_BLOCK = re.compile(r"(^# report:([\w.-]+)\n)(.*?)(^# /report:\2$)", re.S | re.M)


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


TRAIN_ROW = re.compile(
    r"^(cpu|cuda), (numpy envs|device loop)\s+(\d+)\s+([\d. >ep]+?)\s{2,}([\d.]+)\s+([\d.e+]+)",
    re.M,
)
RATIO_LINE = re.compile(r"^(?:cpu|cuda): the device loop .*$", re.M)


def _seconds_or_none(token: str) -> float | None:
    """A seed's seconds to the target as the log writes them; None for ``>5ep`` (not
    reached in the run's 5 epochs)."""
    return None if token.startswith(">") else float(token)


def _twins_train_rows(text: str) -> list[dict[str, Any]]:
    """The rows of benchmarks/gpu_twins.py's training table: device, kind (numpy envs or
    device loop), envs, seconds to the target per seed (None: not reached), median seconds
    (an unreached seed counted as never), env steps/s (each figure also as the log writes
    it, under ``*_text``)."""
    return [
        {
            "device": device,
            "kind": kind,
            "envs": int(envs),
            "seconds_text": seconds.strip(),
            "seconds": [_seconds_or_none(x) for x in seconds.split()],
            "median_text": median,
            "median": float(median),
            "rate": float(rate),
        }
        for device, kind, envs, seconds, median, rate in TRAIN_ROW.findall(text)
    ]


def _twins_train_row(text: str, device: str, kind: str) -> dict[str, Any]:
    for row in _twins_train_rows(text):
        if (row["device"], row["kind"]) == (device, kind):
            return row
    raise ValueError(f"the training table has no '{device}, {kind}' row")


def _twins_train_table(text: str, devices: Sequence[str]) -> list[str]:
    rows = [r for r in _twins_train_rows(text) if r["device"] in devices]
    if not rows:
        raise ValueError(f"no training rows for {', '.join(devices)}")
    seeds = len(rows[0]["seconds"])
    lines = [
        f"| device, envs | seconds to 0.95, seeds 0-{seeds - 1} | median | env steps/s |",
        "|---|---|---|---|",
    ]
    for r in rows:
        seconds = " / ".join(
            f"not in {token[1:-2]} epochs" if token.startswith(">") else token
            for token in r["seconds_text"].split()
        )
        cells = [f"{r['device']}, {r['kind']} ({r['envs']:,} envs)", seconds]
        cells += [r["median_text"], f"{r['rate']:,.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    ratios = [m.group(0) + "." for m in RATIO_LINE.finditer(text)]
    notes = []
    if any(None in r["seconds"] for r in rows):
        notes = ["", "A median counts a seed that did not reach 0.95 as never reaching it."]
    return [*lines, *notes, "", *[r for r in ratios if r.split(":")[0] in devices]]


def _missed(row: dict[str, Any]) -> str:
    """The seeds of a training row that did not reach the target, in words ("" if none)."""
    tokens = row["seconds_text"].split()
    missed = [(str(seed), token[1:-2]) for seed, token in enumerate(tokens) if token[0] == ">"]
    if not missed:
        return ""
    seeds = " and ".join(seed for seed, _ in missed)
    plural = "s" if len(missed) > 1 else ""
    return f"seed{plural} {seeds} did not reach 0.95 in its {missed[0][1]} epochs"


def gpu_twins_cpu() -> str:
    """The CPU rows of gpu_twins_train_cpu.log (benchmarks/gpu_twins.py --tables train)."""
    text = (RESULTS / "gpu_twins_train_cpu.log").read_text()
    return "\n".join(_twins_train_table(text, ["cpu"]))


# --------------------------------------------------------------------------- the H100 machine

H100 = RESULTS / "h100-2026-11-25"


def _h100_readme() -> tuple[str, dict[str, str]]:
    """The H100 folder's README: (the machine and versions in one sentence, file -> command)."""
    text = (H100 / "README.md").read_text()
    title = text.splitlines()[0].removeprefix("# Measured on ").strip()
    setup = re.search(r"^The project at (.*?)\.\n", text, re.M | re.S)
    if setup is None:
        raise ValueError(f"{H100 / 'README.md'} does not say 'The project at ...'")
    commands = dict(re.findall(r"^\| (\S+) \| (.+) \|$", text, re.M))
    commands.pop("file", None)
    return f"{title}; the project at {' '.join(setup.group(1).split())}", commands


def _h100_source(*files: str) -> str:
    """Where figures of ``files`` come from: the machine, its load, the commands."""
    machine, commands = _h100_readme()
    named = "; ".join(f"`{name}`: {commands[name]}" for name in files)
    return f"Measured on {machine} (`benchmarks/results/{H100.name}/`). {named}."


def _twins_steps() -> list[dict[str, Any]]:
    """gpu_twins_steps.log: per env and size, steps/s of each column (None where not run),
    and each column's ratio to the numpy twin as the log prints it (under ``*_ratio``)."""
    rows = []
    for line in (H100 / "gpu_twins_steps.log").read_text().splitlines():
        tokens = line.split()
        if len(tokens) < 4 or not tokens[1].isdigit():
            continue
        row: dict[str, Any] = {"env": tokens[0], "envs": int(tokens[1])}
        cells = iter(tokens[2:])
        for column in ("numpy", "cpu", "eager", "compiled"):
            token = next(cells)
            row[column] = None if token == "-" else float(token)
            if column != "numpy" and token != "-":
                row[f"{column}_ratio"] = next(cells).strip("()")
        rows.append(row)
    return rows


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1e6:,.3g}M" if value < 1e9 else f"{value / 1e9:.3g}G"


def h100_twins_steps() -> str:
    """The twins' env steps/s on the H100, every column and size of gpu_twins_steps.log."""
    rows = _twins_steps()
    lines = [
        _h100_source("gpu_twins_steps.log"),
        "",
        "Env steps per second (M: millions, G: billions); in brackets, the ratio to the numpy "
        "twin at the same size, or (*) to its best size where numpy was not run.",
        "",
        "| env | envs | numpy | torch, CPU | CUDA, eager | CUDA, torch.compile "
        "| compiled / eager |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r["env"], f"{r['envs']:,}", _rate(r["numpy"])]
        for column in ("cpu", "eager", "compiled"):
            value = r[column]
            cells.append("-" if value is None else f"{_rate(value)} ({r[f'{column}_ratio']})")
        cells.append(f"{r['compiled'] / r['eager']:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def h100_compile() -> str:
    """Where torch.compile pays on the H100 and where it costs (gpu_twins_steps.log)."""
    rows = _twins_steps()
    small = [r["compiled"] / r["eager"] for r in rows if r["envs"] <= 65536]
    large = [r for r in rows if r["envs"] > 65536]
    ratios = [r["compiled"] / r["eager"] for r in large]
    sizes = sorted({r["envs"] for r in large})
    slower = sum(x < 1 for x in ratios)
    return (
        f"`torch.compile` of the step does not pay on this machine. Up to 65,536 envs it gives "
        f"{min(small):.2f}x-{max(small):.2f}x eager's steps/s; beyond 65,536 envs "
        f"({' and '.join(f'{n:,}' for n in sizes)}) it is slower than eager in {slower} of "
        f"{len(ratios)} cases, at {min(ratios):.2f}x-{max(ratios):.2f}x eager's rate. Eager "
        f"is the faster choice at every size measured beyond 65,536 envs."
        if slower == len(ratios)
        else f"`torch.compile` is slower than eager in {slower} of {len(ratios)} cases beyond "
        f"65,536 envs ({min(ratios):.2f}x-{max(ratios):.2f}x)."
    )


def _h100_point_reach_log() -> tuple[str, str]:
    """The latest on-device PointReach training on the H100 (the scaling folder's
    gpu_twins_train.log): its text, and where it comes from in one sentence."""
    commit, described = _scaling_readme()["gpu_twins_train.log"]
    source = (
        f"Measured on one NVIDIA H100 80GB machine with 16 CPU cores, 2026-11-25, the project "
        f"at commit {commit}, alone on the machine "
        f"(`benchmarks/results/{SCALING_H100.name}/gpu_twins_train.log`; its README names the "
        f"versions): {described}."
    )
    return (SCALING_H100 / "gpu_twins_train.log").read_text(), source


def h100_point_reach() -> str:
    """On-device PointReach training on the H100 (gpu_twins_train.log) against the promise
    of 0.95 eval success in <= 3 s with >= 1M env steps/s."""
    text, source = _h100_point_reach_log()
    lines = [source, "", *_twins_train_table(text, ["cpu", "cuda"])]
    loop = _twins_train_row(text, "cuda", "device loop")
    median, rate, missed = loop["median"], loop["rate"], _missed(loop)
    numpy_median = _twins_train_row(text, "cuda", "numpy envs")["median"]
    kept = median <= 3 and rate >= 1e6 and not missed
    verdict = "met" if kept else "not met"
    lines += [
        "",
        f"The promise of eval success 0.95 in <= 3 s at >= 1M env steps/s with training is "
        f"**{verdict}** on this machine: the on-device loop's median was {median:g} s"
        + (f" ({missed})" if missed else "")
        + f" at {rate:,.0f} env steps/s, against {numpy_median:g} s for 8 numpy envs beside "
        "CUDA networks.",
    ]
    return "\n".join(lines)


def _device_buffer_h100() -> list[dict[str, Any]]:
    """device_buffer.log on the H100, per row: n_envs, op, and each column's microseconds
    (``numpy``, ``cpu``, ``cuda``) with the ratios as the log prints them."""
    pattern = re.compile(
        r"^\s*(\d+) (\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", re.M
    )
    text = (H100 / "device_buffer.log").read_text()
    return [
        {
            "n_envs": int(n),
            "op": op,
            "numpy": numpy_us,
            "cpu": cpu_us,
            "cpu_ratio": cpu_ratio,
            "cuda": cuda_us,
            "cuda_ratio": cuda_ratio,
        }
        for n, op, numpy_us, cpu_us, cpu_ratio, cuda_us, cuda_ratio in pattern.findall(text)
    ]


# Within 5% either way, two timings of one run are called at par.
PAR = (0.95, 1.05)


def _sample_verdict() -> dict[str, list[tuple[int, str, float]]]:
    """The device buffer's sample on CUDA against the numpy buffer's: slower, at par,
    faster (each as (n_envs, op, numpy time / device time))."""
    verdict: dict[str, list[tuple[int, str, float]]] = {"slower": [], "par": [], "faster": []}
    for r in _device_buffer_h100():
        if r["op"].startswith("sample"):
            ratio = float(r["numpy"]) / float(r["cuda"])
            kind = "slower" if ratio < PAR[0] else "faster" if ratio > PAR[1] else "par"
            verdict[kind].append((r["n_envs"], r["op"], ratio))
    return verdict


def _cases(cases: list[tuple[int, str, float]]) -> str:
    return ", ".join(f"{op} at {n:,} envs ({ratio:.2f})" for n, op, ratio in cases)


def h100_device_buffer() -> str:
    """DeviceHerReplayBuffer against the numpy buffer on the H100 (device_buffer.log)."""
    lines = [
        _h100_source("device_buffer.log"),
        "",
        "| n_envs | op | numpy buffer, us | device buffer on the CPU, us (numpy / it) "
        "| device buffer on CUDA, us (numpy / it) |",
        "|---|---|---|---|---|",
    ]
    for r in _device_buffer_h100():
        lines.append(
            f"| {r['n_envs']:,} | {r['op']} | {r['numpy']} | {r['cpu']} ({r['cpu_ratio']}) | "
            f"{r['cuda']} ({r['cuda_ratio']}) |"
        )
    verdict = _sample_verdict()
    total = sum(len(v) for v in verdict.values())
    slower = [ratio for *_, ratio in verdict["slower"]]
    lines += [
        "",
        f"On CUDA the device buffer's `sample` is slower than the numpy buffer's in "
        f"{len(slower)} of {total} cases ({min(slower):.2f}-{max(slower):.2f} of its speed)"
        + (f"; at par (within 5%): {_cases(verdict['par'])}" if verdict["par"] else "")
        + (f"; faster: {_cases(verdict['faster'])}" if verdict["faster"] else "")
        + ". What the device buffer saves is the copy of each batch to the GPU, which this "
        "table does not count.",
    ]
    return "\n".join(lines)


def h100_update_floor() -> str:
    """A plain-torch DDPG update, eager and as one CUDA graph, on the H100 (update_floor.txt)."""
    text = (H100 / "update_floor.txt").read_text()
    found = re.findall(
        r"batch (\d+),.*?eager ([\d.]+) ms, one CUDA graph ([\d.]+) ms \(([\d.]+)x\)", text
    )
    lines = [
        _h100_source("update_floor.txt"),
        "",
        "| batch | eager, ms | one CUDA graph, ms | eager / graph |",
        "|---|---|---|---|",
    ]
    lines += [f"| {int(b):,} | {e} | {g} | {x} |" for b, e, g, x in found]
    return "\n".join(lines)


def _h100_fetch_run(name: str) -> dict[str, Any]:
    rows = _progress(H100 / name)
    last = rows[-1]
    best = max(r["eval_success"] for r in rows)
    at = next(r for r in rows if r["eval_success"] == best)
    parts = ("time_env", "time_act", "time_store", "time_sample", "time_update", "time_eval")
    spent = {p: sum(r[p] for r in rows) for p in parts}
    return {"rows": rows, "last": last, "best": best, "at": at, "spent": spent}


def h100_fetch_push() -> str:
    """FetchPush-v4 on the H100: 16 torchrun workers on its CPU cores, and one process with
    the networks on CUDA (the two progress CSVs)."""
    runs = {
        "16 workers, CPU (`torchrun --nproc-per-node 16`, `baselines` preset)": (
            "fetchpush_torchrun16_progress.csv"
        ),
        "1 process, networks on CUDA (`fetch_push` preset)": "fetchpush_1proc_cuda_progress.csv",
    }
    lines = [
        _h100_source(*runs.values()),
        "",
        "| run | epochs | env steps | seconds | env steps/s | best eval success (env steps) "
        "| final eval success | env steps' share of the time | updates' share |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, name in runs.items():
        run = _h100_fetch_run(name)
        last, spent = run["last"], run["spent"]
        total = sum(spent.values())
        lines.append(
            f"| {label} | {last['epoch']:.0f} | {last['env_steps']:,.0f} | "
            f"{last['wall_time']:,.0f} | {last['env_steps'] / last['wall_time']:,.0f} | "
            f"{run['best']:.2f} ({run['at']['env_steps']:,.0f}) | {last['eval_success']:.2f} | "
            f"{spent['time_env'] / total:.0%} | {spent['time_update'] / total:.0%} |"
        )
    return "\n".join(lines)


SCALING_H100 = RESULTS / "h100-2026-11-25-scaling"


def scaling_cpu() -> str:
    """benchmarks/scaling.py's latest run on the CPU: env steps/s and the phase split per
    mode, against the older revision it ran beside."""
    record = [r for r in read_jsonl("scaling.jsonl") if r["device"] == "cpu" and _all_modes(r)][-1]
    best: dict[str, dict[str, Any]] = {}
    for row in record["rows"]:
        if row["mode"] not in best or row["steps_per_s"] > best[row["mode"]]["steps_per_s"]:
            best[row["mode"]] = row
    reference = next(r["steps_per_s"] for m, r in best.items() if m.startswith("preset @"))
    phases = ("env", "act", "store", "sample", "update")
    loads = [r["load_before"] for r in record["rows"]]
    lines = [
        f"`{record['command']}` on {record['machine']['cores']} CPU cores "
        f"({record['machine']['cpu']}), {record['time'][:10]}, load average "
        f"{min(loads):.1f}-{max(loads):.1f} (the run itself); {record['env_id']}, "
        f"{record['cycles']} cycles of the preset's schedule per mode, best of its rounds "
        "(benchmarks/results/scaling.jsonl).",
        "",
        "| mode | env steps/s | x the older revision | " + " | ".join(phases) + " |",
        "|---|---|---|" + "---|" * len(phases),
    ]
    for mode, row in best.items():
        total = sum(row.get(f"time_{p}") or 0.0 for p in phases) or 1.0
        shares = " | ".join(f"{100 * (row.get(f'time_{p}') or 0.0) / total:.0f}%" for p in phases)
        lines.append(
            f"| {mode} | {row['steps_per_s']:.0f} | {row['steps_per_s'] / reference:.2f} | "
            f"{shares} |"
        )
    return "\n".join(lines)


def _all_modes(record: dict[str, Any]) -> bool:
    """Whether a scaling.py record ran more modes than the preset (beside a revision)."""
    return any(not row["mode"].startswith("preset") for row in record["rows"])


def _preset_beside(
    env: str, rev: str | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], str]:
    """The latest scaling.py run of the preset mode beside an older revision on ``env``
    (beside ``rev`` when given): the record, its rows of this checkout, those of the
    revision, and the revision."""
    records = [
        r
        for r in read_jsonl("scaling.jsonl")
        if not _all_modes(r)
        and r["env_id"].endswith(env)
        and (rev is None or any(row["mode"] == f"preset @ {rev}" for row in r["rows"]))
    ]
    if not records:
        beside = f" beside {rev}" if rev else ""
        raise SystemExit(f"report: scaling.jsonl holds no preset run on {env}{beside}")
    record = records[-1]
    runs: dict[str, list[dict[str, Any]]] = {}
    for row in record["rows"]:
        runs.setdefault(row["mode"], []).append(row)
    now, before = runs.pop("preset"), next(iter(runs.values()))
    return record, now, before, next(iter(runs)).removeprefix("preset @ ")


def _compute_per_step(rows: list[dict[str, Any]]) -> float:
    """Microseconds of compute per env step (env, act, store, sample, update), best round."""
    phases = ("env", "act", "store", "sample", "update")
    return min(1e6 * sum(r[f"time_{p}"] for p in phases) / r["env_steps"] for r in rows)


def _best_ratio(now: list[dict[str, Any]], before: list[dict[str, Any]], key: str) -> float:
    """``key``'s best (smallest) round of this checkout over the revision's."""
    return min(r[key] for r in now) / min(r[key] for r in before)


def _beside_words(record: dict[str, Any], now: list[dict[str, Any]]) -> str:
    """The command, date, machine and load of a scaling.py run in turns."""
    loads = [r["load_before"] for r in record["rows"]]
    return (
        f"`{record['command']}` ({record['time'][:10]}, {record['machine']['cores']} CPU "
        f"cores, {_cpu_words(record['machine'])}, load average {min(loads):.1f}-{max(loads):.1f}; "
        f"{record['env_id']}, {record['cycles']} cycles per round, the best of "
        f"{len(now)} rounds each, in turns; benchmarks/results/scaling.jsonl)"
    )


def goal_motion_cost() -> str:
    """The fetch_push preset's compute per env step with goal-motion replay against the
    commit before it (uniform replay), in turns in one scaling.py run."""
    record, now, before, rev = _preset_beside("FetchPush-v4")
    a, b = _compute_per_step(now), _compute_per_step(before)
    sample = _best_ratio(now, before, "time_sample")
    return (
        f"{_beside_words(record, now)}: "
        f"{a:,.0f} us of compute per env step with goal-motion replay against {b:,.0f} us "
        f"at {rev} (uniform replay), **{a / b:.2f}x**; its sampling took {sample:.2f}x "
        "the uniform draws' time."
    )


def _slide_beside(rev: str, now_words: str, before_words: str, phase: str, part: str) -> str:
    """fetch_slide now beside its preset at ``rev`` (``before_words`` say what that was)
    in one scaling.py run: compute per env step (``now_words`` say what it runs with),
    ``phase``'s time in the words ``part`` ({ratio} where the ratio goes) and a round's
    whole process (start, the epoch's training, its evaluations)."""
    record, now, before, rev = _preset_beside("FetchSlide-v4", rev)
    a, b = _compute_per_step(now), _compute_per_step(before)
    ratio = _best_ratio(now, before, f"time_{phase}")
    whole = _best_ratio(now, before, "process_seconds")
    return (
        f"{_beside_words(record, now)}: "
        f"{a:,.0f} us of compute per env step{now_words} against {b:,.0f} us "
        f"at {rev} ({before_words}), **{a / b:.2f}x**; {part.format(ratio=f'{ratio:.2f}x')}, "
        f"and a round's whole process (start, the epoch's training, its evaluation of both "
        f"the actor and the average) {whole:.2f}x."
    )


def fetch_slide_cost() -> str:
    """The fetch_slide preset with TD3 and the policy average against the commit before
    them (DDPG), in turns in one scaling.py run."""
    words = " with TD3 and the average"
    return _slide_beside("b7f69dc", words, "DDPG", "update", "the updates took {ratio} DDPG's time")


def fetch_slide_n_step_cost() -> str:
    """fetch_slide now (2-step returns) against the commit before n_step 2 (one-step
    returns), in turns in one scaling.py run; the 2-step gather is in the sampling."""
    part = "the sampling, which gathers the second step, took {ratio} its time"
    return _slide_beside("874c6ff", " on 2-step returns", "one-step returns", "sample", part)


def fetch_slide_total_cost() -> str:
    """fetch_slide now against fetch_slide of 7bceb3c (uniform replay, DDPG, one-step
    returns: the preset every FetchSlide lever since was measured against), in turns in
    one scaling.py run; goal-motion replay's draws and the 2-step gather are in the
    sampling."""
    before = "uniform replay, DDPG, one-step returns"
    return _slide_beside("7bceb3c", "", before, "sample", "the sampling took {ratio} its time")


def _scaling_readme() -> dict[str, tuple[str, str]]:
    """The scaling folder's README: file -> (commit, command)."""
    text = (SCALING_H100 / "README.md").read_text()
    found = {}
    for files, commit, command in re.findall(
        r"^\| (.+?) \| (\w+(?:, \w+)?) \| (.+) \|$", text, re.M
    ):
        for name in files.split(", "):
            found[name] = (commit, command)
    return found


def _first_at(rows: list[dict[str, float]], target: float) -> str:
    hit = _first(rows, target)
    return "-" if hit is None else f"{hit['env_steps']:,.0f} ({hit['wall_time']:.0f} s)"


def h100_scaling() -> str:
    """FetchPush-v4 on the H100 machine: one process and 16 torchrun workers at the older
    revision, env workers with the GPU learner now (the progress CSVs of both folders)."""
    readme = _scaling_readme()
    now = readme["fetchpush_workers_cuda_progress.csv"][0]
    n160 = readme["fetchpush_workers_cuda_n160_progress.csv"][0]
    runs = [
        (
            "16 torchrun workers, CPU, `baselines` preset (0cf506c)",
            H100,
            "fetchpush_torchrun16_progress.csv",
        ),
        (
            "1 process, networks on CUDA, `fetch_push` preset (0cf506c)",
            H100,
            "fetchpush_1proc_cuda_progress.csv",
        ),
        (
            f"16 env workers + GPU learner, `fetch_push` preset ({now})",
            SCALING_H100,
            "fetchpush_workers_cuda_progress.csv",
        ),
        (
            f"the same, 160 updates a cycle ({n160})",
            SCALING_H100,
            "fetchpush_workers_cuda_n160_progress.csv",
        ),
    ]
    lines = [
        "Measured on one NVIDIA H100 80GB machine with 16 CPU cores, 2026-11-25 "
        f"(`benchmarks/results/{H100.name}/` and "
        f"`benchmarks/results/{SCALING_H100.name}/`, whose READMEs name the commands, the "
        "versions and what else ran on the machine); every run was stopped by a time limit.",
        "",
        "| run | env steps/s (median epoch) | env steps (seconds) to eval 0.5 | to 0.7 | best eval "
        "success (env steps, seconds) | seconds when stopped |",
        "|---|---|---|---|---|---|",
    ]
    for label, folder, name in runs:
        rows = _progress(folder / name)
        rates = sorted(r["steps_per_s"] for r in rows)
        best = max(r["eval_success"] for r in rows)
        at = next(r for r in rows if r["eval_success"] == best)
        lines.append(
            f"| {label} | {rates[len(rates) // 2]:,.0f} | {_first_at(rows, 0.5)} | "
            f"{_first_at(rows, 0.7)} | {best:.2f} ({at['env_steps']:,.0f}, "
            f"{at['wall_time']:.0f} s) | {rows[-1]['wall_time']:.0f} |"
        )
    return "\n".join(lines)


def h100_update() -> str:
    """One gradient step on the H100: eager, as a CUDA graph, and SB3's (update_cuda.log)."""
    text = (SCALING_H100 / "update_cuda.log").read_text()
    rows = re.findall(
        r"^(\w+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", text, re.M
    )
    commit, described = _scaling_readme()["update_cuda.log"]
    command = re.search(r"`([^`]+)`", described)
    lines = [
        f"`{command.group(1) if command else described}` on the H100 machine at {commit} "
        f"(`benchmarks/results/{SCALING_H100.name}/update_cuda.log`); ms per gradient step, "
        "best of 3 rounds.",
        "",
        "| algorithm | batch | eager | CUDA graph | SB3 | graph / eager | SB3 / graph |",
        "|---|---|---|---|---|---|---|",
    ]
    for algo, batch, eager, graph, sb3, _, _ in rows:
        e, g, b = float(eager), float(graph), float(sb3)
        lines.append(
            f"| {algo.upper()} | {int(batch):,} | {e:.2f} | {g:.2f} | {b:.2f} | {g / e:.2f} | "
            f"{b / g:.1f}x |"
        )
    return "\n".join(lines)


def h100_summary() -> str:
    """docs/gpu.md's summary of the H100 figures, each against what the docs promise."""
    machine, _ = _h100_readme()
    steps = _twins_steps()
    top = max(steps, key=lambda r: r["eager"])
    text, _ = _h100_point_reach_log()
    loop = _twins_train_row(text, "cuda", "device loop")
    median, rate, envs, missed = loop["median"], loop["rate"], loop["envs"], _missed(loop)
    commit, _ = _scaling_readme()["gpu_twins_train.log"]
    large = [r["compiled"] / r["eager"] for r in steps if r["envs"] > 65536]
    verdict = _sample_verdict()
    slower = [ratio for *_, ratio in verdict["slower"]]
    total = sum(len(v) for v in verdict.values())
    sizes = sorted({r["envs"] for r in steps if r["numpy"] is not None})
    numpy_wins = [n for n in sizes if all(r["eager"] < r["numpy"] for r in steps if r["envs"] == n)]
    cuda_wins = [n for n in sizes if all(r["eager"] > r["numpy"] for r in steps if r["envs"] == n)]
    floor = re.search(
        r"batch 2048,.*?eager ([\d.]+) ms, one CUDA graph ([\d.]+) ms",
        (H100 / "update_floor.txt").read_text(),
    )
    assert floor is not None
    items = [
        f"- **Twins**: up to {_rate(top['eager'])} env steps/s ({top['env']}, "
        f"{top['envs']:,} envs, eager), against the numpy twin's best of "
        f"{_rate(max(r['numpy'] or 0 for r in steps if r['env'] == top['env']))} on the same "
        f"machine. The numpy twin is faster for every env at "
        f"{' and '.join(f'{n:,}' for n in numpy_wins)} envs, CUDA from "
        f"{min(cuda_wins):,} ([benchmarks.md](benchmarks.md)).",
        f"- **`torch.compile` costs beyond 65,536 envs**: {min(large):.2f}x-{max(large):.2f}x "
        f"of eager's steps/s there; use eager.",
        f"- **PointReach on the device** (at commit {commit}): eval success 0.95 after a median "
        f"{median:g} s" + (f" ({missed})" if missed else "") + f" at {rate:,.0f} env steps/s "
        f"({envs:,} envs): short of the 3 s and 1M env steps/s the `[device]` schedule aims "
        "at ([baselines.md](baselines.md), On-device DDPG+HER).",
        f"- **The device buffer's `sample` is slower than the numpy buffer's** in "
        f"{len(slower)} of {total} cases ({min(slower):.2f}-{max(slower):.2f} of its speed; "
        f"at par or faster only for {_cases(verdict['par'] + verdict['faster'])}); what it "
        f"saves is the copy of each batch to the GPU ([benchmarks.md](benchmarks.md)).",
        f"- **An update's floor**: a plain DDPG update of 2,048 transitions takes "
        f"{floor.group(1)} ms eager and {floor.group(2)} ms as one CUDA graph.",
    ]
    return f"Measured on {machine}:\n\n" + "\n".join(items)


# --------------------------------------------------------------------------- buffers


def _load_words(record: dict[str, Any]) -> str:
    before, after = record["load"][0], record.get("load_after", record["load"])[0]
    return (
        f"{record['date']} UTC, {machine_words(record['machine'])}, load average (1 min) "
        f"{before:.1f} at the "
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


def _span(values: Iterable[float], form: str = "{:,.0f}") -> str:
    """``low-high`` of ``values``, each as ``form`` writes it (one value when they agree)."""
    low, high = (form.format(v) for v in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def device_buffer_words() -> str:
    """docs/buffer.md: the device buffer's sample against the numpy buffer's, on a 2-core
    CPU and on the H100, eager and captured (device_buffer_before_after.jsonl's latest
    record of each machine)."""
    records = read_jsonl("device_buffer_before_after.jsonl")
    cpu = [r for r in records if r["devices"] == ["cpu"]][-1]["per_n_envs"]
    gpu = [r for r in records if "graph" in r][-1]
    cuda, graph = gpu["per_n_envs"], gpu["graph"]

    def ratios(runs: dict[str, Any], device: str, op: str) -> list[float]:
        return [run[device][op] / run["numpy"][op] for run in runs.values()]

    def micros(runs: dict[str, Any], op: str, device: str = "numpy") -> list[float]:
        return [1e6 * run[device][op] for run in runs.values()]

    captured = {
        op: [1e6 * run[op] for run in graph.values()] for op in ("sample(256)", "sample(2048)")
    }
    envs = sorted(int(n) for n in cuda)
    return (
        "On the CPU the numpy buffer is faster (on a 2-core machine the device buffer's "
        f"`sample` takes {_span(ratios(cpu, 'cpu', 'sample(256)'), '{:.1f}')}x its time for "
        f"batches of 256, {_span(ratios(cpu, 'cpu', 'sample(2048)'), '{:.2f}')}x for 2048). On "
        "an H100 the device buffer's eager `sample(256)` takes "
        f"{_span(ratios(cuda, 'cuda', 'sample(256)'), '{:.1f}')}x the numpy buffer's time "
        f"(kernel launches), and the captured one {_span(captured['sample(256)'])} us against "
        f"the numpy buffer's {_span(micros(cuda, 'sample(256)'))} us for batches of 256, and "
        f"{_span(captured['sample(2048)'])} us against {_span(micros(cuda, 'sample(2048)'))} us "
        f"for 2048 (`benchmarks/results/device_buffer_before_after.jsonl`, revision "
        f"{gpu['revision'].split()[0]}, {envs[0]:,} to {envs[-1]:,} envs): the device buffer "
        "pays where the envs and the networks are on a GPU and the update is captured."
    )


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
    """SB3's own test_her.py with each buffer: the latest pytest summary per buffer and
    stable-baselines3 version."""
    lines = [
        "| buffer | stable-baselines3 | pytest summary | not passed | seconds | date, load |",
        "|---|---|---|---|---|---|",
    ]
    latest = {(r["buffer"], r["sb3_version"]): r for r in read_jsonl("sb3_test_her.jsonl")}
    for r in latest.values():
        counts = ", ".join(f"{n} {word}" for word, n in r["counts"].items())
        failed = "; ".join(r["not_passed"]) or "-"
        lines.append(
            f"| {r['buffer']} | {r['sb3_version']} | {counts} | {failed} | {r['seconds']:.0f} | "
            f"{r['date']} UTC, {r['load'][0]:.1f} |"
        )
    return "\n".join(lines)


def seed_margins() -> str:
    """First epoch at eval success >= 0.9 per seed (benchmarks/seed_margins.py)."""
    import seed_margins as bench

    records = read_jsonl(bench.RESULTS_FILE)
    latest = list(bench.shown(records).values())
    dates = sorted(r["date"] for r in latest)
    loads = [r["load"][0] for r in latest] + [r["load_after"][0] for r in latest]
    rows_by_machine: dict[str, dict[str, None]] = {}
    for r in sorted(latest, key=bench.row_name):
        rows_by_machine.setdefault(machine_words(r["machine"]), {})[bench.row_name(r)] = None
    machines = "; ".join(
        f"{', '.join(f'`{row}`' for row in rows)} on {machine}"
        for machine, rows in rows_by_machine.items()
    )
    return (
        bench.table(records)
        + f"\n\nThe {len(latest)} runs the table shows (the latest per row and seed, of the "
        f"{len(records)} in benchmarks/results/seed_margins.jsonl), {dates[0]} to {dates[-1]} "
        f"UTC: {machines}; load average (1 min) {min(loads):.1f}-{max(loads):.1f}."
    )


def _nearest(samples: list[list[float]], minute: float) -> list[float]:
    """The memory sample ``[minute, MB, load]`` taken nearest ``minute``."""
    return min(samples, key=lambda sample: abs(sample[0] - minute))


def long_run() -> str:
    """The two-hour run's memory and its SIGKILL resume (benchmarks/long_run.py)."""
    record = read_jsonl("long_run.jsonl")[-1]
    samples = record["rss_mb"]  # [minute, MB, load] once a minute

    def at(minute: float) -> str:
        near = _nearest(samples, minute)
        return f"{near[1]:,.0f} MB at minute {near[0]:.0f}"

    config, loads = record["config"], [s[2] for s in samples]
    grown = _nearest(samples, 60)[1] - _nearest(samples, 1)[1]
    per_epoch = config["n_cycles"] * config["num_envs"] * (config["rollout_steps"] or 50)
    return (
        f"`{record['command'].replace('benchmarks/long_run.py', 'python benchmarks/long_run.py')}`"
        f" ({record['time'][:10]}, {machine_words(record['machine'])}, load average "
        f"{min(loads):.1f}-{max(loads):.1f}): `goalenvs train {record['env_id']} "
        f"--save-buffer` for {record['minutes']:.0f} minutes. Resident memory of the trainer "
        f"and its processes: "
        f"{at(1)}, {at(30)}, {at(60)}, {at(record['minutes'])}. It grew {grown:,.0f} MB "
        f"from minute 1 to minute 60, and the replay buffer's arrays take "
        f"{record['buffer_mb']:,.0f} MB when full ({config['buffer_size']:,} transitions; "
        f"{per_epoch:,} env steps an epoch). SIGKILL at minute "
        f"{record['killed_at_minute']:.1f}, after {record['epochs_committed_before_kill']} "
        f"committed epochs; `--resume` went on to epoch {record['epochs_at_end']}. "
        f"progress.csv holds every epoch once and in order: "
        f"{'yes' if record['epochs_in_order_once'] else 'no'}; its env steps add up across "
        f"the kill: {'yes' if record['env_steps_add_up'] else 'no'} "
        "(benchmarks/results/long_run.jsonl)."
    )


def manipulation(folder: Path | None = None) -> str:
    """benchmarks/fetch.py's table per task, from TASK_sSEED.csv and .json in ``folder``
    (manipulation/: the runs of the presets as they are)."""
    import fetch

    folder = folder or RESULTS / "manipulation"
    parts = []
    for task, runs in fetch.kept_runs([], folder).items():
        if runs:
            parts.append(
                f"`{fetch.TASKS[task]}`{fetch.TASK_NOTES.get(task, '')}\n\n"
                f"{fetch.table(task, dict(sorted(runs.items())), folder)}"
            )
            parts += _best_policy_lines(task, folder)
    return "\n\n".join(parts)


def manipulation_uniform() -> str:
    """The Fetch runs of the fetch_push preset before it replayed by goal motion
    (manipulation/uniform/: uniform replay)."""
    return manipulation(RESULTS / "manipulation" / "uniform")


def _best_policy_lines(task: str, folder: Path) -> list[str]:
    """For the kept runs of ``task`` in ``folder`` whose JSON holds their best policy's
    outcomes (``fetch.py outcomes``: parking's crash rate), one sentence each."""
    lines = []
    for path in sorted(folder.glob(f"{task}_s[0-9].json")):
        best = json.loads(path.read_text()).get("best_policy")
        if best:
            lines.append(
                f"{path.stem}'s best policy on {best['episodes']} fixed episodes (reset seeds "
                f"{best['seeds']}, deterministic): success {best['success']:.2f}, crash rate "
                f"{best['crash_rate']:.2f} (`benchmarks/fetch.py outcomes`)."
            )
    return lines


def fetch_push_floor() -> str:
    """Where a FetchPush cycle's time goes: the floor measured after each kept run of the
    fetch_push preset (manipulation/push_s*.json), and the share of the updates in it."""
    metas = [
        json.loads(path.read_text())
        for path in sorted((RESULTS / "manipulation").glob("push_s*.json"))
    ]
    config = metas[0]["config"]
    parts, shares = [], []
    for meta in metas:
        floor = meta["floor"]
        env, update = floor["env_seconds_per_cycle"], floor["update_seconds_per_cycle"]
        shares.append(update / (env + update))
        parts.append(
            f"seed {meta['seed']} {env:.2f} s of env steps and {update:.2f} s of gradient steps "
            f"({shares[-1]:.0%} updates), the run at {meta['ratio_to_floor']:.2f} of it "
            f"(load average {meta['load_after'][0]:.1f} when the floor was measured)"
        )
    updates = f"the {config['n_batches']} updates of {config['batch_size']:,}"
    bound = (
        f"{updates} bound the run"
        if min(shares) > 0.5
        else f"the env steps take most of each cycle, {updates} "
        f"{_span([100 * x for x in shares], '{:.0f}')}% of it"
    )
    return (
        "Where the time goes: the floor of a FetchPush cycle "
        f"({config['num_envs']} envs x {config['rollout_steps']} steps, precision "
        f"{config['precision']}), measured right after each run on the same machine "
        f"(`benchmarks/results/manipulation/push_s*.json`): {'; '.join(parts)}. On this CPU "
        f"{bound}."
    )


# --------------------------------------------------------------------------- figures in prose


def _seconds(values: Iterable[float], digits: int = 1) -> str:
    return " / ".join(f"{v:.{digits}f}" for v in values)


def _steps(values: Iterable[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def _fetch_reach_runs() -> list[tuple[int, list[dict[str, float]], list[float]]]:
    """Our FetchReach runs of benchmarks/tuned_sb3.py: (seed, curve rows, load)."""
    runs = []
    for r in read_jsonl(RESULTS / "tuned_sb3" / "runs.jsonl"):
        if r["task"] == "fetch_reach" and r["who"] == "ours":
            runs.append((r["seed"], _progress(RESULTS / "tuned_sb3" / r["csv"]), r["load"]))
    return sorted(runs, key=lambda run: run[0])


def fetch_reach_line() -> str:
    """FetchReach with the fetch_reach preset: first evaluation >= 0.95 and first 1.00."""
    runs = _fetch_reach_runs()
    first = [next(r for r in rows if r["success"] >= 0.95) for _, rows, _ in runs]
    full = [next(r for r in rows if r["success"] >= 1.0) for _, rows, _ in runs]
    loads = [x for *_, load in runs for x in load]
    return (
        f"On seeds {runs[0][0]}-{runs[-1][0]} (`benchmarks/results/tuned_sb3/"
        f"fetch_reach_ours_s*.csv`, 2 shared CPU cores at load average {min(loads):.1f}-"
        f"{max(loads):.1f}): the first evaluation at >= 0.95 came after "
        f"{_steps(r['env_steps'] for r in first)} env steps "
        f"({_seconds((r['success'] for r in first), 2)}; "
        f"{_seconds(r['seconds'] for r in first)} s), and 1.00 after "
        f"{_steps(r['env_steps'] for r in full)} "
        f"({_seconds(r['seconds'] for r in full)} s)."
    )


def push_climb() -> str:
    """Push-v0 per seed: how long eval success stays near zero, then how fast it climbs."""
    parts: dict[str, list[Any]] = {"quiet": [], "start": [], "to_09": [], "to_095": []}
    for seed in (0, 1, 2):
        rows = _progress(RESULTS / "new_envs" / f"push_s{seed}.csv")
        start = _first(rows, 0.15)
        hit, top = _first(rows, 0.9), _first(rows, 0.95)
        assert start is not None and hit is not None and top is not None
        before = [r for r in rows if r["env_steps"] < start["env_steps"]]
        parts["quiet"].append((before[-1]["env_steps"], max(r["eval_success"] for r in before)))
        parts["start"].append(start["env_steps"])
        parts["to_09"].append(hit["env_steps"] - start["env_steps"])
        parts["to_095"].append(top["env_steps"] - start["env_steps"])
    ceiling = max(x for _, x in parts["quiet"])
    return (
        f"Eval success stays at {ceiling:.2f} or below through the first "
        f"{_steps(n for n, _ in parts['quiet'])} env steps (seeds 0-2, "
        f"`benchmarks/results/new_envs/push_s*.csv`); from the first evaluation at >= 0.15 "
        f"({_steps(parts['start'])}) it takes {_steps(parts['to_09'])} env steps to the first "
        f"0.9 and {_steps(parts['to_095'])} to the first 0.95."
    )


def _old_fetch_push() -> tuple[list[float], list[float], list[float]]:
    """The earlier FetchPush schedule's five seeds: best eval, seconds, env steps."""
    best, seconds, steps = [], [], []
    for seed in range(5):
        rows = _progress(RESULTS / "fetch" / f"push_s{seed}.csv")
        best.append(max(r["eval_success"] for r in rows))
        seconds.append(rows[-1]["wall_time"])
        steps.append(rows[-1]["env_steps"])
    return best, seconds, steps


def fetch_push_tried() -> str:
    """The FetchPush schedules tried on one process, with what each gave."""
    best, seconds, steps = _old_fetch_push()
    tried = RESULTS / "manipulation" / "tried"
    n80 = json.loads((tried / "push_n80_s0.json").read_text())
    n80_rows = _progress(tried / "push_n80_s0.csv")
    seed0 = _progress(UNIFORM / "push_s0.csv")
    n160 = _progress(SCALING_H100 / "fetchpush_workers_cuda_n160_progress.csv")
    gpu40 = _progress(SCALING_H100 / "fetchpush_workers_cuda_progress.csv")
    n160_steps = n160[-1]["env_steps"]
    n160_best = max(r["eval_success"] for r in n160)
    gpu40_at = max(r["eval_success"] for r in gpu40 if r["env_steps"] <= n160_steps)
    return "\n".join(
        [
            "| schedule | result |",
            "|---|---|",
            "| 4 envs x 10 steps a cycle, 20 updates of 512 (0.5 updates, 256 sampled "
            "transitions per env step), 3x128, polyak 0.9, 1 thread | best eval success "
            f"{min(best):.2f}-{max(best):.2f} (20 episodes; {statistics.fmean(best):.2f} ± "
            f"{statistics.pstdev(best):.2f}) on 5 seeds that ran {min(seconds) / 60:.0f}-"
            f"{max(seconds) / 60:.0f} minutes, up to {max(steps) / 1000:.0f}k env steps; no "
            "trend (the table below) |",
            "| the same preset on 2 workers (`torchrun --nproc-per-node 2`, gradients "
            "averaged) | no gain on 2 busy cores in 7 minutes (the workers table below) |",
            "| 16 envs x 50 steps, 40 updates of 2,048 (about 100 sampled transitions per env "
            "step), 3x256, polyak 0.95, 2 threads: the preset's schedule | >= 0.9 on every seed "
            "run, with uniform replay and by goal motion (the tables above) |",
            f"| the same with 80 updates a cycle (about 200 sampled transitions per env step; "
            f"{n80['commit']}, bf16 updates) | seed 0's first eval >= 0.9: {_tried_hit(n80_rows)} "
            f"env steps, against {_tried_hit(seed0)} with 40 updates; "
            f"{n80['env_steps_per_s']:.0f} env steps/s, load "
            f"{n80['load']['min']:.1f}-{n80['load']['max']:.1f} |",
            f"| on the H100 machine, 16 env workers and the GPU learner: 160 updates a cycle "
            f"against 40 | best eval success {n160_best:.2f} at {n160_steps:,.0f} env steps "
            f"against {gpu40_at:.2f} with 40 at the same env steps (docs/training.md) |",
        ]
    )


def fetch_push_levers() -> str:
    """mrl's levers tried one at a time on FetchPush-v4 seed 0 against the fetch_push
    preset (manipulation/tried/push_<lever>_s0.json with its preset diff, and the
    preset's own runs, push_s<seed>)."""
    tried = RESULTS / "manipulation" / "tried"
    lines = [
        "| lever (one change to `fetch_push` as it was then, as the row says: uniform replay, "
        "or goal motion at priority_alpha 1.0 or 0.5, the latter with polyak 0.95 or 0.9), seed "
        "| first eval >= 0.9 "
        "| eval at 300,000 / 360,000 / 440,000 / 520,000 env steps | env steps/s, load | commit, "
        "precision |",
        "|---|---|---|---|---|",
    ]
    for path in sorted(UNIFORM.glob("push_s[0-9].json")):
        base = json.loads(path.read_text())
        seed = base["seed"]
        rows = _progress(path.with_suffix(".csv"))
        # a run records its resolved precision in the plan beside its config (older runs:
        # "auto", which was bf16 on this CPU)
        resolved = base["config"].get("plan", {}).get("precision")
        precision = resolved or f"{base['config']['precision']} (bf16 on this CPU)"
        lines.append(
            f"| none: uniform replay (uniform/push_s{seed}), seed {seed} | {_tried_hit(rows)} | "
            f"{_marks(rows)} | {base['env_steps_per_s']:.0f}, load "
            f"{base['load']['min']:.1f}-{base['load']['max']:.1f} | {base['commit']}, "
            f"{precision} |"
        )
    # The preset now, against the uniform-replay runs' config: the keys it changed.
    from goalenvs.agents.ddpg import DDPGConfig
    from goalenvs.train.presets import load_preset

    defaults = DDPGConfig().to_dict()
    preset = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in load_preset("fetch_push").config.items()
    }
    before = json.loads((UNIFORM / "push_s0.json").read_text())["config"]
    for folder, what in (
        (MOTION_ALPHA1, "replay by goal motion at priority_alpha 1.0: the preset before"),
        (MOTION_ALPHA05, "replay by goal motion at priority_alpha 0.5: the preset before"),
        (MANIPULATION, "replay by goal motion at priority_alpha 0.5, polyak 0.9: the preset now"),
    ):
        for path in sorted(folder.glob("push_s[0-9].json")):
            meta = json.loads(path.read_text())
            # The keys the run's config changed against the uniform-replay runs' config (a
            # key the older config lacks had its default; epochs are the run's length).
            diff = ", ".join(
                f"{key} {before.get(key, defaults[key])} -> {meta['config'][key]}"
                for key in preset
                if key != "epochs" and before.get(key, defaults[key]) != meta["config"][key]
            )
            rows = _progress(path.with_suffix(".csv"))
            name = path.relative_to(MANIPULATION).with_suffix("")
            lines.append(
                f"| {what} ({name}; `{diff}`), seed {meta['seed']} | {_tried_hit(rows)} | "
                f"{_marks(rows)} | {meta['env_steps_per_s']:.0f}, load "
                f"{meta['load']['min']:.1f}-{meta['load']['max']:.1f} | {meta['commit']}, "
                f"{meta['config']['plan']['precision']} |"
            )
    for path in sorted(tried.glob("push_*_s[0-9].json")):
        meta = json.loads(path.read_text())
        if "lever" not in meta:
            continue
        rows = _progress(path.with_suffix(".csv"))
        diff = ", ".join(
            f"{key} {change['fetch_push']} -> {change['tried']}"
            for key, change in meta["preset_diff"].items()
        )
        end = f"; stopped {meta['stopped']}" if "stopped" in meta else ""
        cap = meta.get("env_steps_cap")
        if not end and cap and _first(rows, 0.9) is None and rows[-1]["env_steps"] >= cap:
            end = f" by {cap:,} (its cap)"
        load = meta["load"]
        lines.append(
            f"| {meta['lever']} (`{diff}`), seed {meta['seed']} | {_tried_hit(rows)}{end} | "
            f"{_marks(rows)} | "
            f"{meta['env_steps_per_s']:.0f}, load {load['min']:.1f}-{load['max']:.1f} | "
            f"{meta['commit']}, {meta['precision'].split(' ')[0]} |"
        )
    return "\n".join(lines)


def _marks(rows: list[dict[str, float]]) -> str:
    """The evals at 300k, 360k (near the target's mark of 350k), 440k and 520k env steps."""
    return " / ".join(_at(rows, mark) for mark in (300_000, 360_000, 440_000, 520_000))


def _at(rows: list[dict[str, float]], env_steps: int, column: str = "eval_success") -> str:
    row = next((r for r in rows if r["env_steps"] >= env_steps), None)
    return "-" if row is None else f"{row[column]:.2f}"


def _tried_hit(rows: list[dict[str, float]]) -> str:
    hit = _first(rows, 0.9)
    return "no 0.9" if hit is None else f"{hit['eval_success']:.2f} at {hit['env_steps']:,.0f}"


def checker() -> str:
    """benchmarks/checker.py's output as recorded in checker.log: its tables as they are,
    its other lines in a text block."""
    info, output = read_record("checker.log")
    parts = [
        f"Recorded {info['date']} UTC on {machine_words(info['machine'])}, load average (1 min) "
        f"{info['load'][0]:.1f} at the start and {info['load_after'][0]:.1f} at the end "
        f"(`benchmarks/results/checker.log`)."
    ]
    table: list[str] = []
    prose: list[str] = []
    for line in [*output.strip().splitlines(), ""]:
        if line.startswith("|"):
            if prose:
                parts.append("```text\n" + "\n".join(prose) + "\n```")
                prose = []
            table.append(line)
        elif line.strip():
            prose.append(line)
        elif table:
            parts.append("\n".join(table))
            table = []
    if prose:
        parts.append("```text\n" + "\n".join(prose) + "\n```")
    return "\n\n".join(parts)


def _highway_rates() -> tuple[dict[str, Any], dict[str, tuple[float, float]]]:
    """parking_vs_highway.log: run info, and per row (goalenvs, highway-env) steps per CPU s."""
    info, output = read_record("parking_vs_highway.log")
    rows = {}
    for line in output.splitlines():
        found = re.match(r"^(.+?)\s{2,}([\d,]+)\s+([\d,]+)\s+[\d,]+x", line)
        if found:
            label, mine, theirs = found.groups()
            rows[label] = (float(mine.replace(",", "")), float(theirs.replace(",", "")))
    return info, rows


def highway_rate() -> str:
    """highway-env's parking-v0 in env steps per CPU second (parking_vs_highway.log)."""
    info, rows = _highway_rates()
    ours, theirs = rows["single env, steps/s"]
    return (
        f"highway-env's `parking-v0` steps {theirs:,.0f} times per CPU second through "
        f"`gym.make` (one env), goalenvs' `Parking-v0` {ours:,.0f} "
        f"(`python benchmarks/parking_vs_highway.py`, {info['date']} UTC, "
        f"{machine_words(info['machine'])}, "
        f"load average {info['load'][0]:.1f}; `benchmarks/results/parking_vs_highway.log`)."
    )


def sb3_left_out() -> str:
    """The tests tests/test_sb3_suite.py leaves out of SB3's file: pass rate per buffer."""
    records = read_jsonl("sb3_left_out.jsonl")
    latest = {(r["test"], r["sb3_version"], r["buffer"], r["seed"]): r for r in records}
    lines = [
        "| test | stable-baselines3 | buffer | seeds | passed | value per seed | "
        "date, load (1 min) |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for (test, version, buffer, _), r in latest.items():
        groups.setdefault((test, version, buffer), []).append(r)
    for (test, version, buffer), runs in groups.items():
        runs.sort(key=lambda r: r["seed"])
        values = " ".join(f"{r['success_after_learn'][0]:.2f}" for r in runs)
        loads = [r["load"][0] for r in runs]
        dates = sorted(r["date"] for r in runs)
        lines.append(
            f"| `{test}` | {version} | {buffer} | {runs[0]['seed']}-{runs[-1]['seed']} | "
            f"{sum(r['passed'] for r in runs)}/{len(runs)} | {values} | {dates[0]} to "
            f"{dates[-1]} UTC, {min(loads):.1f}-{max(loads):.1f} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- the presets


def _comment(*paragraphs: str) -> str:
    """Prose as TOML comment lines of at most 88 characters."""
    return "\n".join(
        textwrap.fill(p, width=88, initial_indent="# ", subsequent_indent="# ") for p in paragraphs
    )


def _measured(rate: float, machine: str) -> str:
    """A preset's [measured] table: the rate to two significant digits, and the machine."""
    rounded = float(f"{rate:.2g}")
    number = int(rounded) if rounded >= 10 else rounded
    return f"[measured]\nenv_steps_per_s = {number}\nmachine = {json.dumps(machine)}"


def _tuned(task: str) -> list[dict[str, Any]]:
    """The latest train.jsonl rows of goalenvs' tuned trainer for ``task``, by seed."""
    return [r for r in _train_rows([task]) if r["who"].startswith("goalenvs DDPG+HER")]


POINT_REACH_LOAD = "2 CPU cores shared with six other jobs"


def preset_point_reach() -> str:
    """point_reach.toml: time to 0.95 and to 1.0 per seed (train.jsonl)."""
    rows = [r for r in _tuned("point_reach") if "baselines" not in r["who"]]
    full = [next(t for t, _, s in r["curve"] if s >= 1.0) for r in rows]
    return _comment(
        f"Measured (benchmarks/results/train.jsonl, seeds {rows[0]['seed']}-{rows[-1]['seed']}, "
        f"{POINT_REACH_LOAD}; docs/baselines.md, PointReach-v0): eval success first reached "
        f"0.95 after {_seconds(r['time_to_target'] for r in rows)} s "
        f"({_steps(r['steps_to_target'] for r in rows)} env steps) and 1.0 after "
        f"{_seconds(full)} s."
    )


def preset_point_reach_measured() -> str:
    """point_reach.toml's [measured]: the mean env steps per second to 0.95."""
    rows = [r for r in _tuned("point_reach") if "baselines" not in r["who"]]
    steps = statistics.fmean(r["steps_to_target"] for r in rows)
    seconds = statistics.fmean(r["time_to_target"] for r in rows)
    return (
        _comment(
            f"benchmarks/results/train.jsonl, PointReach-v0: {steps:,.0f} env steps to 0.95 "
            f"in {seconds:.1f} s (means of {len(rows)} seeds)."
        )
        + "\n"
        + _measured(steps / seconds, POINT_REACH_LOAD)
    )


def preset_point_reach_device() -> str:
    """point_reach.toml's [device] comment: the H100's step, update and training figures."""
    steps = {r["envs"]: r for r in _twins_steps() if r["env"] == "PointReach-v0"}
    text = (H100 / "update_floor.txt").read_text()
    floor = {int(b): float(e) for b, e in re.findall(r"batch (\d+),.*?eager ([\d.]+) ms", text)}
    train, _ = _h100_point_reach_log()
    loop = _twins_train_row(train, "cuda", "device loop")
    median, rate, missed = loop["median"], loop["rate"], _missed(loop)
    reached = " / ".join("-" if t is None else f"{t:.1f}" for t in loop["seconds"])
    commit, _ = _scaling_readme()["gpu_twins_train.log"]
    small, large = min(floor), max(floor)
    return _comment(
        f"On one H100 (benchmarks/results/{H100.name}/: the project at commit "
        f"{_h100_commit()}, the machine otherwise idle) a CUDA step of 4,096 PointReach twins "
        f"took {4096 / steps[4096]['eager'] * 1e3:.2f} ms and one of 256 "
        f"{256 / steps[256]['eager'] * 1e3:.2f} ms (eager), and a plain DDPG update "
        f"{floor[small]:.1f} ms at batch {small:,} against {floor[large]:.1f} ms at "
        f"{large:,}: launches, not arithmetic, bound them. There, at commit {commit} "
        f"(benchmarks/results/{SCALING_H100.name}/), this section reached eval success 0.95 "
        f"after {reached} s (seeds 0-{len(loop['seconds']) - 1}"
        + (f"; {missed}" if missed else "")
        + f"; median {median:g} s) at {rate:,.0f} env steps/s: short of the 3 s it aims at "
        "(docs/baselines.md, On-device DDPG+HER)."
    )


def _h100_commit() -> str:
    found = re.search(r"at commit (\w+)", (H100 / "README.md").read_text())
    assert found is not None
    return found.group(1)


PARKING_MACHINE = "2 CPU cores, the run alone on them"


def preset_parking() -> str:
    """parking.toml: batches of 256 against 1024 (train.jsonl, two dates of runs)."""
    earlier = [
        r
        for r in read_jsonl("train.jsonl")
        if r["task"] == "parking" and r["date"] == "2026-11-22 01:46"
    ]
    now = _tuned("parking")

    def later(r: dict[str, Any]) -> float:
        return statistics.fmean(s for _, n, s in r["curve"] if n > r["steps_to_target"])

    return _comment(
        f"Measured (benchmarks/results/train.jsonl, seeds 0-2): with batches of 256 (the runs of "
        f"2026-11-22 01:46 UTC) the first 0.9 came after "
        f"{_steps(r['steps_to_target'] for r in earlier)} env steps and the evaluations after "
        f"it averaged {' / '.join(f'{later(r):.2f}' for r in earlier)}; with 1024 (each run "
        f"alone on 2 CPU cores) after {_steps(r['steps_to_target'] for r in now)} env steps "
        f"({_seconds((r['time_to_target'] for r in now), 0)} s), later evaluations averaging "
        f"{' / '.join(f'{later(r):.2f}' for r in now)}."
    )


def preset_parking_measured() -> str:
    """parking.toml's [measured]: the mean env steps per second to 0.9."""
    rows = _tuned("parking")
    steps = statistics.fmean(r["steps_to_target"] for r in rows)
    seconds = statistics.fmean(r["time_to_target"] for r in rows)
    return (
        _comment(
            f"benchmarks/results/train.jsonl, Parking-v0: {steps:,.0f} env steps to 0.9 in "
            f"{seconds:.1f} s (means of {len(rows)} seeds)."
        )
        + "\n"
        + _measured(steps / seconds, PARKING_MACHINE)
    )


NEW_ENVS_LOAD = "2 CPU cores at load average 6-10"


def preset_point_maze() -> str:
    """point_maze.toml: the U-maze per seed, medium and large (new_envs/*.csv)."""
    hits = []
    for seed in (0, 1, 2):
        rows = _progress(RESULTS / "new_envs" / f"point_maze_umaze_s{seed}.csv")
        hit = _first(rows, 0.9)
        assert hit is not None
        hits.append(hit)
    medium = _progress(RESULTS / "new_envs" / "point_maze_medium_s0.csv")
    large = _progress(RESULTS / "new_envs" / "point_maze_large_s0.csv")
    medium_hit = _first(medium, 0.95)
    large_best = max(large, key=lambda r: r["eval_success"])
    assert medium_hit is not None
    return _comment(
        f"Measured (benchmarks/results/new_envs/, {NEW_ENVS_LOAD}; docs/baselines.md, "
        f'"PointMaze-v0 and Push-v0"): umaze\'s eval success first reached 0.9 after '
        f"{_steps(r['env_steps'] for r in hits)} env steps on seeds 0-2 "
        f"({_seconds(r['wall_time'] for r in hits)} s). Medium and large were not tuned "
        f"(seed 0: medium {medium_hit['eval_success']:.2f} after "
        f"{medium_hit['env_steps']:,.0f} env steps; large at best "
        f"{large_best['eval_success']:.2f}, after {large_best['env_steps']:,.0f}, of "
        f"{large[-1]['env_steps']:,.0f})."
    )


def _push_hits() -> list[tuple[dict[str, float], dict[str, float]]]:
    hits = []
    for seed in (0, 1, 2):
        rows = _progress(RESULTS / "new_envs" / f"push_s{seed}.csv")
        hit, top = _first(rows, 0.9), _first(rows, 0.95)
        assert hit is not None and top is not None
        hits.append((hit, top))
    return hits


def preset_push() -> str:
    """push.toml: first 0.9 and first 0.95 per seed (new_envs/push_s*.csv)."""
    hits = _push_hits()
    return _comment(
        f"Measured (benchmarks/results/new_envs/push_s*.csv, {NEW_ENVS_LOAD}; "
        f'docs/baselines.md, "PointMaze-v0 and Push-v0"): eval success first reached 0.9 '
        f"after {_steps(h['env_steps'] for h, _ in hits)} env steps on seeds 0-2 "
        f"({_seconds((h['wall_time'] for h, _ in hits), 0)} s), 0.95 after "
        f"{_steps(t['env_steps'] for _, t in hits)}."
    )


def preset_push_measured() -> str:
    """push.toml's [measured]: seed 0's env steps per second to 0.9."""
    hit, _ = _push_hits()[0]
    return (
        _comment(
            f"benchmarks/results/new_envs/push_s0.csv: {hit['env_steps']:,.0f} env steps to "
            f"0.9 in {hit['wall_time']:.0f} s (seed 0)."
        )
        + "\n"
        + _measured(hit["env_steps"] / hit["wall_time"], "2 CPU cores shared with other jobs")
    )


def preset_fetch_reach() -> str:
    """fetch_reach.toml: the FetchReach line of docs/baselines.md."""
    return _comment("Measured o" + fetch_reach_line().replace("`", "").removeprefix("O"))


def _manipulation(
    name: str, folder: Path = MANIPULATION
) -> tuple[dict[str, Any], list[dict[str, float]]]:
    meta = json.loads((folder / f"{name}.json").read_text())
    return meta, _progress(folder / f"{name}.csv")


def _run_code(meta: dict[str, Any]) -> str:
    """The commit and the update precision a kept run trained with: the resolved one its
    plan recorded, else its config's (a config from before the precision setting had
    float32 updates only; "auto" from before plans were recorded)."""
    precision = meta["config"].get("plan", {}).get("precision")
    precision = precision or meta["config"].get("precision", "fp32")
    return (
        f"{meta.get('commit') or 'commit not recorded'}, "
        f"{'precision auto' if precision == 'auto' else precision}"
    )


def _seeds(task: str, folder: Path = MANIPULATION) -> list[str]:
    """The kept runs of ``task`` in ``folder`` by name (``push_s0``, ...), in seed order."""
    return sorted(path.stem for path in folder.glob(f"{task}_s[0-9].json"))


def _manipulation_words(
    names: Sequence[str], mark: float = 0.9, folder: Path = MANIPULATION
) -> str:
    """The kept runs ``names`` (in ``folder``) in words: the commit and precision each ran,
    when it first reached ``mark`` (or its best, when it did not), its speed and its ratio
    to the floor, with the load over all of them."""
    runs = [_manipulation(name, folder) for name in names]
    loads = [x for meta, _ in runs for x in (meta["load_before"][0], meta["load_after"][0])]
    loads += [
        x
        for meta, _ in runs
        if meta.get("load")
        for x in (meta["load"]["min"], meta["load"]["max"])
    ]
    names = [_cpu_words(meta["machine"]) for meta, _ in runs]
    cpus = set(names) - {""}
    parts = []
    for (meta, rows), name in zip(runs, names, strict=True):
        # each run names its CPU when the runs trained on more than one kind
        cpu = f", {name}" if len(cpus) > 1 and name else ""
        floor = (
            f", {meta['ratio_to_floor']:.2f} of the floor"
            if meta.get("ratio_to_floor") is not None
            else ""
        )
        hit = _first(rows, mark)
        if hit is None:
            best = max(rows, key=lambda r: r["eval_success"])
            reached = (
                f"did not reach {mark} in {rows[-1]['env_steps']:,.0f} env steps "
                f"({rows[-1]['wall_time'] / 60:.1f} min): best {best['eval_success']:.2f} at "
                f"{best['env_steps']:,.0f}"
            )
        else:
            reached = (
                f"first reached {hit['eval_success']:.2f} at {hit['env_steps']:,.0f} env steps "
                f"({hit['wall_time'] / 60:.1f} min)"
            )
        parts.append(
            f"seed {meta['seed']} ({_run_code(meta)}{cpu}) {reached}, "
            f"{meta['env_steps_per_s']:.0f} env steps/s{floor}"
        )
    machines = f" of {' or '.join(sorted(cpus))}" if cpus else ""
    return (
        f"({folder.relative_to(ROOT)}/, 2 cores{machines} at load average "
        f"{min(loads):.1f}-{max(loads):.1f} from other work): " + "; ".join(parts)
    )


def _cpu_words(machine: dict[str, Any] | str) -> str:
    """A kept run's CPU model as a reader names it ('Intel(R) Xeon(R) Processor' -> 'Intel
    Xeon'); "" where its record names none (older records keep the machine as a line of
    text, 'x86_64, 2 cores, AMD EPYC', the model after the cores when it was known)."""
    cpu = machine["cpu"] if isinstance(machine, dict) else machine.split("cores,")[-1]
    return re.sub(r"\((R|TM)\)| (Processor|CPU)\b", "", cpu).strip()


def preset_fetch_push() -> str:
    """fetch_push.toml: the earlier schedule's five seeds, this one's runs by goal motion
    and with uniform replay."""
    best, seconds, _ = _old_fetch_push()
    meta, _ = _manipulation("push_s1", UNIFORM)
    floor = meta["floor"]
    share = floor["update_seconds_per_cycle"] / (
        floor["update_seconds_per_cycle"] + floor["env_seconds_per_cycle"]
    )
    push = _seeds("push")
    uniform = _seeds("push", UNIFORM)
    alpha1 = _seeds("push", MOTION_ALPHA1)
    alpha05 = _seeds("push", MOTION_ALPHA05)
    return _comment(
        f"The schedule it replaces (4 envs, cycles of 10 steps and 20 updates of 512, 3x128) "
        f"reached best eval success {statistics.fmean(best):.2f} +- "
        f"{statistics.pstdev(best):.2f} on 5 seeds of {min(seconds) / 60:.0f}-"
        f"{max(seconds) / 60:.0f} minutes (benchmarks/results/fetch/push_s*.csv). This one "
        "on FetchPush-v4 "
        + _manipulation_words(push)
        + ". With polyak 0.95 (the preset before polyak 0.9) "
        + _manipulation_words(alpha05, folder=MOTION_ALPHA05)
        + ". By goal motion at priority_alpha 1.0 (the preset before 0.5) "
        + _manipulation_words(alpha1, folder=MOTION_ALPHA1)
        + ". With uniform replay (the preset before goal motion) "
        + _manipulation_words(uniform, folder=UNIFORM)
        + f" (the floor: bare env steps + bare updates, where the updates took {share:.0%} "
        "of a cycle)."
    )


def preset_fetch_pick_and_place() -> str:
    """fetch_pick_and_place.toml: its FetchPickAndPlace runs, and uniform replay's."""
    runs = _seeds("pick_and_place")
    return _comment(
        "On FetchPickAndPlace-v4 "
        + _manipulation_words(runs)
        + ". Uniform replay, otherwise the same "
        + _manipulation_words(
            _seeds("pick_and_place", UNIFORM),
            folder=UNIFORM,
        )
        + "."
    )


def preset_fetch_slide() -> str:
    """fetch_slide.toml: its FetchSlide runs, and uniform replay's."""
    runs = _seeds("slide")
    uniform = _seeds("slide", UNIFORM)
    two_step = _seeds("slide", SLIDE_TWO_STEP)
    one_step = _seeds("slide", SLIDE_ONE_STEP)
    ddpg = _seeds("slide", SLIDE_DDPG)
    before = _seeds("slide", MOTION_ALPHA05)
    return _comment(
        "On FetchSlide-v4 "
        + _manipulation_words(runs, mark=0.8)
        + ". With fetch_push's exploration and the average 0.9 (the preset before mrl's "
        + "exploration and the average 0.97) "
        + _manipulation_words(two_step, mark=0.8, folder=SLIDE_TWO_STEP)
        + ". On one-step returns (the preset before n_step 2) "
        + _manipulation_words(one_step, mark=0.7, folder=SLIDE_ONE_STEP)
        + ". Trained by DDPG and evaluated by the actor itself (the preset before TD3) "
        + _manipulation_words(ddpg, mark=0.7, folder=SLIDE_DDPG)
        + ". With polyak 0.95 (the preset before polyak 0.9) "
        + _manipulation_words(before, mark=0.7, folder=MOTION_ALPHA05)
        + ". Uniform replay, otherwise the same "
        + _manipulation_words(uniform, mark=0.7, folder=UNIFORM)
        + "."
    )


#: The levers table's tasks beside FetchPush: each task's env and the preset it trains with.
OTHER_LEVER_TASKS = {
    "pick_and_place": ("FetchPickAndPlace-v4", "fetch_pick_and_place"),
    "slide": ("FetchSlide-v4", "fetch_slide"),
    "panda_push": ("PandaPush-v3", "panda_push"),
    "panda_pick_and_place": ("PandaPickAndPlace-v3", "panda_push"),
}


def fetch_other_levers() -> str:
    """Levers tried on FetchPickAndPlace, FetchSlide and PandaPush against uniform replay:
    the uniform run (uniform/, or manipulation/ where the preset replays uniformly), each
    manipulation/tried/{task}_<lever>_s<seed>.json, the preset's runs before its last changes
    (motion_alpha05/, ddpg/, one_step/, two_step/) and the preset's own runs when they are a
    lever (their JSON holds the lever and the preset diff, as the tried ones)."""
    lines = [
        "| task | run | first eval >= 0.9 | best eval success | eval at 300,000 / 700,000 / "
        "1,000,000 env steps | env steps/s, load | commit, precision |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, (env, preset) in OTHER_LEVER_TASKS.items():
        currents = sorted(MANIPULATION.glob(f"{task}_s[0-9].json"))
        uniforms = sorted(UNIFORM.glob(f"{task}_s[0-9].json"))
        tried = sorted((MANIPULATION / "tried").glob(f"{task}_*_s[0-9].json"))
        before = [  # the preset's runs before its last changes
            *sorted(MOTION_ALPHA05.glob(f"{task}_s[0-9].json")),
            *sorted(SLIDE_DDPG.glob(f"{task}_s[0-9].json")),
            *sorted(SLIDE_ONE_STEP.glob(f"{task}_s[0-9].json")),
            *sorted(SLIDE_TWO_STEP.glob(f"{task}_s[0-9].json")),
        ]
        for path in [*uniforms, *tried, *before, *currents]:
            current = path in currents
            meta = json.loads(path.read_text())
            rows = _progress(path.with_suffix(".csv"))
            best = max(rows, key=lambda r: r["eval_success"])
            where = f"{path.parent.name}/{path.stem}" if path.parent != MANIPULATION else path.stem
            if "lever" in meta:
                diff = ", ".join(
                    f"{key} {change['uniform']} -> {change['tried']}"
                    for key, change in meta["preset_diff"].items()
                )
                now = f": the preset now, {preset} ({where})" if current else ""
                run = f"{meta['lever']}{now} (`{diff}`), seed {meta['seed']}"
            elif current:
                run = f"uniform replay: the preset, {preset} ({where}), seed {meta['seed']}"
            else:
                run = f"uniform replay ({where}), seed {meta['seed']}"
            marks = " / ".join(_at(rows, mark) for mark in (300_000, 700_000, 1_000_000))
            load = meta.get("load") or {}
            loads = (
                f"load {load['min']:.1f}-{load['max']:.1f}"
                if load
                else f"load {meta['load_before'][0]:.1f} before, {meta['load_after'][0]:.1f} after"
            )
            hit = _tried_hit(rows) + (f"; stopped {meta['stopped']}" if "stopped" in meta else "")
            lines.append(
                f"| {env} | {run} | {hit} | {best['eval_success']:.2f} at "
                f"{best['env_steps']:,.0f} | {marks} | {meta['env_steps_per_s']:.0f}, {loads} | "
                f"{_run_code(meta)} |"
            )
    return "\n".join(lines)


def _evals(rows: list[dict[str, float]], column: str, cap: int = 1_000_000) -> str:
    """``column`` (an eval success) at 700,000 env steps, its best within ``cap`` and the
    last five evaluations within ``cap``."""
    within = [r for r in rows if r["env_steps"] <= cap]
    best = max(within, key=lambda r: r[column])
    last = ", ".join(f"{r[column]:.2f}" for r in within[-5:])
    return f"{_at(rows, 700_000, column)} | {best[column]:.2f} at {best['env_steps']:,.0f} | {last}"


def policy_average() -> str:
    """The runs evaluated by an average of the policy (``policy_average``), each epoch's
    evaluation of the average beside that of the trained networks on the same episodes."""
    lines = [
        "| task | run | acting by | at 700,000 env steps | best within 1,000,000 | last five "
        "evaluations within 1,000,000 | commit, precision |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in sorted(MANIPULATION.rglob("*_s[0-9].json")):
        rows = _progress(path.with_suffix(".csv"))
        if not rows or "eval_success_online" not in rows[0]:
            continue
        meta = json.loads(path.read_text())
        keep = meta["config"]["policy_average"]
        env = meta["env_id"].partition(":")[2]
        run = f"{path.parent.name}/{path.stem}, seed {meta['seed']}"
        for who, column in (
            (f"the average ({keep})", "eval_success"),
            ("the trained actor", "eval_success_online"),
        ):
            lines.append(f"| {env} | {run} | {who} | {_evals(rows, column)} | {_run_code(meta)} |")
    return "\n".join(lines)


def average_actor() -> str:
    """benchmarks/average_actor.py's rows: each checkpoint's actor, target actor and (in a
    run made with policy_average) average on the same episodes, one table per measuring
    command (each names its own date, machine and load)."""
    latest = {(r["run"], r["epoch"]): r for r in read_jsonl("average_actor.jsonl")}
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in latest.values():
        groups.setdefault(r["command"], []).append(r)
    parts = []
    for command, records in groups.items():
        first = records[0]
        loads = sorted(r["load"][0] for r in records)
        load = f"{loads[0]:.1f}" if loads[0] == loads[-1] else f"{loads[0]:.1f}-{loads[-1]:.1f}"
        lines = [
            f"`{command}` ({first['date']} UTC, {machine_words(first['machine'])}, "
            f"load average {load} from a training run beside it; "
            f"{first['episodes']} episodes each, reset seeds 10,000 on; "
            "benchmarks/results/average_actor.jsonl):",
            "",
            "| run | epoch | env steps | actor | target actor (polyak) | average |",
            "|---|---|---|---|---|---|",
        ]
        for r in records:
            rates = r["success"]
            average = f"{rates['average']:.3f}" if "average" in rates else "-"
            lines.append(
                f"| {r['run']} | {r['epoch']} | {r['env_steps']:,} | {rates['actor']:.3f} | "
                f"{rates['target']:.3f} ({r['polyak']}) | {average} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def preset_panda_push() -> str:
    """panda_push.toml: the panda preset's PandaPush runs, and this schedule's on PandaPush
    and PandaPickAndPlace."""
    runs = [r for r in read_jsonl("panda.jsonl") if r["env"] == "PandaPush-v3"]
    longest = max(runs, key=lambda r: r["curve"][-1][1])
    return _comment(
        f"The panda preset's small schedule (8 envs, cycles of 5 steps and 10 updates of 512, "
        f"3x128) did not learn PandaPush: best eval success "
        f"{max(p[2] for p in longest['curve']):.2f} in {longest['curve'][-1][1]:,.0f} env "
        f"steps (benchmarks/results/panda.jsonl, seed {longest['seed']}). Measured with this "
        "one on PandaPush-v3 "
        + _manipulation_words(_seeds("panda_push"))
        + ". On PandaPickAndPlace-v3 "
        + _manipulation_words(_seeds("panda_pick_and_place"))
        + "."
    )


def preset_panda() -> str:
    """panda.toml: PandaPush's env step in the floor, PandaReach's runs (panda.jsonl)."""
    name = _seeds("panda_push")[0]
    meta, _ = _manipulation(name)
    per_step = meta["floor"]["env_seconds_per_cycle"] / (16 * 50) * 1e3
    reach = sorted(
        (r for r in read_jsonl("panda.jsonl") if r["env"] == "PandaReach-v3"),
        key=lambda r: r["seed"],
    )
    loads = [x for r in reach for x in r["load"]]
    first = [r["curve"][0] for r in reach]
    return _comment(
        f"A PandaPush step took {per_step:.2f} ms in bare SyncVectorEnv steps of 16 envs "
        f"(benchmarks/results/manipulation/{name}.json, the floor, 2 cores at load "
        f"average {meta['load_after'][0]:.1f}-{meta['load_before'][0]:.1f}). PandaReach-v3 "
        f"with this preset (benchmarks/results/panda.jsonl, seeds {reach[0]['seed']}-"
        f"{reach[-1]['seed']}, load average {min(loads):.1f}-{max(loads):.1f}): eval success "
        f"{' / '.join(f'{p[2]:.2f}' for p in first)} at the first evaluation "
        f"({_steps(p[1] for p in first)} env steps, {_seconds((p[0] for p in first), 0)} s)."
    )


def preset_highway() -> str:
    """highway.toml: highway-env's steps per CPU second (parking_vs_highway.log)."""
    return _comment(highway_rate().replace("`", ""))


def preset_baselines() -> str:
    """baselines.toml: the length of its epochs on PointReach (train.jsonl)."""
    (row,) = [r for r in _train_rows(["point_reach"]) if "baselines" in r["who"]]
    times = [t for t, _, _ in row["curve"]]
    epochs = [b - a for a, b in zip([0.0, *times[:-1]], times, strict=True)]
    per_epoch = row["curve"][0][1]
    return _comment(
        f"On PointReach (benchmarks/results/train.jsonl, seed {row['seed']}, "
        f"{POINT_REACH_LOAD}) its epochs of {per_epoch:,} env steps took {min(epochs):.0f}-"
        f"{max(epochs):.0f} s, and eval success was {row['best_success']:.2f} after "
        f"{row['env_steps']:,} env steps ({row['wall_time']:.0f} s)."
    )


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
    "manipulation_uniform": manipulation_uniform,
    "fetch_other_levers": fetch_other_levers,
    "policy_average": policy_average,
    "average_actor": average_actor,
    "goal_motion_cost": goal_motion_cost,
    "fetch_slide_cost": fetch_slide_cost,
    "fetch_slide_n_step_cost": fetch_slide_n_step_cost,
    "fetch_slide_total_cost": fetch_slide_total_cost,
    "preset.fetch_pick_and_place": preset_fetch_pick_and_place,
    "preset.fetch_slide": preset_fetch_slide,
    "fetch_push_floor": fetch_push_floor,
    "long_run": long_run,
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
    "device_buffer_words": device_buffer_words,
    "sb3_her_learning": sb3_her_learning,
    "sb3_her_arrays": sb3_her_arrays,
    "sb3_test_her": sb3_test_her,
    "seed_margins": seed_margins,
    "sb3_left_out": sb3_left_out,
    "fetch_reach_line": fetch_reach_line,
    "push_climb": push_climb,
    "fetch_push_tried": fetch_push_tried,
    "fetch_push_levers": fetch_push_levers,
    "checker": checker,
    "highway_rate": highway_rate,
    "h100_twins_steps": h100_twins_steps,
    "h100_compile": h100_compile,
    "h100_point_reach": h100_point_reach,
    "h100_device_buffer": h100_device_buffer,
    "h100_update_floor": h100_update_floor,
    "h100_fetch_push": h100_fetch_push,
    "h100_summary": h100_summary,
    "scaling_cpu": scaling_cpu,
    "h100_scaling": h100_scaling,
    "h100_update": h100_update,
    "preset.baselines": preset_baselines,
    "preset.point_reach": preset_point_reach,
    "preset.point_reach_device": preset_point_reach_device,
    "preset.point_reach_measured": preset_point_reach_measured,
    "preset.parking": preset_parking,
    "preset.parking_measured": preset_parking_measured,
    "preset.point_maze": preset_point_maze,
    "preset.push": preset_push,
    "preset.push_measured": preset_push_measured,
    "preset.fetch_reach": preset_fetch_reach,
    "preset.fetch_push": preset_fetch_push,
    "preset.panda": preset_panda,
    "preset.panda_push": preset_panda_push,
    "preset.highway": preset_highway,
}

DOC_FILES = ("baselines.md", "benchmarks.md", "gpu.md", "checks.md", "training.md", "buffer.md")


def render(text: str, found: set[str], toml: bool = False) -> str:
    """``text`` with every marked block rebuilt (``toml``: the presets' comment markers);
    the names met are added to ``found``."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in BUILDERS:
            raise KeyError(f"report:{name} has no builder in benchmarks/report.py")
        found.add(name)
        body = BUILDERS[name]().rstrip()
        return f"{match.group(1)}{body}\n{match.group(4)}"

    return (TOML_BLOCK if toml else BLOCK).sub(replace, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrites the docs' and presets' blocks, or with --check reports the ones that differ
    (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a diff")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    parser.add_argument("--presets", type=Path, default=PRESETS, help="the presets folder")
    args = parser.parse_args(argv)
    found: set[str] = set()
    stale = []
    targets = [(args.docs / name, False) for name in DOC_FILES]
    targets += [(path, True) for path in sorted(args.presets.glob("*.toml"))]
    for path, toml in targets:
        text = path.read_text()
        new = render(text, found, toml)
        if new != text:
            stale.append(path.name)
            if not args.check:
                path.write_text(new)
    missing = sorted(set(BUILDERS) - found)
    if missing:
        print(f"blocks with no place in the docs or presets: {', '.join(missing)}")
        return 1
    if stale and args.check:
        print(f"out of date (run python benchmarks/report.py): {', '.join(stale)}")
        return 1
    print("rewritten: " + (", ".join(stale) if stale else "nothing (up to date)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
