"""The run folder and resume: what a training run writes, and how it continues.

``Trainer`` is a :class:`RunFolder`: this half of it writes the folder (config.json,
progress.csv, checkpoints/epoch_N units committed by their manifest, the policies, the
curves, TensorBoard) and reads a committed epoch back for ``resume``. It reads the
trainer's state: ``config``, ``agent``, ``buffer``, ``envs``, ``collector``, the counters
(``epoch``, ``env_steps``, ``updates``, ``wall_time``, ``best_*``) and the worker's
``rank``/``world``/``main``; the module docstring of :mod:`goalenvs.train.trainer`
describes the folder.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import goalenvs
from goalenvs.agents import distributed
from goalenvs.agents.config import TrainConfig
from goalenvs.core import GOAL_KEYS
from goalenvs.core.io import atomic_write, atomic_write_file
from goalenvs.train.checkpoint import (
    STATE_FORMAT,
    CheckpointError,
    atomic_copy,
    atomic_write_text,
    commit_unit,
    error_summary,
    generator_states,
    load_torch_file,
    read_checkpoint,
    read_manifest,
    remove_debris,
    restore_generators,
    save_checkpoint,
    space_to_dict,
    unit_dir,
    unit_epochs,
)
from goalenvs.train.collectors import Collector
from goalenvs.train.display import loss_names
from goalenvs.train.timing import TIME_COLUMNS

KEEP_UNITS = 2  # committed epochs kept in checkpoints/: the newest and one to fall back on
# What resuming found (dropped rows, damaged units, a fresh buffer); the trainer logs here too.
logger = logging.getLogger(__name__)


class RunFolder:
    """The run-folder half of :class:`~goalenvs.train.trainer.Trainer` (see the module
    docstring)."""

    # The trainer's state this half reads and writes (all set in Trainer.__init__).
    config: TrainConfig
    agent: Any
    buffer: Any
    envs: Any
    collector: Collector
    compute_reward: Callable
    compute_terminated: Callable | None
    observation_space: Any
    action_space: Any
    gamma: float
    device: torch.device
    rank: int
    world: int
    main: bool
    run_dir: Path
    epoch: int
    env_steps: int
    updates: int
    wall_time: float
    best_success: float
    best_return: float
    best_epoch: int
    resumed_success: float
    progress_rows: list[list[str]]
    history: list[dict[str, Any]]
    writer: Any
    _plotter: threading.Thread | None
    _resumed_envs: dict[str, Any] | None

    def metadata(self, success: float) -> dict[str, Any]:
        """Plain metadata stored in every checkpoint."""
        cfg = self.config
        return {
            "env_id": cfg.env_id,
            "env_kwargs": cfg.env_kwargs,
            "algo": cfg.algo,
            "hidden_sizes": list(cfg.hidden_sizes),
            "gamma": self.gamma,
            "observation_space": {k: space_to_dict(self.observation_space[k]) for k in GOAL_KEYS},
            "action_space": space_to_dict(self.action_space),
            "config": cfg.to_dict(),
            "epoch": self.epoch,
            "env_steps": self.env_steps,
            "updates": self.updates,
            "wall_time": self.wall_time,
            "success_rate": success,
            "best_success_rate": self.best_success,
            "best_return": self.best_return,
            "goalenvs_version": goalenvs.__version__,
            "torch_version": str(torch.__version__),
        }

    def save(self, name: str | Path, success: float, training: bool) -> Path:
        """Writes one checkpoint of the run (main worker only); ``name`` is relative to the
        run folder."""
        return save_checkpoint(
            self.run_dir / name,
            self.metadata(success),
            self.agent.policy_modules(),
            self.agent.training_modules() if training else None,
        )

    def random_state(self) -> dict[str, Any]:
        """This worker's random generator states (plain values and tensors)."""
        envs = self.envs
        snapshot = getattr(envs, "snapshot", None)
        return {
            "format": STATE_FORMAT,
            "version": 1,
            "epoch": self.epoch,
            "rank": self.rank,
            "world_size": self.world,
            "torch": torch.get_rng_state(),
            "cuda": list(torch.cuda.get_rng_state_all()) if torch.cuda.is_available() else [],
            "agent": generator_states(self.agent),
            # The torch generators of the device path (exploration, buffer sampling).
            "torch_generators": {
                "agent": torch_generator_states(self.agent),
                "buffer": torch_generator_states(self.buffer),
            },
            "buffer": generator_states(self.buffer),
            # Before the epoch's last step (see _GeneratorSnapshot): a sub-env that reset
            # in that step draws the same episode again when the resume resets it.
            "envs": snapshot() if snapshot is not None else env_generator_states(envs.unwrapped),
        }

    def save_epoch(self, row: dict[str, Any], success: float) -> None:
        """Commits the finished epoch as one unit, then updates the files derived from it.

        Order: every worker writes its part of ``checkpoints/epoch_N`` (policy and training
        state from worker 0, random state and buffer from each), progress.csv gets the
        row, and worker 0 writes the manifest, which commits the epoch. Only then are
        policy_latest.pt, policy_best.pt and policy_epoch_K.pt updated and older units
        removed. A kill before the manifest leaves epoch N-1 as the last committed one.
        """
        cfg = self.config
        unit = unit_dir(self.run_dir, self.epoch)
        best = (success, row["eval_return"]) > (self.best_success, self.best_return)
        if best:
            self.best_success, self.best_return = success, row["eval_return"]
            self.best_epoch = self.epoch
        self.progress_rows.append([_csv_value(row[c]) for c in self.columns()])
        if self.main:
            if unit.exists():  # left by a run that was resumed from an earlier epoch
                shutil.rmtree(unit)
            unit.mkdir(parents=True)
        self._barrier()
        if self.main:
            self.save(unit.relative_to(self.run_dir) / "policy.pt", success, training=True)
        state = self.random_state()
        atomic_write(unit / f"state_rank{self.rank}.pt", lambda f: torch.save(state, f))
        if cfg.save_buffer:
            # The live buffer is saved as it is (episodes in progress included): the
            # resume closes them, since the envs restart there.
            atomic_write_file(unit / self._buffer_file(), self.buffer.save)
        self._barrier()
        if not self.main:
            return
        self.write_progress()
        commit_unit(
            unit,
            self.epoch,
            {
                "world_size": self.world,
                "env_steps": self.env_steps,
                "best_epoch": self.best_epoch,
                "save_buffer": bool(cfg.save_buffer),
            },
        )
        atomic_copy(unit / "policy.pt", self.run_dir / "policy_latest.pt")
        if best:
            self.save("policy_best.pt", success, training=False)
        if cfg.save_every and self.epoch % cfg.save_every == 0:
            self.save(f"policy_epoch_{self.epoch}.pt", success, training=False)
        for epoch in unit_epochs(self.run_dir)[KEEP_UNITS:]:
            shutil.rmtree(unit_dir(self.run_dir, epoch), ignore_errors=True)

    def write_progress(self) -> None:
        """Rewrites progress.csv atomically with the header and every epoch's row so far."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(self.columns())
        writer.writerows(self.progress_rows)
        atomic_write_text(self.run_dir / "progress.csv", text.getvalue())

    def start_run_dir(self) -> None:
        """Creates the run folder (or reopens it to resume) and restores a resumed state."""
        cfg = self.config
        self.progress_rows = []
        self.best_epoch = 0
        self._resumed_envs = None
        if not isinstance(self.envs, _GeneratorSnapshot):
            self.envs = _GeneratorSnapshot(self.envs)
        if cfg.resume:
            self.restore(Path(cfg.resume))
        elif self.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if (self.run_dir / "policy_latest.pt").exists() or unit_epochs(self.run_dir):
                raise ValueError(
                    f"out={str(self.run_dir)!r} already holds a run; pass "
                    f"resume={str(self.run_dir)!r} to continue it, or choose another folder"
                )
        if self.main:
            self.write_progress()
            # Written last: its new modification time says the restore is complete.
            atomic_write_text(
                self.run_dir / "config.json", json.dumps(cfg.to_dict(), indent=2) + "\n"
            )
            if cfg.tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                # Events past the resumed epoch (written before a kill) are hidden.
                purge = self.env_steps + 1 if cfg.resume else None
                self.writer = SummaryWriter(str(self.run_dir / "tensorboard"), purge_step=purge)

    def restore(self, run_dir: Path) -> None:
        """Loads the last committed epoch of ``run_dir`` (falling back to the one before
        when it is damaged) and cuts progress.csv to it."""
        if not (run_dir / "config.json").is_file():
            raise ValueError(f"resume={str(run_dir)!r} is not a run folder (no config.json)")
        if self.main:
            for path in remove_debris(run_dir):
                logger.info("removed %s, left by a write that was cut", path)
        self._barrier()
        epochs = unit_epochs(run_dir)
        if not epochs:
            logger.warning(
                "resume=%r holds no finished epoch yet: training starts from the beginning",
                str(run_dir),
            )
            return
        failures = []
        for epoch in epochs:
            try:
                loaded = self._read_unit(unit_dir(run_dir, epoch))
                error = None
            except CheckpointError as exc:
                loaded, error = None, str(exc)
            ok = float(error is None)
            agreed = float(distributed.all_reduce_sum(torch.tensor([ok]))[0]) == self.world
            if agreed:
                break
            failures.append(f"epoch {epoch}: {error or 'damaged on another worker'}")
            logger.warning(
                "the checkpoint of epoch %d cannot be resumed (%s)%s",
                epoch,
                error or "damaged on another worker",
                "; trying the epoch before" if epoch != epochs[-1] else "",
            )
        else:
            raise CheckpointError(
                f"resume={str(run_dir)!r}: no checkpoint in it can be read ("
                + "; ".join(failures)
                + "). Restore the files from a backup, or start a new run with out=<folder>"
            )
        assert loaded is not None  # the loop ends early only on a unit every worker read
        self._apply_unit(run_dir, epoch, *loaded)
        if epoch != epochs[0]:
            logger.warning("resuming from epoch %d, the last readable checkpoint", epoch)
        if self.main:
            for newer in epochs[: epochs.index(epoch)]:
                shutil.rmtree(unit_dir(run_dir, newer), ignore_errors=True)
            atomic_copy(unit_dir(run_dir, epoch) / "policy.pt", run_dir / "policy_latest.pt")
            best = run_dir / "policy_best.pt"
            if self.best_epoch == epoch and _checkpoint_epoch(best) != epoch:
                self.save("policy_best.pt", self.resumed_success, training=False)
        if self.main:
            self.progress_rows = self._read_progress_rows(run_dir, epoch)

    def _read_unit(self, unit: Path) -> tuple[dict, dict | None, Any]:
        """Reads every part of a unit this worker needs, applying nothing yet."""

        manifest = read_manifest(unit)
        epoch = manifest["epoch"]
        data = read_checkpoint(unit / "policy.pt", map_location=self.device)
        if data["metadata"].get("epoch") != epoch or "training" not in data:
            raise CheckpointError(
                f"{str(unit / 'policy.pt')!r} holds epoch {data['metadata'].get('epoch')!r} "
                f"{'with' if 'training' in data else 'without'} training state; its unit is "
                f"epoch {epoch}"
            )
        data["manifest"] = manifest
        if manifest.get("world_size") != self.world:
            return data, None, None
        path = unit / f"state_rank{self.rank}.pt"
        state = read_checkpoint_like(path, STATE_FORMAT)
        if state.get("epoch") != epoch or state.get("rank") != self.rank:
            raise CheckpointError(
                f"{str(path)!r} holds epoch {state.get('epoch')!r} of rank {state.get('rank')!r}, "
                f"expected epoch {epoch} of rank {self.rank}"
            )
        buffer = None
        path = unit / self._buffer_file()
        if self.config.save_buffer and path.name in manifest["files"]:
            try:
                buffer = self.collector.load_buffer(
                    path, self.compute_reward, self.compute_terminated
                )
            except Exception as exc:  # numpy / zipfile raise many kinds on a damaged file
                raise CheckpointError(
                    f"{str(path)!r} is not a readable replay buffer ({error_summary(exc)})"
                ) from None
        elif (
            self.config.save_buffer
            and path.with_suffix("." + self.collector.other_suffix).name in manifest["files"]
        ):
            logger.warning(
                "%s holds a replay buffer of the other env_device: this run starts an empty one",
                unit,
            )
        return data, state, buffer

    def _apply_unit(
        self, run_dir: Path, epoch: int, data: dict, state: dict | None, buffer: Any
    ) -> None:
        meta = data["metadata"]
        self._load_training_state(run_dir, data)
        self.resumed_success = float(meta["success_rate"])
        self.best_epoch = int(data["manifest"].get("best_epoch", epoch))
        if state is None:
            logger.warning(
                "epoch %d was saved by %s workers, this run has %d: the networks resume, the "
                "random generators and replay buffers start anew",
                epoch,
                data["manifest"].get("world_size"),
                self.world,
            )
            return
        if buffer is not None:
            buffer.truncate_last_trajectory()  # the envs restart: open episodes end here
            self.buffer = buffer
        torch.set_rng_state(state["torch"].cpu())
        cuda = state["cuda"]
        if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
        for name, obj in (("agent", self.agent), ("buffer", self.buffer)):
            missed = restore_torch_generators(obj, state.get("torch_generators", {}).get(name, {}))
            if missed:
                logger.warning("%s torch generators %s were not restored", name, missed)
            missed = restore_generators(obj, state[name])
            if missed:
                logger.warning("%s generators %s were not restored", name, missed)
        self._resumed_envs = state["envs"]

    def _load_training_state(self, run_dir: Path, data: dict) -> None:
        meta = data["metadata"]
        if meta["env_id"] != self.config.env_id or meta["algo"] != self.config.algo:
            raise ValueError(
                f"resume={str(run_dir)!r} holds a {meta['algo']} run on {meta['env_id']}, not "
                f"{self.config.algo} on {self.config.env_id}"
            )
        try:
            for name, module in self.agent.policy_modules().items():
                module.load_state_dict(data["policy"][name])
            for name, module in self.agent.training_modules().items():
                module.load_state_dict(data["training"][name])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise ValueError(
                f"resume={str(run_dir)!r}: its checkpoint does not fit this config's networks "
                f"({type(exc).__name__}: {str(exc).splitlines()[0]})"
            ) from None
        self.epoch, self.env_steps = int(meta["epoch"]), int(meta["env_steps"])
        self.updates, self.wall_time = int(meta["updates"]), float(meta["wall_time"])
        self.best_success = float(meta["best_success_rate"])
        self.best_return = float(meta.get("best_return", -math.inf))

    def _buffer_file(self) -> str:
        """The name of this worker's saved replay buffer in an epoch's unit."""
        return f"buffer_rank{self.rank}.{self.collector.buffer_suffix}"

    def _barrier(self) -> None:
        """Waits for every worker (a no-op alone)."""
        if self.world > 1:
            distributed.all_reduce_sum(torch.zeros(1))

    def _read_progress_rows(self, run_dir: Path, epoch: int) -> list[list[str]]:
        """progress.csv's rows of epochs 1..``epoch`` (later ones are dropped)."""
        path = run_dir / "progress.csv"
        try:
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
        except OSError as exc:
            raise CheckpointError(f"{str(path)!r} cannot be read ({exc})") from None
        header, body = (rows[0], rows[1:]) if rows else ([], [])
        if header == self.columns()[: -len(TIME_COLUMNS)]:
            # Written before progress.csv had the time columns: those epochs' are empty.
            body = [row + [""] * len(TIME_COLUMNS) if row else row for row in body]
        elif header != self.columns():
            raise CheckpointError(
                f"{str(path)!r} does not start with the header {','.join(self.columns())}"
            )
        kept = [row for row in body if row and row[0].isdigit() and int(row[0]) <= epoch]
        if [int(row[0]) for row in kept] != list(range(1, epoch + 1)):
            raise CheckpointError(
                f"{str(path)!r} lacks rows of epochs 1..{epoch} (it holds epochs "
                f"{[row[0] for row in kept][:20]}): restore it from a backup to resume"
            )
        if len(body) > len(kept):
            logger.info("progress.csv: dropped %d rows past epoch %d", len(body) - len(kept), epoch)
        return kept

    def columns(self) -> list[str]:
        """The progress.csv header."""
        return [
            "epoch", "env_steps", "updates", "wall_time", "steps_per_s", "train_success",
            "eval_success", "eval_return", "eval_length", *loss_names(self.config.algo),
            *TIME_COLUMNS,
        ]  # fmt: skip

    def log(self, row: dict[str, Any]) -> None:
        """Sends the committed epoch's row to TensorBoard and redraws the curves.

        progress.csv already holds the row: :meth:`save_epoch` writes it with the epoch.
        """
        from goalenvs.train.curves import plot_curves

        self.history.append(row)
        if not self.main:
            return
        if self.writer is not None:
            for key, value in row.items():
                if key not in ("epoch", "env_steps"):
                    self.writer.add_scalar(key, value, row["env_steps"])
            self.writer.flush()
        rows = _read_progress(self.run_dir / "progress.csv")
        # Drawing takes a few hundred ms: it runs beside the next epoch's training.
        self.wait_for_plot()
        self._plotter = threading.Thread(
            target=plot_curves,
            args=(
                rows,
                self.run_dir / "curves.png",
                f"{self.config.env_id} {self.config.algo}",
                loss_names(self.config.algo),
            ),
            daemon=True,
        )
        self._plotter.start()

    def wait_for_plot(self) -> None:
        """Waits for the curves being drawn, if any."""
        if self._plotter is not None:
            self._plotter.join()
            self._plotter = None


TORCH_GENERATORS = "torch_generators"  # key of a device twin's generator in the env states


def torch_generator_states(obj: Any) -> dict[str, torch.Tensor]:
    """``{attribute: state}`` of the ``torch.Generator`` attributes of ``obj`` (those of
    the device path: a device twin's, the device buffer's, the agent's exploration)."""
    return {
        name: value.get_state()
        for name, value in sorted(vars(obj).items())
        if isinstance(value, torch.Generator)
    }


def restore_torch_generators(obj: Any, states: dict[str, torch.Tensor]) -> list[str]:
    """Sets the torch generators of ``obj`` back to ``states``; returns the names that did
    not match (saved but absent, or present but not saved)."""
    current = {k: v for k, v in vars(obj).items() if isinstance(v, torch.Generator)}
    for name in current.keys() & states.keys():
        current[name].set_state(states[name])
    return sorted(current.keys() ^ states.keys())


def env_generator_states(env: Any) -> dict[str, Any]:
    """:func:`generator_states` of a vector env, with a device twin's torch generator."""
    states = generator_states(env)
    torch_states = torch_generator_states(env)
    if torch_states:
        states[TORCH_GENERATORS] = torch_states
    return states


def _csv_value(value: Any) -> str:
    return str(value)


def _checkpoint_epoch(path: Path) -> int | None:
    """The epoch a checkpoint file names (None when it is missing or unreadable)."""
    try:
        return int(read_checkpoint(path)["metadata"]["epoch"])
    except (OSError, CheckpointError, KeyError, TypeError, ValueError):
        return None


def read_checkpoint_like(path: Path, format_name: str) -> dict:
    """Loads a small torch file of ours (tensors and plain values) with the checks and
    errors of :func:`read_checkpoint`."""
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} is missing")
    data = load_torch_file(path, what=f"{format_name} file")
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise CheckpointError(f"{str(path)!r} is not a {format_name} file")
    return data


class _GeneratorSnapshot(gym.vector.VectorWrapper):
    """Keeps the envs' generator states from just before the last step of an epoch.

    A sub-env whose episode ends in that step (same-step autoreset) draws its next
    episode inside it; saving the states from before the step lets the resume's reset
    draw that same episode again. Sub-envs that did not reset drew nothing in the step,
    so their state is the current one either way. Costs one comparison per step.
    """

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self._steps, self._target = 0, -1
        self._states: dict[str, Any] | None = None

    def arm(self, steps: int) -> None:
        """Takes the snapshot before the ``steps``-th step from now."""
        self._steps, self._target, self._states = 0, steps, None

    def step(self, actions: Any) -> Any:
        """Steps the envs (after taking the snapshot when this is the armed step)."""
        self._steps += 1
        if self._steps == self._target:
            self._states = env_generator_states(self.env.unwrapped)
        return self.env.step(actions)

    def snapshot(self) -> dict[str, Any]:
        """The states before the last step when it was the armed one, else the current."""
        if self._states is not None and self._steps == self._target:
            return self._states
        return env_generator_states(self.env.unwrapped)


def _read_progress(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        # An empty cell (a time column of an epoch logged before it existed) reads as NaN.
        return [
            {k: float(v) if v != "" else math.nan for k, v in row.items()}
            for row in csv.DictReader(f)
        ]
