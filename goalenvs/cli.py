"""The ``goalenvs`` command: ``list``, ``check``, ``train``, ``play``, ``plot``.

Each subcommand lives in its own module, which provides ``add_arguments(parser)`` and
``run(args) -> int`` and is imported only when its subcommand runs (so ``goalenvs list``
never imports torch).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence

# name -> (module, one-line help); a module's SUMMARY, when it has one, replaces the help
# (train's names the registered algorithms).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "list": ("goalenvs.cli", "print the registered environment ids"),
    "check": ("goalenvs.checker.cli", "check a goal env against the goal-env contract"),
    "train": ("goalenvs.train.cli", "train a registered HER algorithm on a goal env"),
    "play": ("goalenvs.play", "drive an env with the keyboard, or watch a saved policy"),
    "plot": ("goalenvs.train.plot", "draw eval success across seeds"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs list`` (none)."""


def run(args: argparse.Namespace) -> int:
    """``goalenvs list``: one line per registered id."""
    from goalenvs.registration import ENTRIES

    width = max(len(entry.id) for entry in ENTRIES)
    for entry in ENTRIES:
        steps = "n_bits" if entry.max_episode_steps is None else str(entry.max_episode_steps)
        print(f"{entry.id:<{width}}  {steps:>6} steps  {entry.summary}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser, with every subcommand's arguments, or ``command``'s alone (the
    others get their one-line help: ``goalenvs check`` never imports the algorithms)."""
    # allow_abbrev=False: a prefix (--epoch, --stric) is an unknown flag with a
    # did-you-mean, never silently taken for the flag it starts
    parser = argparse.ArgumentParser(
        prog="goalenvs",
        description="Goal-conditioned envs, a goal-env checker, and HER.",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        help_text = getattr(module, "SUMMARY", help_text)
        usage = getattr(module, "USAGE", None)
        sub_parser = sub.add_parser(
            name, help=help_text, description=help_text, usage=usage, allow_abbrev=False
        )
        if command in (None, name):
            module.add_arguments(sub_parser)
        sub_parser.set_defaults(_module=module, _parser=sub_parser)
    return parser


def close_flags(flag: str, known: Sequence[str]) -> list[str]:
    """Up to three of the ``known`` flags meant by ``flag``: those whose words hold all of
    its words (``--lr`` -> ``--actor-lr``, ``--critic-lr``), else the closest spellings
    (``--epoch`` -> ``--epochs``)."""
    words = set(flag.removeprefix("--").split("-"))
    holding = [k for k in known if words <= set(k.removeprefix("--").split("-"))]
    return holding[:3] or difflib.get_close_matches(flag, known, n=3, cutoff=0.6)


def unrecognized(parser: argparse.ArgumentParser, extra: Sequence[str]) -> str:
    """The error for arguments ``parser`` does not know, with the flags meant where some
    are close (``--kwargs`` -> ``--env-kwargs``), else where to find them."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    known = [o for o in parser._option_string_actions if o.startswith("--") and o != "--help"]
    for word in extra:
        flag = word.split("=", 1)[0]
        close = close_flags(flag, known) if flag.startswith("--") else []
        if close:
            meant = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
            return f"{message}; did you mean {meant}?"
    return f"{message} ({parser.prog} --help lists them)"


def unknown_command(argv: Sequence[str]) -> str | None:
    """The error for a first word that is no subcommand, with the one meant where one is
    close (``trian`` -> ``train``); None when the first word is a subcommand or a flag."""
    if not argv or argv[0].startswith("-") or argv[0] in SUBCOMMANDS:
        return None
    close = difflib.get_close_matches(argv[0], list(SUBCOMMANDS), n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown command {argv[0]!r}: expected one of {', '.join(SUBCOMMANDS)}{hint}"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``goalenvs`` console script."""
    words = list(sys.argv[1:] if argv is None else argv)
    problem = unknown_command(words)
    if problem is not None:
        print(f"goalenvs: error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser(words[0] if words and words[0] in SUBCOMMANDS else "")
    args, extra = parser.parse_known_args(words)
    if extra:
        # One line from the subcommand's parser, "goalenvs train: error: ...", no usage.
        args._parser.exit(2, f"{args._parser.prog}: error: {unrecognized(args._parser, extra)}\n")
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
