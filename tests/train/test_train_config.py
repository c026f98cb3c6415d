"""Config dataclasses and the normalizer."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import zipfile
from importlib.resources import files
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from gymnasium import spaces

import goalenvs
from goalenvs.agents.base import Agent
from goalenvs.agents.config import options, value_type
from goalenvs.agents.ddpg import DDPG, DDPGConfig
from goalenvs.agents.dqn import DQNConfig
from goalenvs.agents.normalizer import Normalizer
from goalenvs.agents.registry import ALGOS, Algo, algo_for, config_from_dict, make_agent
from goalenvs.agents.sac import SACConfig
from goalenvs.agents.td3 import TD3Config
from goalenvs.cli import build_parser, main
from goalenvs.core import GOAL_KEYS
from goalenvs.demo import parking_config, point_reach_config
from goalenvs.train import presets
from goalenvs.train.cli import option_table, with_option_table
from goalenvs.train.policy import load_policy
from goalenvs.train.presets import load_preset, preset_for, preset_names, resolve_config
from goalenvs.train.trainer import Trainer, train
from tests.console import refused


@pytest.mark.parametrize("cls", [DDPGConfig, DQNConfig, SACConfig, TD3Config])
def test_every_config_field_carries_its_help(cls):
    found = options(cls)
    assert list(found) == [f.name for f in dataclasses.fields(cls)]
    for name, (_, option) in found.items():
        assert option.help.strip() and "\n" not in option.help, name
    # a field declared again with a plain default keeps its base's help and check
    assert options(DQNConfig)["batch_size"][1] == options(DDPGConfig)["batch_size"][1]


@pytest.mark.parametrize("cls", [DDPGConfig, DQNConfig, SACConfig, TD3Config])
def test_config_round_trips_through_json(cls):
    config = cls(env_kwargs={"n_bits": 5}, hidden_sizes=(8, 4), info_keys=("crashed",), seed=7)
    again = config_from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config and type(again) is cls


def test_baselines_defaults():
    ddpg = DDPGConfig()
    assert (ddpg.precision, ddpg.device, ddpg.env_device) == ("auto", "auto", "auto")
    assert ddpg.hidden_sizes == (256, 256, 256) and ddpg.batch_size == 256
    assert (ddpg.actor_lr, ddpg.critic_lr, ddpg.polyak, ddpg.action_l2) == (1e-3, 1e-3, 0.95, 1.0)
    assert (ddpg.random_eps, ddpg.noise_eps, ddpg.n_sampled_goal) == (0.3, 0.2, 4)
    assert (ddpg.norm_clip, ddpg.clip_return, ddpg.n_cycles, ddpg.n_batches) == (5.0, True, 50, 40)


# Every bad value is refused in one line naming the field, the value and what was expected.
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"goal_selection_strategy": "past"}, ValueError, "goal_selection_strategy='past' is not"),
        ({"device": "tpu"}, ValueError, "device='tpu' is not valid"),
        ({"env_device": "gpu"}, ValueError, "env_device='gpu' is not valid; expected one of"),
        ({"replay_device": "gpu"}, ValueError, "replay_device='gpu' is not valid"),
        ({"precision": "fp16"}, ValueError, "precision='fp16' is not valid; expected one of"),
        ({"polyak": 1.5}, ValueError, "polyak must be in"),
        ({"gamma": 1.0}, ValueError, "gamma must be in"),
        ({"n_sampled_goal": -1}, ValueError, "n_sampled_goal must be >= 0"),
        ({"batch_size": 0}, ValueError, "batch_size must be > 0"),
        ({"random_eps": 2.0}, ValueError, "random_eps must be in"),
        ({"hidden_sizes": ()}, ValueError, "hidden_sizes must be"),
        ({"layer_norm": "yes"}, ValueError, "layer_norm must be True or False, got 'yes'"),
        *(
            ({name: value}, ValueError, rf"{name} must be in \[0, 1\], got {value}")
            for name in ("priority_alpha", "priority_beta")
            for value in (-0.1, 1.5)
        ),
        *(
            ({"priority_eps": value}, ValueError, f"priority_eps must be > 0.0, got {value}")
            for value in (0.0, -0.01, float("nan"))
        ),
        ({"priority_eps": "0.01"}, TypeError, r"priority_eps must be a number, got '0.01' \(str\)"),
        *(
            ({"policy_average": v}, ValueError, rf"policy_average must be in \[0, 1\), got {v}")
            for v in (1.0, -0.1)
        ),
        (
            {"policy_average": "0.9"},
            TypeError,
            r"policy_average must be a float in \[0, 1\), got '0.9'",
        ),
        ({"initial_alpha": 0.0}, ValueError, "initial_alpha"),
        ({"alpha_lr": -1.0}, ValueError, "alpha_lr"),
        ({"target_entropy": float("nan")}, ValueError, "target_entropy"),
        ({"policy_delay": 0}, ValueError, "policy_delay"),
        ({"target_noise": -0.1}, ValueError, "target_noise"),
        ({"target_noise_clip": -1.0}, ValueError, "target_noise_clip"),
    ],
)
def test_bad_config_values_name_the_field(kwargs, error, message):
    # the first config that has the field: DDPG's, else SAC's or TD3's own
    cls = next(c for c in (DDPGConfig, SACConfig, TD3Config) if set(kwargs) <= set(options(c)))
    with pytest.raises(error, match=message):
        cls(**kwargs)


def test_config_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match=r"unknown DQNConfig fields \['actor_lr'\]"):
        config_from_dict({"algo": "dqn", "actor_lr": 0.1})


def test_a_retired_setting_loads_at_its_idle_value_and_is_refused_at_any_other():
    recorded = {**DDPGConfig(seed=3).to_dict(), "lr_decay_to": 1.0, "target_update_every": 0}
    assert config_from_dict(recorded) == DDPGConfig(seed=3)  # an older run's config.json
    with pytest.raises(
        ValueError, match=r"^lr_decay_to 0.2: goalenvs no longer has this setting.*commit 41a2076"
    ):
        config_from_dict({**recorded, "lr_decay_to": 0.2})


def test_normalizer_matches_numpy_statistics_and_clips():
    rng = np.random.default_rng(0)
    data = rng.normal([3.0, -1.0, 0.0], [2.0, 0.5, 0.0], size=(1000, 3))
    norm = Normalizer(3, eps=0.01, clip=5.0)
    norm.update(data[:400])
    norm.update(data[400:])
    norm.recompute()
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5, atol=1e-6)
    expected_std = np.maximum(data.std(0), 0.01)  # a constant column gets the floor
    np.testing.assert_allclose(norm.std.numpy(), expected_std, rtol=1e-4)
    x = torch.tensor([[3.0 + 2.0 * 100, -1.0, 0.02]])
    out = norm(x).numpy()[0]
    assert out[0] == 5.0 and abs(out[1]) < 0.1 and out[2] == pytest.approx(2.0, rel=1e-3)
    norm.update(data[:1])
    norm.recompute()
    assert float(norm.count[0]) == 1001


def test_the_info_the_reward_reads_is_stored_and_parking_caps_its_crash_target(tmp_path):
    reach = DDPGConfig(env_id="goalenvs/PointReach-v0", info_keys=(), out=str(tmp_path / "r"))
    reach = Trainer(dataclasses.replace(reach, verbose=False))
    assert reach.plan.info_keys == ()
    reach.close()
    config = parking_config(seed=3, epochs=1, out=str(tmp_path / "run"), verbose=False)
    assert (config.env_id, config.seed, config.epochs) == ("goalenvs/Parking-v0", 3, 1)
    trainer = Trainer(config)
    try:
        # Relabeled rewards need info["crashed"] (its collision penalty reads it); at gamma
        # 0.95 a crash's target (-51, a terminal step) is clipped to -20, the lowest value
        # any state can have.
        assert trainer.plan.info_keys == trainer.buffer.info_keys == ("crashed",)
        assert trainer.plan.gamma == 0.95
        targets = trainer.agent.targets(
            torch.tensor([-51.0, -1.0]), torch.tensor([1.0, 0.0]), torch.tensor([0.0, -30.0])
        )
        assert targets.tolist() == pytest.approx([-20.0, -20.0])
    finally:
        trainer.close()


# --------------------------------------------------------------------------- algorithm registry


def test_every_registered_algo_names_its_config_agent_and_losses():
    losses = {
        "ddpg": ("critic_loss", "actor_loss", "q_mean"),
        "dqn": ("q_loss", "q_mean"),
        "sac": ("critic_loss", "actor_loss", "alpha", "q_mean"),
        "td3": ("critic_loss", "actor_loss", "q_mean"),
    }
    assert list(ALGOS) == list(losses)  # more are one entry each
    for name, algo in ALGOS.items():
        assert algo.name == name and algo.config_class().algo == name
        assert algo.agent_class().__name__ == name.upper() and issubclass(algo.agent_class(), Agent)
        assert algo.loss_names == losses[name]
        assert algo.fits(spaces.Discrete(3) if name == "dqn" else spaces.Box(-1, 1, (2,)))


@pytest.mark.parametrize("data", [{"algo": "ppo"}, {"algo": None}, {}, {"algo": "DDPG"}])
def test_an_unknown_algo_is_an_error_listing_the_registered_ones(data):
    registered = r"is not a registered algorithm; .*\['ddpg', 'dqn', 'sac', 'td3'\]"
    with pytest.raises(ValueError, match=rf"algo={data.get('algo')!r} {registered}"):
        config_from_dict(data)


def test_algo_for_picks_by_action_space_and_names_what_is_missing():
    assert algo_for(spaces.Box(-1, 1, (2,))) == "ddpg"
    assert algo_for(spaces.Discrete(3)) == "dqn"
    with pytest.raises(ValueError, match=r"no registered HER algorithm .*\['box', 'discrete'\]"):
        algo_for(spaces.MultiBinary(3))
    obs = spaces.Dict({k: spaces.Box(-1, 1, (2,)) for k in GOAL_KEYS})
    agent = make_agent(DQNConfig(hidden_sizes=(4,)), obs, spaces.Discrete(3), 0.9)
    assert type(agent).__name__ == "DQN"


def test_registering_an_algorithm_is_one_entry(tmp_path, monkeypatch):
    """A new entry trains, logs its own losses, and its checkpoint loads, with no other edit."""

    @dataclasses.dataclass
    class LoudConfig(DDPGConfig):
        algo: ClassVar[str] = "loud"

    class Loud(DDPG):
        loss_names: ClassVar[tuple[str, ...]] = ("critic_loss", "actor_loss", "q_mean", "noise")

        def update(self, batch):
            return {**super().update(batch), "noise": torch.tensor(7.0)}

    monkeypatch.setitem(ALGOS, "loud", Algo("loud", LoudConfig, Loud, "box"))
    config = LoudConfig(
        env_id="goalenvs/PointReach-v0", epochs=1, n_cycles=2, n_batches=2, batch_size=8,
        hidden_sizes=(8,), n_eval_episodes=2, out=str(tmp_path / "r"),
        verbose=False,
    )  # fmt: skip
    result = train(config)
    header, row = (tmp_path / "r" / "progress.csv").read_text().splitlines()
    assert "eval_length,critic_loss,actor_loss,q_mean,noise,time_env" in header
    logged = dict(zip(header.split(","), row.split(","), strict=True))
    assert float(logged["noise"]) == 7.0 and result.history[0]["noise"] == 7.0
    policy = load_policy(result.latest_policy)
    assert policy.algo == "loud" and isinstance(policy.agent, Loud)
    assert config_from_dict(config.to_dict()) == config


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize(
    ("env_id", "preset"),
    [
        ("goalenvs/PointReach-v0", "point_reach"),
        ("goalenvs/PointReachDense-v0", "point_reach"),
        ("goalenvs/Parking-v0", "parking"),  # not highway's parking-v0: ids match by case
        ("gymnasium_robotics:FetchReach-v4", "fetch_reach"),
        ("FetchReach-v4", "fetch_reach"),
        ("gymnasium_robotics:FetchPush-v4", "fetch_push"),
        ("FetchPickAndPlace-v4", "fetch_pick_and_place"),
        ("FetchSlide-v4", "fetch_slide"),
        ("goalenvs/BitFlipping-v0", "baselines"),
        ("goalenvs/ParkingDense-v0", "baselines"),
        ("goalenvs/PointMaze-v0", "point_maze"),
        ("goalenvs/PointMazeLargeDense-v0", "point_maze"),
        ("goalenvs/Push-v0", "push"),
        ("goalenvs/PushDense-v0", "push"),
        ("highway_env:parking-v0", "highway"),
        ("parking-v0", "highway"),
        ("goalenvs.wrappers.crash_penalty:parking-crash-v0", "highway"),
        ("panda_gym:PandaReach-v3", "panda"),
        ("PandaPush-v3", "panda_push"),
        ("panda_gym:PandaPickAndPlaceDense-v3", "panda_push"),
        ("panda_gym:PandaReachDense-v3", "panda"),
        ("highway_env:highway-v0", "one_cpu"),  # no preset of its own: the CPU default
    ],
)
def test_the_preset_is_chosen_by_env_id(env_id, preset):
    assert preset_for(env_id) == preset
    # Every shipped preset builds a valid config for the ids it claims.
    algo = "dqn" if env_id == "goalenvs/BitFlipping-v0" else "ddpg"
    assert resolve_config(env_id, algo=algo).env_id == env_id


def test_baselines_preset_is_the_dataclass_defaults_and_the_demo_reads_presets():
    assert {"baselines", "point_reach", "parking", "fetch_reach"} <= set(preset_names())
    assert resolve_config("goalenvs/PointReach-v0", "baselines", "ddpg") == DDPGConfig()
    assert resolve_config("goalenvs/BitFlipping-v0", "baselines", "dqn") == DQNConfig(
        env_id="goalenvs/BitFlipping-v0"
    )
    tuned = point_reach_config(seed=4, device="cpu")
    assert (tuned.n_cycles, tuned.num_envs, tuned.rollout_steps, tuned.polyak) == (20, 8, 5, 0.8)
    assert tuned.seed == 4 and tuned.env_id == "goalenvs/PointReach-v0"
    parking = parking_config(env_id="goalenvs/ParkingCrowded-v0")
    assert parking.hidden_sizes == (128, 128, 128) and parking.clip_range == (-20.0, 0.0)
    assert parking.env_id == "goalenvs/ParkingCrowded-v0" and parking.batch_size == 1024


def test_preset_errors_name_the_presets_and_the_fields(tmp_path):
    with pytest.raises(
        ValueError, match=r"preset='fast' is not a preset; expected one of \[.*'baselines'"
    ):
        load_preset("fast")
    bad = tmp_path / "mine.toml"
    bad.write_text('algo = "ddpg"\n[config]\nepochs = 3\nlearning_rate = 0.1\n')
    with pytest.raises(
        ValueError,
        match=r"sets \['learning_rate'\], not fields of DDPGConfig.*valid fields: \[.*'actor_lr'",
    ):
        resolve_config("goalenvs/PointReach-v0", str(bad))
    bad.write_text("[config]\nepochs = 3\n")
    config = resolve_config("goalenvs/PointReach-v0", str(bad), "ddpg", seed=2)
    assert (config.epochs, config.seed) == (3, 2)
    with pytest.raises(ValueError, match="no such file"):
        load_preset(str(tmp_path / "missing.toml"))
    # a value the file gives wrong is named with the preset; an override's, alone
    bad.write_text('algo = "ddpg"\n[config]\nn_step = 0\n')
    with pytest.raises(ValueError, match=r"^preset 'mine': n_step must be >= 1, got 0$"):
        resolve_config("goalenvs/PointReach-v0", str(bad))
    with pytest.raises(ValueError, match=r"^n_step must be >= 1, got -1$"):
        resolve_config("goalenvs/PointReach-v0", str(bad), n_step=-1)


def test_cli_uses_the_env_preset_flags_override_and_show_config_prints_it(capsys):
    argv = ["train", "--show-config", "goalenvs/PointReach-v0", "--device", "cpu"]
    assert main([*argv, "--seed", "5"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["n_cycles"], shown["rollout_steps"], shown["seed"]) == (20, 5, 5)
    argv = ["train", "--show-config", "goalenvs/PointReach-v0", "--preset", "baselines"]
    assert main([*argv, "--cycles", "7"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["n_cycles"], shown["rollout_steps"], shown["num_envs"]) == (7, None, 2)
    assert main(["train", "goalenvs/PointReach-v0", "--preset", "nope", "--quiet"]) == 2
    assert "preset='nope' is not a preset; expected one of" in capsys.readouterr().err


@pytest.mark.slow
def test_presets_ship_as_package_data(tmp_path):
    # Builds the wheel from a copy of the sources (the build writes build/ beside them)
    # and looks for every preset file of the presets package inside it.
    root = Path(goalenvs.__file__).resolve().parent.parent
    source = tmp_path / "src"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root / "goalenvs", source / "goalenvs", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    built = subprocess.run(
        [*command, "-q", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("goalenvs-*.whl")
    package = presets.__name__.replace(".", "/")
    expected = {f"{package}/{p.name}" for p in files(presets).iterdir() if p.name.endswith(".toml")}
    assert {"point_reach", "parking", "fetch_push"} <= {Path(p).stem for p in expected}
    shipped = set(zipfile.ZipFile(wheel).namelist())
    assert expected <= shipped, sorted(expected - shipped)


# The highway and panda presets' schedules (the table above holds the ids they serve).
def test_highway_and_panda_presets_resolve_to_their_schedules():
    highway = resolve_config("highway_env:parking-v0")
    assert (highway.n_batches, highway.batch_size, highway.gamma) == (20, 512, 0.95)
    assert highway.clip_range == (-20.0, 0.0) and highway.hidden_sizes == (128, 128, 128)
    panda = resolve_config("panda_gym:PandaReach-v3", seed=3)
    schedule = (panda.num_envs, panda.rollout_steps, panda.n_batches, panda.batch_size)
    assert schedule == (8, 5, 10, 512)
    assert panda.gamma is None and panda.seed == 3 and panda.algo == "ddpg"


@pytest.mark.parametrize("env_id", ["gymnasium_robotics:FetchPush-v4", "panda_gym:PandaPush-v3"])
def test_push_presets_fold_the_multi_worker_data_ratio_into_one_process(env_id):
    config = resolve_config(env_id, device="cpu")
    per_cycle = config.num_envs * config.rollout_steps
    assert (config.num_envs, config.rollout_steps) == (16, 50) and per_cycle == 800
    assert (config.n_batches, config.batch_size, config.hidden_sizes) == (40, 2048, (256,) * 3)
    # About 100 sampled transitions per env step, as 8-19 baselines workers summing
    # gradients.
    assert config.n_batches * config.batch_size / per_cycle == pytest.approx(102.4)
    assert config.torch_threads == 2 and config.n_eval_episodes >= 50


def test_another_algo_keeps_the_env_presets_schedule_without_its_algo_knobs():
    sac = resolve_config("goalenvs/Parking-v0", algo="sac")
    # The parking schedule carries over (gamma, batch size, nets, return range) ...
    assert (sac.gamma, sac.batch_size, sac.hidden_sizes) == (0.95, 1024, (128, 128, 128))
    assert sac.clip_range == (-20.0, 0.0)
    # ... DDPG's exploration and action penalty, which SAC has not, do not.
    assert not hasattr(sac, "action_l2") and not hasattr(sac, "noise_eps")
    td3 = resolve_config("goalenvs/Parking-v0", algo="td3")  # TD3 has DDPG's knobs: kept
    assert (td3.action_l2, td3.noise_eps, td3.random_eps) == (0.1, 0.1, 0.2)


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"batch_size": 2048}, r"batch_size 2048 is larger than the replay buffer "),
        (
            {"batch_size": 64, "num_envs": 64},
            r"buffer_size 1000 gives each of the num_envs 64 envs 15 rows, fewer than one "
            r"episode of 50 steps takes \(51\).* at least 3264 or lower num_envs",
        ),
    ],
)
def test_a_buffer_too_small_for_a_batch_or_an_episode_per_env_is_named(tmp_path, sizes, message):
    config = DDPGConfig(
        env_id="goalenvs/PointReach-v0", buffer_size=1000, device="cpu",
        out=str(tmp_path / "run"), verbose=False, **sizes,
    )  # fmt: skip
    with pytest.raises(ValueError, match=message):
        Trainer(config)


def test_a_file_env_records_its_absolute_path_and_keeps_it_from_another_folder(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    config = DDPGConfig(env_id="envs/reach.py:Reach")
    recorded = str(tmp_path.resolve() / "envs" / "reach.py")
    assert config.env_file == recorded
    assert DDPGConfig(env_id="goalenvs/PointReach-v0").env_file is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = config_from_dict(json.loads(json.dumps(config.to_dict())))  # a resumed config.json
    assert again.env_file == recorded and again == config
    # Another env spec is recorded anew, not given the old file.
    other = dataclasses.replace(config, env_id="other.py:Reach")
    assert other.env_file == str(elsewhere.resolve() / "other.py")
    assert dataclasses.replace(config, env_id="goalenvs/PointReach-v0").env_file is None


# --------------------------------------------------------------------------- options


def test_the_training_docs_option_table_is_written_from_the_config_fields():
    text = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert with_option_table(text) == text, "rebuild it: goalenvs.train.cli.with_option_table"
    table = option_table()
    assert "| `n_step` | `--n-step` | `1` | all | kept |" in table
    assert "| `actor_lr` | `--actor-lr` | `0.001` | ddpg, sac, td3 |  |" in table
    assert "| `batch_size` | `--batch-size` | `256` (dqn: `128`) | all |" in table
    assert "| `n_cycles` | `--n-cycles`, `--cycles` | `50` |" in table


def test_every_number_or_choice_field_has_a_flag_under_its_own_name():
    parser = build_parser("train")
    train = parser._subparsers._group_actions[0].choices["train"]
    flags = set(train._option_string_actions)
    for algo in ALGOS.values():
        for name, (f, option) in options(algo.config_class()).items():
            if value_type(f) in ("int", "float") or option.choices:
                assert "--" + name.replace("_", "-") in flags, name
    args = parser.parse_args(["train", "--actor-lr", "0.01", "--cycles", "3", "--quiet"])
    assert (args.actor_lr, args.n_cycles, args.verbose) == (0.01, 3, False)


def test_a_flag_of_another_algorithms_field_is_refused_naming_the_algorithms(capsys):
    argv = ["train", "goalenvs/BitFlipping-v0", "--env-kwargs", '{"n_bits": 3}', "--show-config"]
    assert refused(capsys, *argv, "--actor-lr", "0.01") == (
        "goalenvs train: error: --actor-lr 0.01: the dqn algorithm has no actor_lr (a setting "
        "of ddpg, sac, td3; choose one with --algo)\n"
    )
    assert main([*argv, "--learning-rate", "0.01"]) == 0
    assert json.loads(capsys.readouterr().out)["learning_rate"] == 0.01


@pytest.mark.parametrize(
    ("flag", "meant"),
    [
        ("--lr", "did you mean --actor-lr, --critic-lr or --alpha-lr?"),
        ("--epoch", "did you mean --epochs?"),
        ("--kwargs", "did you mean --env-kwargs?"),
        ("--zzz", "(goalenvs train --help lists them)"),
    ],
)
def test_an_unknown_flag_gets_the_flags_meant_in_one_line(flag, meant, capsys):
    with pytest.raises(SystemExit) as info:
        main(["train", "goalenvs/PointReach-v0", flag, "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"goalenvs train: error: unrecognized arguments: {flag} 1"
        + ("; " if "did" in meant else " ")
        + meant
    ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--n-step", "0"], "--n-step 0: n_step must be >= 1, got 0"),
        (["--cycles", "0"], "--cycles 0: n_cycles must be > 0.0, got 0"),
        (["--gamma", "1"], "--gamma 1.0: gamma must be in (0, 1) or None, got 1.0"),
    ],
)
def test_a_value_the_config_refuses_is_named_by_its_flag(flags, message, capsys):
    err = refused(capsys, "train", "goalenvs/PointReach-v0", *flags, "--show-config")
    assert err == f"goalenvs train: error: {message}\n"
