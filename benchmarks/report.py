"""The measured figures of README.md, docs/ and the presets, drawn from benchmarks/results/.

Every table is declared as data in ``benchmarks/tables.toml``: which records (``source``),
which of them (``where``), which columns, how rows group (``group``: a sub-table per value)
or merge (``merge``: one row per value, the other columns joined). This module reads the
records and draws the tables; it holds no figure and no prose of its own. A table sits in
its doc between two markers::

    <!-- report:NAME -->
    ... (written by this script: do not edit by hand)
    <!-- /report:NAME -->

and in a preset (goalenvs/train/presets/*.toml) between ``# report:NAME`` and
``# /report:NAME`` comment lines. ``python benchmarks/report.py`` rewrites every block;
``--check`` changes nothing and exits 1, naming the files, when one differs (tests/
test_report.py runs it). A block without a declaration, a declaration without a block, a
record without a field a table needs and a filter that matches no record are errors that
name the table, the file and the field.

A record is one measured run: a JSON file in ``benchmarks/results/`` (a training run, its
``progress.csv`` beside it under the same stem), one line of a ``.jsonl`` file, or a
``.log`` written by ``benchmarks/evidence.py record``. Each holds its command, commit and
machine.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from evidence import RESULTS, read_record

from goalenvs.train.plot import mark_summary

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
PRESETS = ROOT / "goalenvs" / "train" / "presets"
TABLES = Path(__file__).resolve().parent / "tables.toml"
BLOCK = re.compile(r"(<!-- report:([\w.-]+) -->\n)(.*?)(<!-- /report:\2 -->)", re.S)
TOML_BLOCK = re.compile(r"(^# report:([\w.-]+)\n)(.*?)(^# /report:\2$)", re.S | re.M)
MARKS = (0.25, 0.4, 0.5, 0.7, 0.8, 0.9)


class ReportError(ValueError):
    """A table that cannot be drawn from its records: the message names table, file, field."""


# ------------------------------------------------------------------ records


def progress(path: Path) -> list[dict[str, float]]:
    """A run's progress.csv as rows of floats (empty cells skipped)."""
    with open(path) as f:
        return [
            {k: float(v) for k, v in row.items() if v not in ("", None)}
            for row in csv.DictReader(f)
        ]


def cpu_words(machine: Any) -> str:
    """A record's CPU model as a reader names it ('Intel(R) Xeon(R) Processor' -> 'Intel
    Xeon'); "" where it names none. Older records keep the machine as a line of text,
    'x86_64, 2 cores, AMD EPYC', the model after the cores."""
    if isinstance(machine, dict):
        cpu = str(machine.get("cpu") or "")
    elif isinstance(machine, str) and "cores," in machine:
        cpu = machine.split("cores,")[-1]
    else:
        cpu = ""
    cpu = re.sub(r"\((R|TM)\)| (Processor|CPU)\b", "", cpu).strip()
    return "" if cpu in ("x86_64", "aarch64", "arm64") else cpu


def _span(values: Sequence[float], form: str = "{:.1f}") -> str:
    """ "low-high" of ``values`` in ``form``, one value where both read the same."""
    low, high = form.format(min(values)), form.format(max(values))
    return low if low == high else f"{low}-{high}"


def run_record(path: Path) -> dict[str, Any]:
    """One training run (its JSON and the progress.csv beside it) with the figures the
    tables quote: the env steps at which its evaluation first reached each mark, its best,
    its last five evaluations, its speed, the load over it."""
    meta = json.loads(path.read_text())
    rows = progress(path.with_suffix(".csv"))
    evals = [row["eval_success"] for row in rows]
    best = max(rows, key=lambda row: row["eval_success"])
    load = meta.get("load") or {}
    loads = [load["min"], load["max"]] if load else [meta["load_before"][0], meta["load_after"][0]]
    plan = meta.get("config", {}).get("plan", {})
    record = {
        **{k: v for k, v in meta.items() if k != "config"},
        "file": str(path.relative_to(RESULTS).with_suffix("")),
        "folder": path.parent.name,
        "cpu": cpu_words(meta.get("machine")),
        "precision": plan.get("precision") or meta.get("precision"),
        "env_steps": rows[-1]["env_steps"],
        "minutes": rows[-1]["wall_time"] / 60,
        "best": best["eval_success"],
        "best_at": best["env_steps"],
        "last_five": _span(evals[-5:], "{:.2f}"),
        "load_span": _span(loads),
        "x_floor": meta.get("ratio_to_floor"),
        "diff": ", ".join(
            f"{key} {' -> '.join(str(v) for v in change.values())}"
            for key, change in meta.get("preset_diff", {}).items()
        ),
    }
    for mark in MARKS:
        hit = next((row for row in rows if row["eval_success"] >= mark), None)
        record[f"to_{mark}"] = hit["env_steps"] if hit else None
    return record


def flat(record: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``record`` with nested dicts flattened to dotted keys ({"a": {"b": 1}} -> a.b)."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, dict) and key != "machine":
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def unnest(
    record: dict[str, Any], path: Sequence[str], names: Sequence[str]
) -> list[dict[str, Any]]:
    """The rows under ``record`` at ``path`` ("*" steps into every key of a dict or item of
    a list, naming it by the next of ``names``), each beside the record's own fields."""
    rows = [(record, dict(record))]
    names = list(names)
    for step in path:
        nxt = []
        name = names.pop(0) if step == "*" and names else None
        for node, row in rows:
            if step != "*":
                nxt.append((node[step], row))
                continue
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for key, value in items:
                nxt.append((value, {**row, **({name: key} if name else {})}))
        rows = nxt
    return [{**row, **(node if isinstance(node, dict) else {"value": node})} for node, row in rows]


def records(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The records a table's ``source`` names (``rows_data``: the table's own), ``rows``
    unnested, ``defaults`` and ``set`` filled in, each with ``_file`` and ``cpu``."""
    if spec.get("kind") == "data":
        rows = spec["rows_data"]
        if isinstance(rows, str):  # the rows of the table it names
            rows = declared()[rows]["rows_data"]
        return [{**row, "_file": "benchmarks/tables.toml"} for row in rows]
    sources = spec["source"] if isinstance(spec["source"], list) else [spec["source"]]
    found: list[dict[str, Any]] = []
    for path in sorted(path for source in sources for path in RESULTS.glob(source)):
        name = str(path.relative_to(RESULTS))
        if path.suffix == ".json":
            csv_beside = path.with_suffix(".csv").exists()
            items = [run_record(path) if csv_beside else json.loads(path.read_text())]
        elif path.suffix == ".jsonl":
            items = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            info, output = read_record(path)
            items = [{**info, "output": output}]
        for item in items:
            for row in unnest(item, spec.get("rows", ()), spec.get("names", ())):
                record = {**spec.get("defaults", {}), **flat(row), "_file": name}
                record["cpu"] = cpu_words(item.get("machine"))
                load, after = item.get("load"), item.get("load_after")
                if isinstance(load, list) and load:  # the 1-minute load at start (and end)
                    ends = [load[0], after[0]] if isinstance(after, list) and after else load[:1]
                    record.setdefault("load_span", _span(ends))
                for field, rule in spec.get("set", {}).items():
                    key = str(record[rule["from"]])
                    if field not in record or key in rule.get("over", ()):
                        record[field] = rule["values"][key]
                found.append(record)
    return found


# ------------------------------------------------------------------ drawing


def value(record: dict[str, Any], expr: str, table: str) -> Any:
    """A field of ``record`` or a product / quotient of fields ("a / b", "a * b / c")."""
    tokens = expr.split()
    result = None
    for i in range(0, len(tokens), 2):
        name = tokens[i]
        if name not in record:
            raise ReportError(f"table {table}: {record['_file']} has no field {name!r}")
        term = record[name]
        if result is None:
            result = term
        elif term is None or result is None:
            result = None
        else:
            result = result * term if tokens[i - 1] == "*" else result / term
    return result


def cell(raw: Any, form: str) -> str:
    """A value in its column's format: int (thousands separated), f0-f3, min (seconds as
    minutes), x (a ratio), or as it is; None is "-"."""
    if raw is None or raw == "":
        return "-"
    if isinstance(raw, bool):
        return "yes" if raw else "no"
    if form == "count":
        return str(len(raw))
    if isinstance(raw, (list, tuple)):
        return ", ".join(cell(item, form) for item in raw)
    if form == "int":
        return f"{raw:,.0f}"
    if form in ("f0", "f1", "f2", "f3"):
        return f"{raw:,.{form[1]}f}"
    if form == "x":
        return f"{raw:.2f}x"
    if form == "ms":
        return f"{raw * 1e3:.3g}"
    if form == "us":
        return f"{raw * 1e6:.3g}"
    return str(raw)


def joined(values: list[str]) -> str:
    """Merged cells: each distinct value once, in order ("a / b")."""
    return " / ".join(dict.fromkeys(values))


def select(name: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The records of table ``name`` that pass its ``where`` (field = value, or a list of
    values); a source or a filter that matches none is an error."""
    found = records(spec)
    if not found:
        raise ReportError(f"table {name}: no record in benchmarks/results/{spec['source']}")
    for field, wanted in spec.get("where", {}).items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        for record in found:
            if field not in record:
                raise ReportError(f"table {name}: {record['_file']} has no field {field!r}")
        found = [r for r in found if r[field] in allowed]
    return found


def sort_key(record: dict[str, Any], fields: Sequence[str]) -> tuple[Any, ...]:
    """``record``'s place by ``fields``, the first one first; a record without one last."""
    return tuple(
        (record.get(f) is None, "" if record.get(f) is None else record[f]) for f in fields
    )


def draw(name: str, spec: dict[str, Any]) -> str:
    """Table ``name`` as markdown (or, for ``kind = "line"``, its template filled)."""
    try:
        chosen = select(name, spec)
    except ReportError:
        if "empty" in spec and not records(spec):
            return spec["empty"]
        raise
    if not chosen:
        if "empty" in spec:
            return spec["empty"]
        raise ReportError(f"table {name}: its filter {spec.get('where')} matches no record")
    chosen.sort(key=lambda record: sort_key(record, spec.get("sort", [])))
    if spec.get("kind") == "log":
        return log_body(chosen[0])
    if spec.get("kind") == "line":
        return fill(name, spec["template"], chosen)
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in chosen:
        groups.setdefault(
            str(value(record, spec["group"], name)) if "group" in spec else "", []
        ).append(record)
    parts = []
    for title, members in groups.items():
        parts.append(("`" + title + "`\n\n" if title else "") + grid(name, spec, members))
    return "\n\n".join(parts)


def log_body(record: dict[str, Any]) -> str:
    """A recorded command's output: its markdown tables as they are, its other lines in a
    text block, under a line naming the command, commit and CPU."""
    load = f", load {record['load_span']}" if record.get("load_span") else ""
    parts = [f"`{record['command']}` at commit {record['commit']} on {record['cpu']}{load}."]
    table: list[str] = []
    text: list[str] = []
    for line in [*record["output"].strip().splitlines(), ""]:
        if line.startswith("|"):
            if text:
                parts.append("```text\n" + "\n".join(text) + "\n```")
                text = []
            table.append(line)
        elif line.strip():
            text.append(line)
        elif table:
            parts.append("\n".join(table))
            table = []
    if text:
        parts.append("```text\n" + "\n".join(text) + "\n```")
    return "\n\n".join(parts)


def grid(name: str, spec: dict[str, Any], members: list[dict[str, Any]]) -> str:
    """One markdown table of ``members``; with ``merge`` one row per merged value, each
    column's values joined (or its aggregate: the fourth entry of the column)."""
    columns = spec["columns"]
    merge = spec.get("merge", [])
    keys = merge if isinstance(merge, list) else [merge]
    rows: dict[str, list[dict[str, Any]]] = {}
    for i, record in enumerate(members):
        key = "|".join(str(value(record, k, name)) for k in keys) if keys else str(i)
        rows.setdefault(key, []).append(record)
    lines = ["| " + " | ".join(col[0] for col in columns) + " |", "|" + "---|" * len(columns)]
    for merged in rows.values():
        cells = []
        for col in columns:
            form = col[2] if len(col) > 2 else ""
            how = col[3] if len(col) > 3 else "join"
            cells.append(AGGREGATE[how]([value(r, col[1], name) for r in merged], form))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


AGGREGATE: dict[str, Any] = {
    "join": lambda xs, f: joined([cell(x, f) for x in xs]),
    "each": lambda xs, f: " / ".join(cell(x, f) for x in xs),
    "span": lambda xs, f: _span(xs, "{:,.0f}" if f in ("", "int") else "{:.2f}"),
    "mean": lambda xs, f: cell(sum(xs) / len(xs), f),
    "min": lambda xs, f: cell(min(xs), f),
    # over the records that hold a value ("-" where none does)
    "median": lambda xs, f: cell(
        statistics.median(ys) if (ys := [x for x in xs if x is not None]) else None, f
    ),
    # the seeds' median and IQR of first env steps to a mark, as `goalenvs plot` prints them
    "seeds": lambda xs, f: mark_summary([x for x in xs if x is not None]).removeprefix(": "),
    # the same after how many of the seeds reached it, as `goalenvs plot` prints it
    "reached": lambda xs, f: (
        f"{sum(x is not None for x in xs)} of {len(xs)} reached"
        + mark_summary([x for x in xs if x is not None])
    ),
}


def fill(name: str, template: str, chosen: list[dict[str, Any]]) -> str:
    """``template`` with each ``{expr|aggregate|format}`` taken over the chosen records."""

    def one(match: re.Match[str]) -> str:
        parts = match.group(1).split("|")
        expr, how, form = parts[0], (parts[1:2] or ["join"])[0], (parts[2:3] or [""])[0]
        return AGGREGATE[how]([value(r, expr, name) for r in chosen], form)

    return re.sub(r"\{([^{}]+)\}", one, template)


# ------------------------------------------------------------------ the files


def declared() -> dict[str, dict[str, Any]]:
    """The tables of benchmarks/tables.toml by name."""
    return tomllib.loads(TABLES.read_text())["table"]


def render(text: str, tables: dict[str, dict[str, Any]], found: set[str], toml: bool) -> str:
    """``text`` with every marked block redrawn; the names met are added to ``found``."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in tables:
            raise ReportError(f"report:{name} is declared nowhere in benchmarks/tables.toml")
        found.add(name)
        body = draw(name, tables[name]).rstrip()
        if toml:
            body = "\n".join(
                line if line.startswith(("[", "#")) or "=" in line else f"# {line}"
                for line in body.splitlines()
            )
        return f"{match.group(1)}{body}\n{match.group(4)}"

    return (TOML_BLOCK if toml else BLOCK).sub(replace, text)


def main(argv: Sequence[str] | None = None) -> int:
    """Rewrites the blocks of README, docs and presets, or with --check names the files
    whose blocks differ (exit 1)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on a diff")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    parser.add_argument("--readme", type=Path, default=README, help="README.md")
    parser.add_argument("--presets", type=Path, default=PRESETS, help="the presets folder")
    args = parser.parse_args(argv)
    tables = declared()
    found: set[str] = set()
    stale = []
    targets = [(args.readme, False), *((p, False) for p in sorted(args.docs.glob("*.md")))]
    targets += [(path, True) for path in sorted(args.presets.glob("*.toml"))]
    try:
        for path, toml in targets:
            text = path.read_text()
            new = render(text, tables, found, toml)
            if new != text:
                stale.append(path.name)
                if not args.check:
                    path.write_text(new)
    except ReportError as error:
        print(f"report: {error}")
        return 1
    missing = sorted(set(tables) - found)
    if missing:
        print(f"tables with no block in README, docs or presets: {', '.join(missing)}")
        return 1
    if stale and args.check:
        print(f"out of date (run python benchmarks/report.py): {', '.join(stale)}")
        return 1
    print("rewritten: " + (", ".join(stale) if stale else "nothing (up to date)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
