"""Gymnasium's own ``check_env`` and warnings, folded in; and the timeout check."""

from __future__ import annotations

import re

from goalenvs.checker.context import Context
from goalenvs.checker.registry import Outcome, register

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@register("gym.check_env", "error", "gymnasium's check_env passes")
def check_gym_env(ctx: Context, out: Outcome) -> None:
    import warnings

    from gymnasium.utils.env_checker import check_env

    def run() -> list[str]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            # gymnasium recommends checking the unwrapped env; our checks cover the
            # wrapped one. Render is checked by render.modes without opening windows.
            check_env(ctx.env.unwrapped, skip_render_check=True, skip_close_check=True)
        return [_ANSI.sub("", str(w.message)) for w in caught]

    for message in ctx.call_with_limit(ctx.timeout * 10, "gymnasium check_env", run):
        ctx.gym_warnings.append(("gymnasium check_env", message))


# gymnasium warnings that describe a normal goal env (Fetch's and panda-gym's unbounded
# observation Box), reported as notes.
_BENIGN_GYM = re.compile(
    r"Box observation space (minimum|maximum) value is (-)?infinity", re.IGNORECASE
)


def _gym_messages(ctx: Context, benign: bool) -> list[tuple[str, str]]:
    seen, kept = set(), []
    for source, message in ctx.gym_warnings:
        text = _ANSI.sub("", message).strip()
        if text not in seen and bool(_BENIGN_GYM.search(text)) == benign:
            seen.add(text)
            kept.append((source, text))
    return kept


@register("gym.warnings", "warning", "gymnasium raises no warning about the env")
def check_gym_warnings(ctx: Context, out: Outcome) -> None:
    for source, text in _gym_messages(ctx, benign=False):
        out.fail(text, source)


@register("gym.notes", "info", "gymnasium's remarks that are normal for goal envs")
def check_gym_notes(ctx: Context, out: Outcome) -> None:
    for source, text in _gym_messages(ctx, benign=True):
        out.fail(
            f"{text} (normal for goal envs: Fetch and panda-gym observations are unbounded; "
            "normalize observations with running statistics, as HER trainers do)",
            source,
        )


@register(
    "api.timeout", "error", "every env call returns within the timeout", targets=("env", "vector")
)
def check_timeout(ctx: Context, out: Outcome) -> None:
    for message in ctx.timeouts:
        out.fail(message + ": the env was abandoned and the checks that need it were skipped")
