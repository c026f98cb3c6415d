"""``goalenvs check SPEC``: check a goal env and print the report.

Exit status: 0 no error (warnings allowed unless ``--strict``), 1 an error, 2 the env
could not be built or an argument is wrong; ``--fingerprint`` adds
:data:`FINGERPRINT_CHANGED` when the env moved away from its file."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
from collections.abc import Callable
from typing import Any

from goalenvs.core import parse_json_object
from goalenvs.core.io import stdout_to_stderr

# Added to the exit status when the env moved away from its --fingerprint file.
FINGERPRINT_CHANGED = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``goalenvs check``."""
    parser.add_argument(
        "spec",
        metavar="SPEC",
        help="the goal env: a registered id (goalenvs/PointReach-v0), module:EnvId "
        "(highway_env:parking-v0), module:ClassOrFactory or path/to/file.py:ClassOrFactory",
    )
    parser.add_argument(
        "--env-kwargs",
        "--kwargs",  # the name before train and play shared --env-kwargs, kept
        dest="kwargs",
        default="{}",
        metavar="JSON",
        help="env constructor arguments as a JSON object, e.g. '{\"size\": 5}'",
    )
    parser.add_argument(
        "--max-episode-steps",
        type=int,
        metavar="N",
        help="end every episode after N steps (gymnasium's TimeLimit), as train and play "
        "take it; default: the env's own",
    )
    parser.add_argument(
        "--steps", type=int, default=200, help="steps of the main rollout (default: %(default)s)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of every rollout and draw (default: %(default)s)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as JSON, alone on stdout (what the env prints goes to stderr)",
    )
    parser.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds one env call may take, in wall and CPU time (or 5x that in wall time "
        "alone), before it is reported and the env abandoned (default: %(default)s)",
    )
    parser.add_argument("--verbose", action="store_true", help="list passed and skipped checks too")
    parser.add_argument(
        "--fingerprint",
        metavar="FILE",
        help="also compare seeded rollouts of the env with FILE (written when missing); "
        f"exit status +{FINGERPRINT_CHANGED} when they moved",
    )
    vector = parser.add_argument_group(
        "vector envs",
        "check a batched env (gymnasium.vector.VectorEnv); a SPEC that builds one is "
        "detected without these",
    )
    vector.add_argument(
        "--num-envs",
        type=int,
        default=None,
        metavar="N",
        help="check gym.make_vec(SPEC, num_envs=N) (or the factory called with num_envs=N)",
    )
    vector.add_argument(
        "--vectorization-mode",
        choices=("vector_entry_point", "sync", "async"),
        default=None,
        help="how gym.make_vec builds it (default: the id's vector entry point, else sync)",
    )
    vector.add_argument(
        "--device",
        default=None,
        help="device of a torch vector env (passed as device=), e.g. cpu or cuda",
    )
    vector.add_argument(
        "--single",
        default=None,
        metavar="SPEC",
        help="the single env the vector env must equal under SyncVectorEnv (default: the "
        "id's own entry point, when it has both)",
    )


def run(args: argparse.Namespace) -> int:
    """Loads the env, runs every check, prints the report; returns the exit status."""
    from goalenvs.checker import LoadError, check_goal_env, load, load_vector
    from goalenvs.checker.fingerprint import FingerprintError

    try:
        kwargs = parse_json_object("--env-kwargs", args.kwargs)
    except ValueError as error:
        print(f"goalenvs check: {error}", file=sys.stderr)
        return 2
    limits = (
        ("--steps", args.steps, 1),
        ("--seed", args.seed, 0),
        ("--max-episode-steps", args.max_episode_steps, 1),
    )
    for name, value, minimum in limits:
        if value is not None and value < minimum:
            print(f"goalenvs check: {name} must be >= {minimum}, got {value}", file=sys.stderr)
            return 2
    if not args.timeout > 0:
        print(f"goalenvs check: --timeout must be > 0, got {args.timeout}", file=sys.stderr)
        return 2
    vector_options: dict[str, Any] = {
        "num_envs": getattr(args, "num_envs", None),
        "device": getattr(args, "device", None),
        "vectorization_mode": getattr(args, "vectorization_mode", None),
        "single": getattr(args, "single", None),
    }
    single = None
    # With --json, stdout carries the JSON alone: what the env prints while it is built
    # and run (pybullet's banner comes from C) goes to stderr.
    quiet = stdout_to_stderr() if args.json else contextlib.nullcontext()
    with quiet:
        try:
            if any(value is not None for value in vector_options.values()):
                build_vector = functools.partial(load_vector, args.spec, kwargs, **vector_options)
                loaded = _load_with_timeout(build_vector, args.timeout)
                env, factory, name, single = loaded.env, loaded.factory, loaded.name, loaded.single
                for note in loaded.notes:
                    print(f"goalenvs check: {note}", file=sys.stderr)
            else:
                build = functools.partial(load, args.spec, kwargs, args.max_episode_steps)
                env, factory, name = _load_with_timeout(build, args.timeout)
        except LoadError as error:
            print(f"goalenvs check: cannot load {args.spec}: {error}", file=sys.stderr)
            return 2
        verdict = None
        if getattr(args, "fingerprint", None) is not None:
            # Taken before the checks, on an env of its own: what the checks do to the
            # process (pybullet's, numpy's global state) cannot move it.
            try:
                verdict = _fingerprint(args, env, factory, kwargs)
            except FingerprintError as error:  # a file that is not one of this env
                print(f"goalenvs check: {error}", file=sys.stderr)
                return 2
        report = check_goal_env(
            env,
            steps=args.steps,
            seed=args.seed,
            timeout=args.timeout,
            factory=factory,
            env_name=name,
            single=single,
        )
    if args.json:
        data = report.to_dict()
        if verdict is not None:
            data["fingerprint"] = verdict.to_dict()
        print(json.dumps(data, indent=2))
    else:
        report.render(verbose=args.verbose)
        if verdict is not None:
            print(verdict.message)
    status = 1 if report.errors or (args.strict and report.warnings) else 0
    if verdict is not None and verdict.status == "error":  # the env raised or hung
        return 1
    return status + FINGERPRINT_CHANGED if verdict is not None and verdict.changed else status


def _fingerprint(
    args: argparse.Namespace, env: Any, factory: Callable[..., Any], kwargs: dict[str, Any]
) -> Any:
    """The verdict of ``--fingerprint`` on an env built by ``factory``; a file of another
    env raises ``FingerprintError``, an env that raises or hangs gets the verdict ``error``."""
    from goalenvs import envspec
    from goalenvs.checker import LoadError, fingerprint

    path = args.fingerprint
    env_id = fingerprint.env_id(env, path)

    def take() -> Any:
        own = factory()
        try:
            return fingerprint.check(
                own, env_id, path, env_kwargs=kwargs, max_episode_steps=args.max_episode_steps
            )
        finally:
            own.close()

    # --timeout bounds each env call; the fingerprint makes this many at most
    limit = args.timeout * (
        len(fingerprint.SEEDS) * (fingerprint.STEPS + fingerprint.PATH_POINTS + 1) + 1
    )
    try:
        return _load_with_timeout(
            take, limit, f"taking the fingerprint did not return within {limit:g} s"
        )
    except fingerprint.FingerprintError:
        raise
    except Exception as error:
        cause = str(error) if isinstance(error, LoadError) else envspec.describe_error(error)
        return fingerprint.Verdict(path, "error", f"fingerprint not taken ({path}): {cause}")


def _load_with_timeout(build: Callable[[], Any], timeout: float, late: str = "") -> Any:
    """``build()`` (the loader with its arguments) on a daemon thread, timed out as an env
    call is: a constructor that hangs is a load error (``late``, when given, is its message)."""
    from goalenvs.checker import LoadError
    from goalenvs.checker.context import EnvTimeoutError, Worker

    worker = Worker()
    try:
        return worker.run(build, (), {}, timeout)
    except EnvTimeoutError:
        raise LoadError(
            late or f"building the env did not return within --timeout {timeout:g} s"
        ) from None
    finally:
        worker.close()
