"""The run folder: what a training run writes, and how a resume reads it back.

::

    config.json        the full config (rebuild it with ``config_from_dict``) and, under
                       "plan", every choice the run made for its machine, and the machine
    progress.csv       one row per epoch
    curves.png         success rate and return against env steps, redrawn every epoch
    policy_best.pt     the policy with the best eval success so far
    policy_latest.pt   policy plus training state of the last finished epoch
    policy_epoch_K.pt  every ``save_every`` epochs
    checkpoints/epoch_N/   what --resume reads: one unit per finished epoch (the last two
                       are kept): policy.pt, state_rankR.pt (random generator states of
                       worker R), buffer_rankR.npz or .pt (with ``save_buffer``),
                       manifest.json

Every file is written atomically and an epoch's unit is committed by its manifest,
written last, so a kill at any moment leaves a folder that ``--resume`` continues from
the last committed epoch (later rows dropped, debris removed, a damaged newest unit
falling back to the one before). :class:`RunFolder` holds no training state of its own:
:meth:`RunFolder.commit_epoch` is given what to save, and :meth:`RunFolder.open` loads a
resumed epoch's networks into the agent and returns the rest as a :class:`Restored`."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from gymnasium import spaces

import goalenvs
from goalenvs.agents import distributed
from goalenvs.agents.base import Agent
from goalenvs.agents.config import TrainConfig
from goalenvs.core import GOAL_KEYS
from goalenvs.core.io import atomic_write_file
from goalenvs.her.replay import ReplayBuffer
from goalenvs.train.checkpoint import (
    STATE_FORMAT,
    CheckpointError,
    atomic_copy,
    atomic_write_text,
    commit_unit,
    error_summary,
    load_torch_file,
    read_checkpoint,
    read_manifest,
    remove_debris,
    save_checkpoint,
    save_torch_file,
    space_to_dict,
    unit_dir,
    unit_epochs,
)
from goalenvs.train.timing import TIME_COLUMNS

KEEP_UNITS = 2  # committed epochs kept in checkpoints/: the newest and one to fall back on
# a unit as read: its policy checkpoint (with its manifest), this worker's state and buffer
Unit = tuple[dict, dict | None, ReplayBuffer | None]
logger = logging.getLogger(__name__)


def new_run_path(env_id: str, algo: str, tag: str) -> Path:
    """``runs/<env>-<algo>-<tag>-<time>``: a new run folder's (or seed set's) path."""
    name = env_id.replace("/", "_").replace(":", "_")
    return Path(f"runs/{name}-{algo}-{tag}-{time.strftime('%Y%m%d-%H%M%S')}")


@dataclass
class Counters:
    """How far a run has come (all workers together), as its checkpoints record it."""

    epoch: int = 0
    env_steps: int = 0
    updates: int = 0
    wall_time: float = 0.0  # seconds of training (resumed runs add up)
    best_success: float = -1.0  # best eval success rate so far
    best_return: float = -math.inf  # the eval return of that epoch (ties on success)
    best_epoch: int = 0

    def record_eval(self, success: float, eval_return: float) -> bool:
        """Takes the finished epoch's evaluation; True when it is the best so far."""
        best = (success, eval_return) > (self.best_success, self.best_return)
        if best:
            self.best_success, self.best_return, self.best_epoch = success, eval_return, self.epoch
        return best


@dataclass
class Restored:
    """What :meth:`RunFolder.open` read back besides the networks it loaded."""

    counters: Counters
    success: float  # the eval success rate of that epoch
    buffer: ReplayBuffer | None  # its replay buffer (None: not saved, or by the other backend)
    random_state: dict[str, object] | None  # this worker's generators (None: another world size)


class RunFolder:
    """The folder of one run, as worker ``rank`` of ``world`` reads and writes it:
    ``config.resume``, else ``config.out``, else a new one under ``runs/``.
    Every checkpoint carries ``describe`` (env, algorithm, spaces, ``gamma``, config)
    besides its counters; ``loss_names`` are progress.csv's losses; ``buffer_file`` names
    this worker's saved replay buffer; a resume loads onto ``device``; ``plan`` (the
    :class:`~goalenvs.train.plan.RunPlan` as plain values) goes into config.json."""

    def __init__(
        self,
        config: TrainConfig,
        *,
        rank: int,
        world: int,
        gamma: float,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        loss_names: tuple[str, ...],
        buffer_file: str,
        device: torch.device,
        plan: dict[str, object] | None = None,
    ) -> None:
        given = config.resume or config.out
        self.path = (
            Path(given) if given else new_run_path(config.env_id, config.algo, f"s{config.seed}")
        )
        self.plan, self.device, self.config = plan, device, config
        self.rank, self.world, self.main = rank, world, rank == 0
        self.describe: dict[str, object] = {
            "env_id": config.env_id,
            "env_kwargs": config.env_kwargs,
            "env_file": config.env_file,  # where a path/to/file.py env's file is: play finds it
            "algo": config.algo,
            "hidden_sizes": list(config.hidden_sizes),
            "gamma": gamma,
            "observation_space": {k: space_to_dict(observation_space[k]) for k in GOAL_KEYS},
            "action_space": space_to_dict(action_space),
            "config": config.to_dict(),
        }
        self.loss_names, self.buffer_file = loss_names, buffer_file
        self.progress_rows: list[list[str]] = []
        self.writer: Any = None  # a TensorBoard SummaryWriter (tensorboard=True)
        self._plotter: threading.Thread | None = None

    def columns(self) -> list[str]:
        """The progress.csv header."""
        # with policy_average, eval_success is the averaged policy's, beside the policy's own
        online = ["eval_success_online"] if self.config.policy_average > 0 else []
        return [
            "epoch", "env_steps", "updates", "wall_time", "steps_per_s", "train_success",
            "eval_success", "eval_return", "eval_length", *online, *self.loss_names,
            *TIME_COLUMNS,
        ]  # fmt: skip

    # ---- opening

    def open(self, agent: Agent, load_buffer: Callable[[Path], ReplayBuffer]) -> Restored | None:
        """Creates the folder, or reopens it to resume: the last committed epoch's networks
        go into ``agent``, the rest is returned (None: a fresh run). ``load_buffer(path)``
        reads a saved replay buffer."""
        cfg = self.config
        restored = self._restore(agent, load_buffer) if cfg.resume else None
        if not cfg.resume and self.main:
            self.path.mkdir(parents=True, exist_ok=True)
            if (self.path / "policy_latest.pt").exists() or unit_epochs(self.path):
                raise ValueError(
                    f"out={str(self.path)!r} already holds a run; pass "
                    f"resume={str(self.path)!r} to continue it, or choose another folder"
                )
        if self.main:
            self._write_progress()
            # Written last: a new config.json says the folder is ready (a resume restored).
            record = {**cfg.to_dict(), "plan": self.plan} if self.plan else cfg.to_dict()
            atomic_write_text(self.path / "config.json", json.dumps(record, indent=2) + "\n")
            if cfg.tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                # Events past the resumed epoch (written before a kill) are hidden.
                purge = restored.counters.env_steps + 1 if restored is not None else None
                self.writer = SummaryWriter(str(self.path / "tensorboard"), purge_step=purge)
        return restored

    def _restore(
        self, agent: Agent, load_buffer: Callable[[Path], ReplayBuffer]
    ) -> Restored | None:
        """Loads the last committed epoch (falling back to the one before when it is
        damaged) and cuts progress.csv to it."""
        if not (self.path / "config.json").is_file():
            raise ValueError(f"resume={str(self.path)!r} is not a run folder (no config.json)")
        if self.main:
            for path in remove_debris(self.path):
                logger.info("removed %s, left by a write that was cut", path)
        self._barrier()
        epochs = unit_epochs(self.path)
        if not epochs:
            logger.warning(
                "resume=%r holds no finished epoch yet: training starts from the beginning",
                str(self.path),
            )
            if self.main:
                self.path.mkdir(parents=True, exist_ok=True)
            return None
        failures = []
        for epoch in epochs:
            unit, error = None, None
            try:
                unit = self._read_unit(unit_dir(self.path, epoch), load_buffer)
            except CheckpointError as exc:
                error = str(exc)
            ok = float(error is None)
            if float(distributed.all_reduce_sum(torch.tensor([ok]))[0]) == self.world:
                break
            error = error or "damaged on another worker"
            failures.append(f"epoch {epoch}: {error}")
            before = "; trying the epoch before" if epoch != epochs[-1] else ""
            logger.warning(
                "the checkpoint of epoch %d cannot be resumed (%s)%s", epoch, error, before
            )
        else:
            raise CheckpointError(
                f"resume={str(self.path)!r}: no checkpoint in it can be read ("
                + "; ".join(failures)
                + "). Restore the files from a backup, or start a new run with out=<folder>"
            )
        assert unit is not None  # the loop ends early only on a unit every worker read
        restored = self._apply_unit(agent, epoch, unit)
        if epoch != epochs[0]:
            logger.warning("resuming from epoch %d, the last readable checkpoint", epoch)
        if self.main:
            for newer in epochs[: epochs.index(epoch)]:
                shutil.rmtree(unit_dir(self.path, newer), ignore_errors=True)
            atomic_copy(unit_dir(self.path, epoch) / "policy.pt", self.path / "policy_latest.pt")
            best = self.path / "policy_best.pt"
            if restored.counters.best_epoch == epoch and _checkpoint_epoch(best) != epoch:
                self._save(agent, "policy_best.pt", restored.counters, restored.success, False)
            self.progress_rows = self._read_progress_rows(epoch)
        return restored

    def _read_unit(self, unit: Path, load_buffer: Callable[[Path], ReplayBuffer]) -> Unit:
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
        path = unit / self.buffer_file
        if self.config.save_buffer and path.name in manifest["files"]:
            try:
                buffer = load_buffer(path)
            except Exception as exc:  # numpy / zipfile raise many kinds on a damaged file
                raise CheckpointError(
                    f"{str(path)!r} is not a readable replay buffer ({error_summary(exc)})"
                ) from None
        elif self.config.save_buffer and any(
            name.startswith(f"buffer_rank{self.rank}.") for name in manifest["files"]
        ):
            logger.warning(
                "%s holds a replay buffer of the other env_device: this run starts an empty one",
                unit,
            )
        return data, state, buffer

    def _apply_unit(self, agent: Agent, epoch: int, unit: Unit) -> Restored:
        """Loads the unit's networks into ``agent``; the counters and the rest returned."""
        data, state, buffer = unit
        meta = data["metadata"]
        # a file.py env resumed from another folder is named by its recorded file there
        same_file = (
            meta.get("env_file") is not None
            and meta.get("env_file") == self.config.env_file
            and meta["env_id"].rpartition(":")[2] == self.config.env_id.rpartition(":")[2]
        )
        same_env = meta["env_id"] == self.config.env_id or same_file
        if not same_env or meta["algo"] != self.config.algo:
            raise ValueError(
                f"resume={str(self.path)!r} holds a {meta['algo']} run on {meta['env_id']}, not "
                f"{self.config.algo} on {self.config.env_id}"
            )
        try:
            for name, module in agent.policy_modules().items():
                module.load_state_dict(data["policy"][name])
            for name, module in agent.training_modules().items():
                module.load_state_dict(data["training"][name])
        except (KeyError, RuntimeError, ValueError) as exc:
            raise ValueError(
                f"resume={str(self.path)!r}: its checkpoint does not fit this config's networks "
                f"({type(exc).__name__}: {str(exc).splitlines()[0]})"
            ) from None
        counters = Counters(
            int(meta["epoch"]), int(meta["env_steps"]), int(meta["updates"]),
            float(meta["wall_time"]), float(meta["best_success_rate"]),
            float(meta.get("best_return", -math.inf)),
            int(data["manifest"].get("best_epoch", epoch)),
        )  # fmt: skip
        if state is None:
            saved = data["manifest"].get("world_size")
            logger.warning(
                "epoch %d was saved by %s workers, this run has %d: the networks resume, the "
                "random generators and replay buffers start anew", epoch, saved, self.world
            )  # fmt: skip
        return Restored(counters, float(meta["success_rate"]), buffer, state)

    # ---- committing an epoch

    def commit_epoch(
        self,
        counters: Counters,
        row: dict[str, Any],
        best: bool,
        agent: Agent,
        buffer: ReplayBuffer,
        random_state: dict[str, object],
    ) -> None:
        """Commits the finished epoch as one unit: every worker writes its part of
        ``checkpoints/epoch_N``, progress.csv gets the row, and worker 0 writes the
        manifest, which commits it. Only then are policy_latest.pt, policy_best.pt (when
        ``best``) and policy_epoch_K.pt updated and older units removed."""
        cfg, success = self.config, row["eval_success"]
        unit = unit_dir(self.path, counters.epoch)
        self.progress_rows.append([str(row[c]) for c in self.columns()])
        if self.main:
            if unit.exists():  # left by a run that was resumed from an earlier epoch
                shutil.rmtree(unit)
            unit.mkdir(parents=True)
        self._barrier()
        if self.main:
            name = unit.relative_to(self.path) / "policy.pt"
            self._save(agent, name, counters, success, training=True)
        state = dict(format=STATE_FORMAT, version=1, epoch=counters.epoch, rank=self.rank)
        state = {**state, "world_size": self.world, **random_state}
        save_torch_file(unit / f"state_rank{self.rank}.pt", state)
        if cfg.save_buffer:
            # The live buffer is saved as it is (episodes in progress included): a resume
            # closes them, since its envs start new episodes.
            atomic_write_file(unit / self.buffer_file, buffer.save)
        self._barrier()
        if not self.main:
            return
        self._write_progress()
        extra: dict[str, object] = {"world_size": self.world, "env_steps": counters.env_steps}
        extra.update(best_epoch=counters.best_epoch, save_buffer=bool(cfg.save_buffer))
        commit_unit(unit, counters.epoch, extra)
        atomic_copy(unit / "policy.pt", self.path / "policy_latest.pt")
        if best:
            self._save(agent, "policy_best.pt", counters, success, training=False)
        if cfg.save_every and counters.epoch % cfg.save_every == 0:
            self._save(agent, f"policy_epoch_{counters.epoch}.pt", counters, success, False)
        for epoch in unit_epochs(self.path)[KEEP_UNITS:]:
            shutil.rmtree(unit_dir(self.path, epoch), ignore_errors=True)

    def _save(
        self, agent: Agent, name: str | Path, counters: Counters, success: float, training: bool
    ) -> Path:
        """Writes one checkpoint of the run; ``name`` is relative to the run folder."""
        c = counters
        metadata = {
            **self.describe,
            "epoch": c.epoch,
            "env_steps": c.env_steps,
            "updates": c.updates,
            "wall_time": c.wall_time,
            "success_rate": success,
            "best_success_rate": c.best_success,
            "best_return": c.best_return,
            "goalenvs_version": goalenvs.__version__,
            "torch_version": str(torch.__version__),
        }
        state = agent.training_modules() if training else None
        return save_checkpoint(self.path / name, metadata, agent.policy_modules(), state)

    def _write_progress(self) -> None:
        """Rewrites progress.csv atomically with the header and every epoch's row so far."""
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(self.columns())
        writer.writerows(self.progress_rows)
        atomic_write_text(self.path / "progress.csv", text.getvalue())

    def _barrier(self) -> None:
        """Waits for every worker (a no-op alone)."""
        if self.world > 1:
            distributed.all_reduce_sum(torch.zeros(1))

    def _read_progress_rows(self, epoch: int) -> list[list[str]]:
        """progress.csv's rows of epochs 1..``epoch`` (later ones are dropped)."""
        path = self.path / "progress.csv"
        try:
            with open(path, newline="") as f:
                rows = list(csv.reader(f))
        except OSError as exc:
            raise CheckpointError(f"{str(path)!r} cannot be read ({exc})") from None
        header, body = (rows[0], rows[1:]) if rows else ([], [])
        if header == self.columns()[: -len(TIME_COLUMNS)]:
            # A progress.csv without the time columns: those epochs' cells stay empty.
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

    # ---- what follows a commit

    def log(self, row: dict[str, Any]) -> None:
        """Sends the committed epoch's row to TensorBoard and redraws the curves (worker 0)."""
        from goalenvs.train.curves import plot_curves

        if not self.main:
            return
        if self.writer is not None:
            for key, value in row.items():
                if key not in ("epoch", "env_steps"):
                    self.writer.add_scalar(key, value, row["env_steps"])
            self.writer.flush()
        rows = _read_progress(self.path / "progress.csv")
        # Drawing takes a few hundred ms: it runs beside the next epoch's training.
        self.wait_for_plot()
        title = f"{self.config.env_id} {self.config.algo}"
        args = (rows, self.path / "curves.png", title, self.loss_names)
        self._plotter = threading.Thread(target=plot_curves, args=args, daemon=True)
        self._plotter.start()

    def wait_for_plot(self) -> None:
        """Waits for the curves being drawn, if any."""
        if self._plotter is not None:
            self._plotter.join()
            self._plotter = None

    def close(self) -> None:
        """Waits for the curves and closes the TensorBoard writer."""
        self.wait_for_plot()
        if self.writer is not None:
            self.writer.close()


def read_checkpoint_like(path: Path, format_name: str) -> dict:
    """Loads a small torch file of ours with :func:`read_checkpoint`'s checks and errors."""
    if not path.is_file():
        raise CheckpointError(f"{str(path)!r} is missing")
    data = load_torch_file(path, what=f"{format_name} file")
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise CheckpointError(f"{str(path)!r} is not a {format_name} file")
    return data


def _checkpoint_epoch(path: Path) -> int | None:
    """The epoch a checkpoint file names (None when it is missing or unreadable)."""
    try:
        return int(read_checkpoint(path)["metadata"]["epoch"])
    except (OSError, CheckpointError, KeyError, TypeError, ValueError):
        return None


def _read_progress(path: Path) -> list[dict[str, float]]:
    with open(path, newline="") as f:
        # An empty cell (a time column of an epoch logged before it existed) reads as NaN.
        return [
            {k: float(v) if v != "" else math.nan for k, v in row.items()}
            for row in csv.DictReader(f)
        ]
