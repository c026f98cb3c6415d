"""The checker's result: one entry per check run, its findings, and the renderings."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any

from goalenvs.checker.fixes import DOCS_URL, FIXES

SEVERITIES = ("error", "warning", "info")

# Findings shown per check in the table; JSON keeps every one.
_SHOWN_FINDINGS = 3
_STYLES = {"error": "bold red", "warning": "yellow", "info": "cyan"}
_MARKS = {"error": "FAIL", "warning": "WARN", "info": "NOTE"}  # a failed check's mark


@dataclass(frozen=True)
class Finding:
    """One piece of evidence that a check failed, ``where`` it shows; ``cause`` the env's
    exception behind it when other checks may share it."""

    check_id: str
    severity: str
    title: str
    message: str
    where: str | None = None
    cause: str | None = None

    def __str__(self) -> str:
        place = f" [{self.where}]" if self.where else ""
        return f"{self.severity.upper()} {self.check_id}{place}: {self.message}"


@dataclass
class CheckResult:
    """What happened to one check: ``passed``, ``failed`` or ``skipped`` (with a note)."""

    id: str
    severity: str
    title: str
    status: str = "passed"
    findings: list[Finding] = field(default_factory=list)
    note: str | None = None
    seconds: float = 0.0

    @property
    def fix(self) -> str | None:
        """The line that fixes what this check finds (docs/checks.md's *Fix.*)."""
        return FIXES.get(self.id)

    @property
    def docs(self) -> str:
        """Where this check is explained: ``docs/checks.md#<id>``."""
        return f"{DOCS_URL}#{self.id}"


@dataclass
class Cause:
    """One exception of the env's that several checks' findings come from."""

    cause: str
    checks: list[str]
    first: Finding


@dataclass
class Report:
    """The outcome of :func:`goalenvs.checker.check_goal_env`; ``ok`` when no error."""

    env_name: str
    results: list[CheckResult]
    cpu_seconds: float
    wall_seconds: float
    settings: dict[str, object] = field(default_factory=dict)
    # what the goal-seeking probe did (GoalProbe.summary()), when a check ran it
    probe: dict[str, Any] | None = None
    # what the checks measured about the env (``episode_length``: an undeclared length)
    facts: dict[str, Any] = field(default_factory=dict)

    def _findings(self, severity: str) -> list[Finding]:
        return [f for r in self.results if r.severity == severity for f in r.findings]

    @property
    def errors(self) -> list[Finding]:
        """Findings of failed error-severity checks."""
        return self._findings("error")

    @property
    def warnings(self) -> list[Finding]:
        """Findings of failed warning-severity checks."""
        return self._findings("warning")

    @property
    def infos(self) -> list[Finding]:
        """Notes of info-severity checks (settings a HER setup needs for this env)."""
        return self._findings("info")

    @property
    def ok(self) -> bool:
        """True when no error-severity check failed."""
        return not self.errors

    def failed_ids(self, severity: str | None = None) -> set[str]:
        """Ids of the checks that failed, optionally only those of one severity."""
        return {
            r.id
            for r in self.results
            if r.status == "failed" and (severity is None or r.severity == severity)
        }

    def result(self, check_id: str) -> CheckResult:
        """The result of one check, by id."""
        for r in self.results:
            if r.id == check_id:
                return r
        raise KeyError(f"check_id={check_id!r} was not run; ran {[r.id for r in self.results]}")

    def causes(self) -> list[Cause]:
        """The env exceptions that reached two checks or more, each with those checks."""
        found: dict[str, Cause] = {}
        for r in self.results:
            for f in r.findings:
                if f.cause is None:
                    continue
                entry = found.setdefault(f.cause, Cause(f.cause, [], f))
                if r.id not in entry.checks:
                    entry.checks.append(r.id)
        return [c for c in found.values() if len(c.checks) > 1]

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict: summary counts, every check with its findings, its fix and
        docs anchor, the causes that several checks share, and what the goal probe did."""
        return {
            "env": self.env_name,
            "ok": self.ok,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "infos": len(self.infos),
            "failed_checks": self.failed_counts(),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "wall_seconds": round(self.wall_seconds, 3),
            "settings": self.settings,
            "probe": self.probe,
            "facts": self.facts,
            "causes": [
                {"cause": c.cause, "checks": c.checks, "first": c.first.message}
                for c in self.causes()
            ],
            "checks": [
                {
                    "id": r.id,
                    "severity": r.severity,
                    "title": r.title,
                    "status": r.status,
                    "note": r.note,
                    "seconds": round(r.seconds, 4),
                    "fix": r.fix,
                    "docs": r.docs,
                    "findings": [
                        {"message": f.message, "where": f.where, "cause": f.cause}
                        for f in r.findings
                    ],
                }
                for r in self.results
            ],
        }

    def to_json(self, indent: int | None = 2) -> str:
        """The report as a JSON string (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)

    def failed_counts(self) -> dict[str, int]:
        """How many checks failed, by severity (``info``: the checks that left a note)."""
        counts = dict.fromkeys(SEVERITIES, 0)
        for r in self.results:
            if r.status == "failed":
                counts[r.severity] += 1
        return counts

    def summary(self) -> str:
        """The footer line: checks by outcome (passed, failed by severity and skipped add
        up to the checks run), the findings they made, CPU and wall time."""
        passed = sum(1 for r in self.results if r.status == "passed")
        skipped = sum(1 for r in self.results if r.status == "skipped")
        failed = self.failed_counts()
        findings = sum(len(r.findings) for r in self.results if r.status == "failed")
        return (
            f"{self.env_name}: {len(self.results)} checks, {passed} passed, "
            f"{failed['error']} error(s), {failed['warning']} warning(s), "
            f"{failed['info']} note(s), {skipped} skipped ({findings} finding(s)); "
            f"CPU {self.cpu_seconds:.2f} s, wall {self.wall_seconds:.2f} s"
        )

    def probe_line(self) -> str | None:
        """One line on what the goal-seeking probe did, or None when no check ran it."""
        p = self.probe
        if not p:
            return None
        closest = (
            "no step measured"
            if p["closest_distance"] is None
            else f"{p['closest_distance']:.4g} at the closest"
        )
        start = "?" if p["start_distance"] is None else f"{p['start_distance']:.4g}"
        how = p["method"] + (f" (not copied: {p['not_copied']})" if p["not_copied"] else "")
        line = (
            f"goal probe: {p['steps']} steps in {p['episodes']} episode(s) by {how}; "
            f"achieved_goal {start} from desired_goal at reset, {closest}; "
            f"{p['successes']} success(es), {p['terminations']} termination(s)"
        )
        return line + (f"; {p['stopped_early']}" if p["stopped_early"] else "")

    def render(self, console: Any = None, verbose: bool = False) -> None:
        """Prints the report: the failed checks (every check when ``verbose``), shared
        causes, findings with fix and docs, the goal probe and the summary; the short form
        for an env that is not a goal Dict."""
        from rich.console import Console
        from rich.text import Text

        console = console or Console()
        skipped = [r for r in self.results if r.status == "skipped"]
        root = next((r for r in self.results if r.id == "space.dict"), None)
        if not verbose and root is not None and root.status == "failed":
            self._render_not_goal_env(console, root, len(skipped))
            return
        order = {"failed": 0, "skipped": 1, "passed": 2}
        shown = [r for r in self.results if verbose or r.status == "failed"]
        shown.sort(key=lambda r: (order[r.status], SEVERITIES.index(r.severity)))
        if shown:
            console.print(self._table(shown))
        causes = self.causes()
        for c in causes:
            console.print(Text(f"cause: {c.cause}", style="bold red"), soft_wrap=True)
            console.print(Text(f"  reached {len(c.checks)} checks: {', '.join(c.checks)}"))
            place = f"[{c.first.where}] " if c.first.where else ""
            console.print(Text(f"  first: {place}{c.first.message}"), soft_wrap=True)
        grouped = {c.cause for c in causes}
        for r in shown:
            if r.status == "failed":
                self._render_findings(console, r, grouped, verbose)
        line = self.probe_line()
        if line:
            console.print(Text(line, style="dim"), soft_wrap=True)
        if skipped and not verbose:
            console.print(
                Text(f"{len(skipped)} skipped check(s) not listed: --verbose lists them", "dim")
            )
        console.print(Text(self.summary(), style="bold"), soft_wrap=True)

    def _render_not_goal_env(self, console: Any, root: CheckResult, skipped: int) -> None:
        from rich.text import Text

        console.print(
            Text(
                f"{self.env_name} is not a goal env: its observation space is not a Dict of "
                f"observation, achieved_goal and desired_goal, which the goal checks read "
                f"({skipped} skipped)",
                style="bold red",
            ),
            soft_wrap=True,
        )
        self._render_findings(console, root, set(), verbose=False)
        others = [r for r in self.results if r.status == "failed" and r is not root]
        if others:
            ids = ", ".join(f"{r.id} ({r.severity})" for r in others)
            console.print(
                Text(f"also failed: {ids}; --verbose shows every check", style="dim"),
                soft_wrap=True,
            )
        console.print(Text(self.summary(), style="bold"), soft_wrap=True)

    def _table(self, shown: list[CheckResult]) -> object:
        from rich.table import Table
        from rich.text import Text

        table = Table(title=f"goalenvs check: {self.env_name}")
        for name in ("", "check", "severity", "title"):
            table.add_column(name, no_wrap=name != "title")
        for r in shown:
            severity = Text(r.severity, style=_STYLES[r.severity])
            if r.status == "failed":
                mark = Text(_MARKS[r.severity], style=_STYLES[r.severity])
                title = Text(f"{r.title} ({len(r.findings)} finding(s))")
            elif r.status == "skipped":
                mark, title = Text("skip", style="dim"), Text(f"{r.title}\n{r.note}", style="dim")
                severity = Text("skipped", style="dim")
            else:
                mark, title = Text("ok", style="green"), Text(r.title)
            table.add_row(mark, r.id, severity, title)
        return table

    @staticmethod
    def _render_findings(console: Any, r: CheckResult, grouped: set[str], verbose: bool) -> None:
        from rich.text import Text

        console.print(Text(f"{r.id} ({r.severity}): {r.title}", style=_STYLES[r.severity]))
        own = [f for f in r.findings if f.cause not in grouped]
        for i, f in enumerate(own):
            if i == _SHOWN_FINDINGS and not verbose:
                console.print(Text(f"  ... {len(own) - i} more (--verbose or --json)"))
                break
            place = f"[{f.where}] " if f.where else ""
            console.print(Text(f"  - {place}{f.message}"), soft_wrap=True)
        shared = sorted({f.cause for f in r.findings if f.cause in grouped})
        for cause in shared:
            console.print(Text(f"  - from the cause above: {cause}"), soft_wrap=True)
        if r.fix:
            console.print(Text(f"  fix: {r.fix}", style="green"), soft_wrap=True)
        console.print(Text(f"  docs: {r.docs}", style="dim"))

    def __str__(self) -> str:
        from rich.console import Console

        buffer = io.StringIO()
        self.render(Console(file=buffer, width=140, color_system=None))
        return buffer.getvalue()
