"""Env worker processes: the same episodes as one process, overlap, and failures."""

from __future__ import annotations

import multiprocessing
import os
import signal
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.envs.point_reach import PointReachEnv
from goalenvs.her.buffer import DeviceHerReplayBuffer
from goalenvs.train import machine as machine_module
from goalenvs.train import plan as plan_module
from goalenvs.train.env_workers import EnvWorkerError, EnvWorkers
from goalenvs.train.envs import make_vector_env
from goalenvs.train.machine import (
    check_env_workers,
    default_env_workers,
    eval_env_workers,
    resident_mb,
)
from goalenvs.train.resume_state import env_generator_states
from goalenvs.train.trainer import Trainer, train
from tests.train.runs import ENVS, REACH, progress, reach_config

SAME_STEP = gym.vector.AutoresetMode.SAME_STEP


def config(tmp_path: Path, **kwargs) -> DDPGConfig:
    longer = dict(epochs=2, n_cycles=2, n_batches=2, batch_size=32, n_eval_episodes=4)
    return reach_config(tmp_path, **{**longer, **kwargs})


def no_worker_left() -> bool:
    return not [p for p in multiprocessing.active_children() if "Worker" in p.name]


def test_two_workers_step_the_same_episodes_as_one_process():
    kwargs = {"max_episode_steps": 7}
    workers = EnvWorkers(REACH, kwargs, 4, 2, SAME_STEP)
    alone = make_vector_env(REACH, kwargs, 4, SAME_STEP)
    try:
        assert workers.single_action_space == alone.single_action_space
        first, _ = workers.reset(seed=11)
        expected, _ = alone.reset(seed=11)
        np.testing.assert_equal(first, expected)
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(20):
            actions = rng.uniform(-1, 1, (4, 2)).astype(np.float32)
            got, want = workers.step(actions), alone.step(actions)
            np.testing.assert_equal(got[:4], want[:4])  # observations, rewards, ends
            (info, expected_info), done = (got[4], want[4]), np.flatnonzero(want[2] | want[3])
            assert sorted(info) == sorted(expected_info)
            ended += len(done)
            for i in done:
                np.testing.assert_equal(info["final_obs"][i], expected_info["final_obs"][i])
                success = expected_info["final_info"]["is_success"][i]
                assert info["final_info"]["is_success"][i] == success
        assert ended == 8  # every sub-env ended two 7-step episodes in 20 steps
        # A checkpoint names each sub-env's generator the same way either way.
        assert workers.generator_states().keys() == env_generator_states(alone.unwrapped).keys()
    finally:
        workers.close()
        alone.close()
    assert no_worker_left()


def test_generator_states_restore_into_another_number_of_workers():
    kwargs = {"max_episode_steps": 5}
    two = EnvWorkers(REACH, kwargs, 4, 2, SAME_STEP)
    four = EnvWorkers(REACH, kwargs, 4, 4, SAME_STEP)
    try:
        two.reset(seed=3)
        for _ in range(6):
            two.step(np.zeros((4, 2), np.float32))
        states = two.generator_states()
        four.reset(seed=99)
        assert four.restore_generators(states) == []
        assert four.generator_states() == states
        # Saved but absent (envs[9]) or present but not saved (0-3): every name reported.
        missed = four.restore_generators({"envs[9].np_random": states["envs[0].np_random"]})
        assert missed == [f"envs[{i}].np_random" for i in (0, 1, 2, 3, 9)]
    finally:
        two.close()
        four.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_last_observation_of_every_episode_is_stored_not_the_reset_one(tmp_path, workers):
    # StepCounter's achieved goal counts the steps of its episode (0.01, 0.02, ...): each
    # episode's last stored next-observation is the 10th step's, never the next reset's 0
    # rollout_steps 7: episodes end mid-cycle
    cfg = config(tmp_path, env_id=f"{ENVS}:StepCounter", env_workers=workers, overlap=False,
                 rollout_steps=7, n_sampled_goal=0, save_buffer=False)  # fmt: skip
    trainer = Trainer(cfg)
    try:
        trainer.run()
        batch = trainer.buffer.sample(2000)
    finally:
        trainer.close()
    now = np.round(batch.observations["achieved_goal"][:, 0] * 100).astype(int)
    after = np.round(batch.next_observations["achieved_goal"][:, 0] * 100).astype(int)
    assert (now == 9).any()  # last steps were sampled
    assert np.array_equal(after, now + 1), sorted(
        set(zip(now.tolist(), after.tolist(), strict=True))
    )


def test_two_workers_give_one_process_run_and_overlap_lags_a_cycle_reproducibly(tmp_path):
    one = train(config(tmp_path / "one", env_workers=1, overlap=False))
    two = train(config(tmp_path / "two", env_workers=2, overlap=False))
    assert [r["env_steps"] for r in one.history] == [r["env_steps"] for r in two.history]
    for name in ("eval_success", "eval_return", "critic_loss", "actor_loss", "q_mean"):
        assert [r[name] for r in one.history] == [r[name] for r in two.history], name
    # Overlap (the default with workers) collects with a cycle of lag, the same whatever
    # the thread timing; the buffer it saves changes nothing.
    whole = train(config(tmp_path / "whole", env_workers=2, save_buffer=True))
    again = train(config(tmp_path / "again", env_workers=2, overlap=True))
    losses = [r["critic_loss"] for r in whole.history]
    assert losses == [r["critic_loss"] for r in again.history]
    assert whole.env_steps == two.env_steps == 2 * 2 * 10 * 4
    # The lag changes which policy collected cycles 2-4, so the numbers differ.
    assert losses != [r["critic_loss"] for r in two.history]
    # A resumed worker run draws what the uninterrupted one draws (rollout_steps = the
    # episode length: no episode is in progress at an epoch's end).
    cut = config(tmp_path / "cut", env_workers=2, epochs=1, save_buffer=True)
    train(cut)
    resumed = train(config(tmp_path / "cut", env_workers=2, epochs=2, resume=cut.out))
    assert [r["eval_return"] for r in progress(Path(cut.out))] == [
        r["eval_return"] for r in progress(Path(whole.run_dir))
    ]
    assert resumed.epochs == 2
    assert no_worker_left()


def test_an_env_that_raises_in_a_worker_stops_the_run_with_its_error(tmp_path):
    # Epoch 1 takes 2 cycles x 10 steps; each sub-env raises at its 31st step (epoch 2).
    kwargs = {"max_episode_steps": 10, "fail_after": 30}
    # A clip range given and no pre-training checks: nothing steps the env 31 times in the
    # trainer's own process (the checks would find the error there first).
    failing = config(
        tmp_path, env_workers=2, env_kwargs=kwargs, clip_range=(-10.0, 0.0), preflight=False
    )
    with pytest.raises(EnvWorkerError, match=r"raised FloatingPointError in an env worker: the "):
        train(failing)
    assert no_worker_left()
    assert [row["epoch"] for row in progress(tmp_path / "run")] == ["1"]
    result = train(config(tmp_path, env_workers=2, resume=str(tmp_path / "run")))
    assert result.epochs == 2 and [row["epoch"] for row in progress(tmp_path / "run")] == ["1", "2"]


def test_a_killed_worker_names_the_signal_and_leaves_no_process():
    workers = EnvWorkers(REACH, {"max_episode_steps": 10, "die_after": 3}, 4, 2, SAME_STEP)
    workers.reset(seed=0)
    for _ in range(3):
        workers.step(np.zeros((4, 2), np.float32))
    with pytest.raises(EnvWorkerError, match=r"worker 0 \(sub-envs 0-1\) was killed by SIGKILL"):
        workers.step(np.zeros((4, 2), np.float32))
    workers.close()  # closing after the failure is quiet
    assert all(p.exitcode is not None for p in workers.pool.processes)
    assert no_worker_left()


def test_workers_leave_ctrl_c_and_sigterm_to_the_trainer():
    # A terminal's Ctrl-C reaches every process of its group: the trainer finishes its
    # cycle and closes the workers, which must still be there to step it.
    workers = EnvWorkers(REACH, {"max_episode_steps": 10}, 4, 2, SAME_STEP)
    try:
        workers.reset(seed=0)
        for process in workers.pool.processes:
            os.kill(process.pid, signal.SIGINT)
            os.kill(process.pid, signal.SIGTERM)
        obs, *_ = workers.step(np.zeros((4, 2), np.float32))
        assert obs["observation"].shape[0] == 4
        assert all(process.is_alive() for process in workers.pool.processes)
    finally:
        workers.close()
    assert no_worker_left()


def test_a_worker_killed_from_outside_stops_training(tmp_path):
    def kill_one(row):
        victim = trainer.collector.envs.pool.processes[1]
        victim.kill()
        victim.join()

    trainer = Trainer(config(tmp_path, env_workers=2, epochs=3), kill_one)
    with pytest.raises(EnvWorkerError, match=r"worker 1 \(sub-envs 2-3\) was killed by SIGKILL"):
        trainer.run()
    assert no_worker_left()
    assert [row["epoch"] for row in progress(tmp_path / "run")] == ["1"]


@pytest.mark.parametrize(
    ("workers", "message"),
    [
        (0, r"env_workers \(--env-workers\) must be an integer from 1 .* to 8, got 0"),
        (-2, r"must be an integer from 1 .* to 8, got -2"),
        (64, r"\(--env-workers\) 64 is far beyond this machine's 2 cores: expected 1 to 8"),
        (3, r"\(--env-workers\) 3 does not divide num_envs 16: .* one of \[1, 2, 4, 8\]"),
    ],
)
def test_a_worker_count_the_machine_cannot_take_is_named_with_its_range(workers, message):
    with pytest.raises(ValueError, match=message):
        check_env_workers(workers, num_envs=16, cores=2)


def test_the_default_keeps_native_twins_and_small_machines_in_one_process():
    assert default_env_workers(16, native_twin=True, cores=16) == 1
    assert default_env_workers(16, native_twin=False, cores=2) == 1
    assert default_env_workers(16, native_twin=False, cores=16) == 16
    assert default_env_workers(16, native_twin=False, cores=12) == 8
    assert default_env_workers(50, native_twin=False, cores=8) == 5
    # An env cheaper to step than a worker's round trip stays in the trainer's process.
    assert default_env_workers(16, native_twin=False, cores=16, step_seconds=20e-6) == 1
    assert default_env_workers(16, native_twin=False, cores=16, step_seconds=1.8e-3) == 16


@pytest.mark.parametrize(
    "entry_point",
    ["goalenvs.envs.point_reach:PointReachEnv", PointReachEnv],
    ids=["import-path", "class-of-a-module"],
)
def test_an_id_registered_only_in_this_process_reaches_the_workers(entry_point):
    env_id = "test_workers/PointReachHere-v0"
    gym.register(env_id, entry_point=entry_point, max_episode_steps=5)
    try:
        workers = EnvWorkers(env_id, {}, 2, 2, SAME_STEP)
        alone = make_vector_env(env_id, {}, 2, SAME_STEP)
        try:
            first, _ = workers.reset(seed=4)
            expected, _ = alone.reset(seed=4)
            np.testing.assert_array_equal(first["observation"], expected["observation"])
        finally:
            workers.close()
            alone.close()
    finally:
        gym.registry.pop(env_id)


def test_an_id_whose_class_no_worker_can_import_stays_in_the_trainers_process(
    tmp_path, monkeypatch
):
    # A class defined in a function (or a script's __main__) is found by no fresh process:
    # asked for, worker processes are refused up front with the reason and the flag; left
    # to the plan on a many-core machine, the envs stay in the trainer's process.
    class HereOnly(PointReachEnv):
        pass

    env_id = "test_workers/HereOnly-v0"
    gym.register(env_id, entry_point=HereOnly, max_episode_steps=10)
    try:
        with pytest.raises(ValueError) as caught:
            EnvWorkers(env_id, {}, 4, 2, SAME_STEP)
        message = str(caught.value)
        assert message.startswith(f"{env_id} is registered in this process with entry point ")
        assert "HereOnly, which an env worker process cannot import" in message
        assert message.endswith("with --env-workers 1")
        for module in (plan_module, machine_module):
            monkeypatch.setattr(module, "usable_cores", lambda *args: 4)
        monkeypatch.setattr(plan_module, "measure_step_seconds", lambda env, seed: 2e-3)

        def plan():
            asked = config(tmp_path, env_id=env_id, env_kwargs={})
            return plan_module.make_plan(asked, gym.make(env_id), torch.device("cpu"))

        here = plan()
        assert here.env_workers == 1
        note = next(n for n in here.notes if n.startswith("env workers 1, not 4: "))
        assert "cannot import" in note
        # The same env from an importable class gets the workers.
        gym.registry.pop(env_id)
        gym.register(env_id, entry_point=PointReachEnv, max_episode_steps=10)
        assert plan().env_workers == 4
    finally:
        gym.registry.pop(env_id, None)


def test_a_native_twin_refuses_worker_processes(tmp_path):
    with pytest.raises(ValueError, match=r"PointReach-v0 has a native vector twin, .* expected 1"):
        Trainer(config(tmp_path, env_id="goalenvs/PointReach-v0", env_kwargs={}, env_workers=2))


def test_an_env_that_cannot_be_sent_to_a_worker_names_env_workers_1(tmp_path):
    kwargs = {"max_episode_steps": 10, "reward_fn": lambda *a: 0.0}
    with pytest.raises(ValueError, match=r"cannot be sent to an env worker .* --env-workers 1"):
        EnvWorkers(REACH, kwargs, 4, 2, SAME_STEP)


def test_numpy_envs_fill_a_replay_buffer_on_the_device_and_resume_from_its_file(tmp_path):
    numpy_only = f"{ENVS}:NumpyOnlyReach"
    settings = dict(env_id=numpy_only, replay_device="device", save_buffer=True)
    trainer = Trainer(config(tmp_path, epochs=1, **settings))
    try:
        assert isinstance(trainer.buffer, DeviceHerReplayBuffer)
        assert trainer.buffer.device == torch.device("cpu")
        assert "replay buffer on cpu" in trainer.plan.lines()[-1]
        trainer.run()
        # Every relabeled batch went through the env's numpy-only goal function.
        assert trainer.buffer.n_transitions == 2 * 10 * 4
    finally:
        trainer.close()
    run = Path(trainer.run_folder.path)
    saved = [path.name for path in (run / "checkpoints").glob("epoch_*/buffer_rank0.*")]
    assert saved == ["buffer_rank0.pt"]
    resumed = train(config(tmp_path, epochs=2, resume=str(run), **settings))
    assert [int(r["env_steps"]) for r in progress(run)] == [80, 160]
    assert resumed.epochs == 2


def test_a_host_replay_beside_torch_twins_is_named_as_impossible(tmp_path):
    twin = config(tmp_path, env_id="goalenvs/PointReach-v0", env_kwargs={}, env_device="device")
    with pytest.raises(ValueError, match=r"replay_device \(--replay-device\) 'host': the torch"):
        Trainer(replace(twin, replay_device="host"))


def test_the_eval_pool_takes_the_largest_divisor_of_its_episodes_up_to_the_workers():
    assert eval_env_workers(50, 16) == 10  # FetchPush's 50 eval episodes beside 16 workers
    assert eval_env_workers(4, 2) == 2
    assert eval_env_workers(7, 4) == 1  # a prime count stays in the trainer's process
    assert eval_env_workers(10, 1) == 1


def test_the_eval_pool_is_counted_in_the_plan_said_at_start_and_its_memory_read(tmp_path):
    trainer = Trainer(config(tmp_path, env_workers=2, n_eval_episodes=6))
    try:
        assert (trainer.plan.env_workers, trainer.plan.eval_workers) == (2, 2)
        assert "in 2 worker processes" in trainer.plan.lines()[2]
        assert ", eval envs in 2 more processes, overlap on;" in trainer.plan.lines()[2]
        pids = trainer.collector.worker_pids()
        assert [len(pids["envs"]), len(pids["eval"])] == [2, 2]
        assert len({*pids["envs"], *pids["eval"], os.getpid()}) == 5
        # each worker holds gymnasium, numpy and its envs: tens of MB, not nothing
        assert all(resident_mb(pid) > 5.0 for pid in pids["envs"] + pids["eval"])
    finally:
        trainer.close()
    assert no_worker_left()
    assert resident_mb(pids["eval"][0]) == 0.0  # gone: nothing to read
    alone = Trainer(config(tmp_path / "alone", env_workers=1, n_eval_episodes=6))
    alone.close()
    assert alone.plan.eval_workers == 1 and "eval envs" not in alone.plan.lines()[2]
    assert alone.collector.worker_pids() == {"envs": [], "eval": []}
