"""Result files record the machine as goalenvs describes it: the CPU model, the cores
usable under the affinity and the container's CPU quota, torch, bf16 (benchmarks/evidence.py
and benchmarks/fetch.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import evidence  # noqa: E402
import fetch  # noqa: E402
import report  # noqa: E402

from goalenvs.train.machine import cpu_model, describe_machine, usable_cores  # noqa: E402


def test_a_result_record_names_the_commit_it_measured_and_the_described_machine():
    info = evidence.run_info()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True)
    assert info["commit"].rstrip("+") == head.stdout.decode().strip() != ""
    assert info["machine"] == describe_machine()
    assert info["machine"]["cpu"] == cpu_model() != ""  # never the empty processor() string
    assert info["machine"]["cores"] == usable_cores()


def test_a_record_of_an_earlier_benchmark_does_not_mark_the_code_changed(tmp_path, monkeypatch):
    root, git = tmp_path / "repo", ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    results = root / "benchmarks" / "results"
    results.mkdir(parents=True)
    (root / "code.py").write_text("x = 1\n")
    (results / "a.jsonl").write_text("{}\n")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run([*git, *command], cwd=root, check=True)
    monkeypatch.setattr(evidence, "RESULTS", results)
    clean = evidence.commit()
    assert clean and not clean.endswith("+")
    (results / "a.jsonl").write_text("{}\n{}\n")  # a queue's earlier benchmark wrote it
    assert evidence.commit() == clean
    (root / "code.py").write_text("x = 2\n")
    assert evidence.commit() == clean + "+"


def test_machine_words_reads_old_sentences_and_new_dicts():
    assert evidence.machine_words("x86_64, 2 cores, AMD EPYC") == "x86_64, 2 cores, AMD EPYC"
    described = dict(cpu="AMD EPYC 9654", cores=2, cores_total=64, cpu_quota=2.0, cuda=None)
    described.update(torch="2.13.0+cpu", cpu_bf16=True, platform="Linux-6.8-x86_64")
    assert evidence.machine_words(described) == (
        "AMD EPYC 9654, 2 of 64 cores usable, torch 2.13.0+cpu, bf16"
    )
    alone = {**described, "cores": 64, "cpu_bf16": False, "cuda": "NVIDIA H100 80GB HBM3"}
    assert evidence.machine_words(alone) == (
        "AMD EPYC 9654, 64 cores, torch 2.13.0+cpu, no bf16 instructions, NVIDIA H100 80GB HBM3"
    )
    # scaling.jsonl's older records: cores, cpu and gpu only
    assert evidence.machine_words({"cores": 16, "cpu": "x86_64", "gpu": "H100"}) == (
        "x86_64, 16 cores, H100"
    )


def fetch_run(tmp_path: Path, monkeypatch, task: str, rows: str) -> Path:
    """A run folder of ``task`` (its progress.csv ``rows`` under the header) and fetch's
    RESULTS moved to ``tmp_path/results``."""
    run = tmp_path / "runs" / f"{task}_s0"
    run.mkdir(parents=True)
    (run / "progress.csv").write_text("epoch,env_steps,wall_time,eval_success\n" + rows)
    (run / "config.json").write_text(json.dumps({"env_id": fetch.TASKS[task]}))
    monkeypatch.setattr(fetch, "RESULTS", tmp_path / "results")
    return run


def test_a_kept_fetch_run_records_the_machine_and_a_resumed_one_its_first_commit_and_load(
    tmp_path, monkeypatch
):
    run = fetch_run(tmp_path, monkeypatch, "slide", "1,800,2.0,0.1\n2,1600,4.0,0.2\n")
    header = "epoch,env_steps,wall_time,eval_success\n"
    first = ["python", "-m", "goalenvs", "train", fetch.TASKS["slide"], "--out", str(run)]
    load = {"every_s": 60, "min": 1.0, "max": 2.0, "mean": 1.5, "samples": [[0, 1.0], [2, 2.0]]}
    fetch.record("slide", 0, run, [0.5] * 3, load, first, commit="aaa1111", floor=False)
    meta = json.loads((tmp_path / "results" / "slide_s0.json").read_text())
    assert meta["machine"] == describe_machine() and meta["env_steps_per_s"] == 400.0
    # The budget stopped it; the same command resumes it at another commit.
    with (run / "progress.csv").open("a") as f:
        f.write("3,2400,7.0,0.4\n")
    resume = ["python", "-m", "goalenvs", "train", "--resume", str(run), "--quiet"]
    later = {"every_s": 60, "min": 3.0, "max": 3.0, "mean": 3.0, "samples": [[0, 3.0]]}
    fetch.record("slide", 0, run, [2.5] * 3, later, resume, commit="bbb2222", floor=False)
    meta = json.loads((tmp_path / "results" / "slide_s0.json").read_text())
    assert meta["commit"] == "aaa1111 (resumed at bbb2222)"
    assert meta["command"] == "goalenvs train gymnasium_robotics:FetchSlide-v4 --out runs/slide_s0"
    assert meta["resumed"] == {
        "at_env_steps": 1600,
        "commit": "bbb2222",
        "command": "goalenvs train --resume runs/slide_s0 --quiet",
    }
    assert meta["load_before"] == [0.5] * 3
    assert meta["load"]["samples"] == [[0, 1.0], [2, 2.0], [4, 3.0]]
    assert (meta["load"]["min"], meta["load"]["max"], meta["load"]["mean"]) == (1.0, 3.0, 2.0)
    assert meta["env_steps_per_s"] == round(2400 / 7.0, 1)
    # Resumed once more: the first resume stays under the second, the lever with the run.
    meta["lever"] = "a lever"
    (tmp_path / "results" / "slide_s0.json").write_text(json.dumps(meta))
    with (run / "progress.csv").open("a") as f:
        f.write("4,3200,9.0,0.5\n")
    fetch.record("slide", 0, run, [2.5] * 3, later, resume, commit="ddd4444", floor=False)
    again = json.loads((tmp_path / "results" / "slide_s0.json").read_text())
    assert again["commit"] == "aaa1111 (resumed at ddd4444)"
    assert again["resumed"]["at_env_steps"] == 2400
    assert again["resumed"]["earlier"] == meta["resumed"]
    assert again["lever"] == "a lever"
    # A new run in the same place (its first epoch differs) replaces the record.
    (run / "progress.csv").write_text(header + "1,800,2.5,0.0\n2,1600,5.0,0.1\n3,2400,8,0.2\n")
    fetch.record("slide", 0, run, [0.1] * 3, None, first, commit="ccc3333", floor=False)
    meta = json.loads((tmp_path / "results" / "slide_s0.json").read_text())
    assert meta["commit"] == "ccc3333" and "resumed" not in meta


def test_a_load_log_read_from_a_file_keeps_only_the_run_s_minutes(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text("{}")
    (run / "progress.csv").write_text("epoch\n")
    start = 1_700_000_000  # whole seconds: exact through utime and stat
    os.utime(run / "config.json", (start, start))
    os.utime(run / "progress.csv", (start + 120, start + 120))
    lines = [f"{start - 60} 9.0 0 0", f"{start} 1.0 0 0", f"{start + 60} 2.5 0 0"]
    lines += [f"{start + 120} 3.0 0 0", f"{start + 180} 8.0 0 0"]
    (tmp_path / "load.log").write_text("\n".join(lines) + "\n")
    load = fetch.load_from_log(tmp_path / "load.log", run)
    assert load["samples"] == [[0, 1.0], [60, 2.5], [120, 3.0]]
    assert (load["min"], load["max"], load["mean"], load["every_s"]) == (1.0, 3.0, 2.17, 60)


def test_portable_names_a_folder_only_where_a_path_is_inside_it(tmp_path):
    run_root = tmp_path / "pick"
    record = {
        "out": str(run_root),
        "command": f"goalenvs train X --out {run_root}/s0 --preset {run_root}.toml",
        "file": str(evidence.RESULTS.parent.parent / "README.md"),
    }
    out = evidence.portable(record, {run_root: "runs"})
    assert out["out"] == "runs"
    # The preset file beside the folder keeps its own path (it used to read runs.toml).
    assert out["command"] == f"goalenvs train X --out runs/s0 --preset {run_root}.toml"
    assert out["file"] == "./README.md"


def test_a_preset_file_of_the_machine_is_named_by_its_name(tmp_path):
    preset = tmp_path / "pick.toml"
    preset.write_text("[config]\n")
    run_root = tmp_path / "pick"
    command = ["python", "-m", "goalenvs", "train", "X", "--preset", str(preset)]
    assert fetch.preset_file(command) == preset.resolve()
    assert fetch.preset_file(["goalenvs", "train", "X", "--preset", "fetch_push"]) is None
    folders = {run_root: "runs", preset.resolve().parent: "presets"}
    text = f"--out {run_root}/s0 --preset {preset}"
    assert evidence.portable(text, folders) == "--out runs/s0 --preset presets/pick.toml"


def test_fetch_runs_stop_at_the_mark_and_slide_runs_go_on_to_their_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(fetch, "epoch_env_steps", lambda env_id, extra: 20_000)
    push = fetch.train_command("push", 1, tmp_path / "push", ["--preset", "p.toml"], 700_000)
    assert push[3:5] == ["train", fetch.TASKS["push"]]
    assert push[push.index("--stop-success") + 1] == "0.9"
    assert push[push.index("--epochs") + 1] == "35"
    assert push[-2:] == ["--preset", "p.toml"]
    # FetchSlide's mark reads the last five evaluations of the run: it stops only at 1.
    slide = fetch.train_command("slide", 0, tmp_path / "slide", [], 1_000_000)
    assert slide[slide.index("--stop-success") + 1] == "1"
    assert slide[slide.index("--epochs") + 1] == "50"
    # A resume keeps its flags (config.json) but the stop, which is not kept on resume.
    (tmp_path / "slide").mkdir()
    (tmp_path / "slide" / "config.json").write_text("{}")
    resume = fetch.train_command("slide", 0, tmp_path / "slide", ["--preset", "x"], 1_000_000)
    assert resume[3:] == [
        "train", "--resume", str(tmp_path / "slide"), "--quiet", "--stop-success", "1",
        "--max-env-steps", "1000000",
    ]  # fmt: skip


def test_compute_reads_the_second_epochs_training_time_over_its_env_steps(monkeypatch):
    header = "epoch,env_steps," + ",".join(fetch.TRAINING_TIME) + ",time_eval\n"
    per_step = {"push": 2.0, "hand_reach": 3.0}  # ms per env step in the second epoch
    ran = []

    def fake_run(command, **_):
        env_id, out = command[4], Path(command[command.index("--out") + 1])
        task = next(t for t, e in fetch.TASKS.items() if e == env_id)
        ran.append(task)
        out.mkdir(parents=True)
        second = per_step[task] * 800 / 1000 / len(fetch.TRAINING_TIME)
        rows = f"1,800,{'9.0,' * 5}7.0\n2,1600,{f'{second},' * 5}7.0\n"
        (out / "progress.csv").write_text(header + rows)
        plan = {"precision": "auto", "plan": {"precision": "bf16"}}
        (out / "config.json").write_text(json.dumps(plan))
        return subprocess.CompletedProcess(command, 0, b"", b"")

    monkeypatch.setattr(fetch.subprocess, "run", fake_run)
    measured = fetch.compute(["push", "hand_reach"], rounds=2, cycles=3)
    assert ran == ["push", "hand_reach", "push", "hand_reach"]  # side by side, round by round
    assert measured["push"]["rounds"] == [2.0, 2.0] and measured["push"]["x_first"] == 1.0
    hand = measured["hand_reach"]
    assert (hand["ms_per_env_step"], hand["x_first"], hand["precision"]) == (3.0, 1.5, "bf16")


# ------------------------------------------------------------ the records on disk


def result_records() -> list[tuple[str, dict]]:
    """(file and line, record) of every record under benchmarks/results/: each .json, each
    line of a .jsonl, each .log written by ``evidence.py record``. Any other file there
    sits beside a record of the same stem (a run's progress.csv, a tried run's preset) or
    is named by a record (a preset file a run trained with)."""
    found, others = [], []
    folder_named: dict[Path, str] = {}  # a .jsonl's records may name files of their folder
    for path in sorted(evidence.RESULTS.rglob("*")):
        name = str(path.relative_to(evidence.RESULTS))
        if path.suffix == ".json":
            found.append((name, json.loads(path.read_text())))
        elif path.suffix == ".jsonl":
            lines = path.read_text().splitlines()
            found += [(f"{name}:{n}", json.loads(line)) for n, line in enumerate(lines, 1)]
            folder_named[path.parent] = folder_named.get(path.parent, "") + path.read_text()
        elif path.suffix == ".log":
            found.append((name, evidence.read_record(path)[0]))
        elif path.is_file():
            others.append((name, path))
    named = " ".join(json.dumps(record) for _, record in found)
    for name, path in others:
        runs = path.parent.glob(f"{path.stem}_s[0-9].json")
        beside = path.with_suffix(".json").is_file() or any(runs)
        in_folder = json.dumps(path.name) in folder_named.get(path.parent, "")
        assert beside or name in named or in_folder, (
            f"{name}: no record, beside none, named by none"
        )
    return found


# The records of scripts whose figures come from trained or updating networks.
TRAINED = ("average_actor", "preflight", "seed_margins", "sb3_test_her", "sb3_left_out")
TRAINED += ("crash_resume", "user_envs", "tuned_sb3/runs")


def test_every_result_record_names_its_commit_cpu_model_and_networks_precision():
    """A figure in the docs comes from a record that says which tree trained it and on
    which CPU (benchmarks/report.py draws no table from anything else). bf16 and float32
    updates differ in speed and in what they learn: a record whose figures come from
    networks names the precision they ran in, or says why it cannot (``precision_from``);
    before_after names it per part, compute per task."""
    records = result_records()
    assert len(records) > 100
    missing = [
        name
        for name, record in records
        if not record.get("commit") or not report.cpu_words(record.get("machine"))
    ]
    assert not missing, f"records without a commit or a CPU model: {missing}"
    unnamed = []
    for name, record in records:
        stem = name.split(".")[0]
        if stem in TRAINED:
            named = [record]
        elif stem == "before_after":
            named = [p for k, p in record["parts"].items() if k in ("point_reach", "training")]
        elif stem == "compute":
            named = list(record["tasks"].values())
        else:
            continue
        for item in named:
            precision = item.get("precision")
            known = precision in ("bf16", "fp32") or isinstance(precision, dict)
            if not (known or item.get("precision_from")):
                unnamed.append(name)
    assert not unnamed, f"records that name no precision: {unnamed}"


def _preset_precision(name: str) -> str:
    from goalenvs.train.presets import load_preset

    return str(load_preset(name).config.get("precision", "auto"))


def test_a_preset_tuned_before_bf16_pins_fp32():
    """parking and fetch_reach were tuned and measured in float32 (their presets' git
    history is older than the bf16 default); ``auto`` would train them otherwise on a CPU
    with bf16 instructions. point_reach pins it for its own measured reason."""
    for preset in ("parking", "fetch_reach", "point_reach"):
        assert _preset_precision(preset) == "fp32", preset


def test_a_kept_run_trained_in_the_precision_its_preset_resolves():
    """Each kept run in manipulation/ resolved the precision its preset asks for now: the
    pinned one, or bf16 from ``auto`` on a CPU with bf16 instructions."""
    from goalenvs.train.presets import preset_for

    runs = sorted((evidence.RESULTS / "manipulation").glob("*_s[0-9].json"))
    assert runs
    for path in runs:
        meta = json.loads(path.read_text())
        ran = meta["config"]["plan"]["precision"]
        pinned = _preset_precision(preset_for(meta["env_id"]))
        bf16 = meta["config"]["plan"]["machine"]["cpu_bf16"]
        assert ran == (pinned if pinned != "auto" else ("bf16" if bf16 else "fp32")), path.name
