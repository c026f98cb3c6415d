"""The check registry: the check modules register into :data:`CHECKS` on import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from goalenvs.checker.report import SEVERITIES, CheckResult, Finding

if TYPE_CHECKING:
    from goalenvs.checker.context import Context

# At most this many findings are kept per check; the rest are counted.
MAX_FINDINGS = 20

# What a check applies to: "env", a single gymnasium.Env; "vector", a
# gymnasium.vector.VectorEnv (numpy, or torch on a device).
TARGETS = ("env", "vector")


@dataclass(frozen=True)
class Check:
    """A registered check: stable id, severity, one-line title, the function and the
    kinds of env it applies to (:data:`TARGETS`)."""

    id: str
    severity: str
    title: str
    func: Callable[[Context, Outcome], None]
    targets: tuple[str, ...] = ("env",)


CHECKS: dict[str, Check] = {}


def register(
    check_id: str, severity: str, title: str, targets: tuple[str, ...] | None = None
) -> Callable:
    """Decorator that registers ``func(ctx, out)`` as check ``check_id``; ``targets`` says
    whether it checks single envs, vector envs or both (default: vector envs for the
    ``vector.*`` ids, single envs for the others)."""
    if targets is None:
        targets = ("vector",) if check_id.startswith("vector.") else ("env",)
    if severity not in SEVERITIES:
        raise ValueError(f"severity={severity!r} is not valid; expected one of {SEVERITIES}")
    if not targets or any(t not in TARGETS for t in targets):
        raise ValueError(f"targets={targets!r} is not valid; expected a tuple from {TARGETS}")

    def decorate(func: Callable[[Context, Outcome], None]) -> Callable:
        if check_id in CHECKS:
            raise ValueError(f"check id {check_id!r} is registered twice")
        CHECKS[check_id] = Check(check_id, severity, title, func, tuple(targets))
        return func

    return decorate


class Outcome:
    """What a running check writes to: its findings."""

    def __init__(self, result: CheckResult) -> None:
        self._result = result
        self._dropped = 0
        self._kinds: set[object] = set()

    def fail(self, message: str, where: str | None = None, cause: str | None = None) -> None:
        """Records one finding with its evidence; ``cause`` names an exception of the
        env's that other checks may share (the report groups them)."""
        r = self._result
        if len(r.findings) < MAX_FINDINGS:
            r.findings.append(Finding(r.id, r.severity, r.title, message, where, cause))
        else:
            self._dropped += 1

    def fail_once(self, kind: object, message: str, where: str | None = None) -> None:
        """:meth:`fail`, for the first finding of its ``kind`` only (a defect seen at
        every step is reported where it first shows)."""
        if kind not in self._kinds:
            self._kinds.add(kind)
            self.fail(message, where)

    @property
    def failed(self) -> bool:
        """Whether this check has recorded a finding."""
        return bool(self._result.findings)

    def finish(self) -> None:
        """Adds the count of findings beyond :data:`MAX_FINDINGS`."""
        if self._dropped:
            r = self._result
            r.findings.append(
                Finding(r.id, r.severity, r.title, f"... and {self._dropped} more like these")
            )
