"""The checks ``goalenvs train`` runs before its first env step: registered checks of
``goalenvs check`` (same ids and wording). An error stops the run in one line; a warning
is one line of note (an undeclared episode length is measured and taken)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import gymnasium as gym

from goalenvs.checker.report import Finding, Report
from goalenvs.checker.runner import check_goal_env

# The cheap contract checks (no render, no goal probe), in the order a user would fix them.
PREFLIGHT_CHECKS = (
    "api.reset", "api.step", "space.dict", "space.goal_match", "reward.present",
    "reward.signature", "reward.shape", "reward.batch", "terminated.batch", "truncated.batch",
    "success.present", "success.bool", "episode.ends", "episode.length",
    "episode.length_declared", "compat.goalenvs_her",
)  # fmt: skip
# As the checker's default rollout: an episode this long without truncation never ends.
PREFLIGHT_STEPS = 200


@dataclass(frozen=True)
class Preflight:
    """What the pre-training checks found, and what the trainer takes from them."""

    report: Report
    seconds: float
    # the length the env truncates its episodes at without declaring it, if measured
    episode_length: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing the trainer cannot survive was found."""
        return self.report.ok

    def error_line(self, env_name: str) -> str:
        """The first error as one line: its check id, the finding, the fix and where to
        see the rest (``goalenvs check ENV``)."""
        first = self.report.errors[0]
        more = len(self.report.failed_ids("error")) - 1
        others = f" ({more} more error{'s' if more != 1 else ''})" if more > 0 else ""
        finding = describe(first, self.report).rstrip(".")
        return (
            f"{env_name} failed the pre-training check {finding}{others}. Run "
            f"`goalenvs check {env_name}` for the whole report"
        )


def describe(finding: Finding, report: Report) -> str:
    """``id: message [where]; fix: ...`` of one finding, as ``goalenvs check`` words it."""
    fix = report.result(finding.check_id).fix
    place = f" [{finding.where}]" if finding.where else ""
    text = f"{finding.check_id}{place}: {finding.message}"
    return f"{text}; fix: {fix}" if fix else text


def preflight(
    env: gym.Env, seed: int = 0, timeout: float = 30.0, needs_length: bool = True
) -> Preflight:
    """Runs :data:`PREFLIGHT_CHECKS` on ``env`` (``episode.length`` only when
    ``needs_length``): whether the trainer can go on, its notes, the measured length."""
    start = time.perf_counter()
    checks = [c for c in PREFLIGHT_CHECKS if needs_length or c != "episode.length"]
    report = check_goal_env(env, steps=PREFLIGHT_STEPS, seed=seed, timeout=timeout, checks=checks)
    length = report.facts.get("episode_length")
    # a measured episode length is the trainer's own note (it says what it takes)
    notes = [
        describe(f, report)
        for f in report.warnings
        if not (length is not None and f.check_id == "episode.length_declared")
    ]
    return Preflight(report, time.perf_counter() - start, length, notes)
