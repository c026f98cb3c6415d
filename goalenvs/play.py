"""Placeholder until this subcommand lands; its owner replaces this module."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No arguments yet."""


def run(args: argparse.Namespace) -> int:
    """Not available yet."""
    print("this subcommand is not available yet")
    return 2
