"""The package layout: every public import path that worked before the move still works and
names the same object as its new home, and the package keeps its layers."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from goalenvs.her import MOVED

# Old path -> (new path, the public names importable from the old path before the move).
OLD_NAMES = {
    "goalenvs.her.trainer": (
        "goalenvs.train.trainer",
        [
            "Trainer",
            "TrainResult",
            "TrainingError",
            "train",
            "validate_training_env",
            "device_twin_problem",
            "make_vector_env",
            "env_spec",
            "return_range",
            "distributed",
        ],
    ),
    "goalenvs.her.cli": ("goalenvs.train.cli", ["add_arguments", "run", "build_config"]),
    "goalenvs.her.presets": (
        "goalenvs.train.presets",
        ["load_preset", "preset_for", "preset_names", "resolve_config", "PRESET_DIR"],
    ),
    "goalenvs.her.checkpoint": (
        "goalenvs.train.checkpoint",
        [
            "CheckpointError",
            "read_checkpoint",
            "save_checkpoint",
            "atomic_write",
            "atomic_write_file",
            "commit_unit",
            "space_from_dict",
        ],
    ),
    "goalenvs.her.policy": ("goalenvs.train.policy", ["Policy", "load_policy", "make_agent"]),
    "goalenvs.her.curves": ("goalenvs.train.curves", ["plot_curves"]),
    "goalenvs.her.config": (
        "goalenvs.agents",
        [
            "TrainConfig",
            "DDPGConfig",
            "DQNConfig",
            "SACConfig",
            "TD3Config",
            "config_from_dict",
            "STRATEGIES",
            "DEVICES",
            "ENV_DEVICES",
        ],
    ),
    "goalenvs.her.algos": (
        "goalenvs.agents.registry",
        ["ALGOS", "Algo", "get_algo", "algo_for", "check_action_space", "make_agent"],
    ),
    "goalenvs.her.agents": ("goalenvs.agents.base", ["Agent", "BoxAgent", "flat_size"]),
    "goalenvs.her.ddpg": ("goalenvs.agents.ddpg", ["DDPG", "weighted_mean"]),
    "goalenvs.her.dqn": ("goalenvs.agents.dqn", ["DQN"]),
    "goalenvs.her.sac": ("goalenvs.agents.sac", ["SAC"]),
    "goalenvs.her.td3": ("goalenvs.agents.td3", ["TD3"]),
    "goalenvs.her.networks": ("goalenvs.agents.networks", ["Actor", "Critic", "mlp"]),
    "goalenvs.her.normalizer": ("goalenvs.agents.normalizer", ["Normalizer", "GoalNormalizer"]),
    "goalenvs.her.distributed": (
        "goalenvs.agents.distributed",
        ["backend_for", "init_from_env", "average_gradients", "all_reduce_sum", "rank"],
    ),
}

# Names the algorithm files now define, reachable from the old config and algos modules.
NEW_HOMES = {
    ("goalenvs.her.config", "DDPGConfig"): "goalenvs.agents.ddpg",
    ("goalenvs.her.config", "DQNConfig"): "goalenvs.agents.dqn",
    ("goalenvs.her.config", "SACConfig"): "goalenvs.agents.sac",
    ("goalenvs.her.config", "TD3Config"): "goalenvs.agents.td3",
    ("goalenvs.her.config", "TrainConfig"): "goalenvs.agents.config",
    ("goalenvs.her.config", "config_from_dict"): "goalenvs.agents.registry",
    ("goalenvs.her.ddpg", "weighted_mean"): "goalenvs.agents.losses",
}


def test_every_moved_module_is_listed_here():
    assert set(MOVED) == set(OLD_NAMES)


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_import_path_names_the_same_objects_as_the_new_one(old):
    new, names = OLD_NAMES[old]
    old_module = importlib.import_module(old)
    new_module = importlib.import_module(new)
    assert old_module is new_module
    for name in names:
        value = getattr(old_module, name)
        home = NEW_HOMES.get((old, name), new)
        assert value is getattr(importlib.import_module(home), name), (old, name)
        namespace: dict = {}
        exec(f"from {old} import {name} as value", namespace)
        assert namespace["value"] is value


def test_from_her_import_a_moved_module_gives_the_new_module():
    from goalenvs.her import trainer as old_trainer
    from goalenvs.train import trainer as new_trainer

    assert old_trainer is new_trainer


def test_the_package_exports_keep_their_names():
    import goalenvs.her
    from goalenvs.train.checkpoint import CheckpointError
    from goalenvs.train.policy import Policy, load_policy
    from goalenvs.train.trainer import TrainingError, TrainResult, train

    exported = {
        "train": train,
        "TrainResult": TrainResult,
        "TrainingError": TrainingError,
        "load_policy": load_policy,
        "Policy": Policy,
        "CheckpointError": CheckpointError,
    }
    for name, value in exported.items():
        assert getattr(goalenvs.her, name) is value


def test_importing_the_agents_registry_loads_no_torch():
    code = (
        "import sys, goalenvs.agents.registry, goalenvs.her.algos, goalenvs.train; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Names that moved out of goalenvs.her.buffer into the modules both buffers share; the old
# path re-exports them.
MOVED_NAMES = {
    ("goalenvs.her.buffer", "GoalSelectionStrategy"): "goalenvs.her.settings",
    ("goalenvs.her.buffer", "HerBatch"): "goalenvs.her.common",
    ("goalenvs.her", "GoalSelectionStrategy"): "goalenvs.her.settings",
    ("goalenvs.her", "HerBatch"): "goalenvs.her.common",
}


@pytest.mark.parametrize(("old", "name"), sorted(MOVED_NAMES))
def test_a_moved_name_is_the_same_object_at_its_old_path(old, name):
    home = importlib.import_module(MOVED_NAMES[old, name])
    namespace: dict = {}
    exec(f"from {old} import {name} as value", namespace)
    assert namespace["value"] is getattr(home, name)


# goalenvs.play became a package, one module per job; every name the module defined is
# still importable from goalenvs.play and is the object its new home defines.
PLAY_NAMES = {
    "goalenvs.play.screen": ["PlayError", "EpisodeStats", "_Screen", "_render_fps", "_frame"],
    "goalenvs.play.record": ["Recorder", "RECORD_FORMATS", "_check_writable"],
    "goalenvs.play.keyboard": [
        "Command",
        "KeyboardController",
        "RESET",
        "TURN_BASED_POLL_FPS",
        "drive",
        "keyboard_controller",
        "normalize_keys_to_action",
    ],
    "goalenvs.play.watch": [
        "DEFAULT_WATCH_EPISODES",
        "watch",
        "policy_function",
        "_as_space_action",
        "_space_difference",
    ],
    "goalenvs.play": ["add_arguments", "run", "make_env", "_load_policy", "Window"],
}


@pytest.mark.parametrize("home", sorted(PLAY_NAMES))
def test_goalenvs_play_keeps_every_name_it_had(home):
    import goalenvs.play

    module = importlib.import_module(home)
    for name in PLAY_NAMES[home]:
        namespace: dict = {}
        exec(f"from goalenvs.play import {name} as value", namespace)
        assert namespace["value"] is getattr(module, name) is getattr(goalenvs.play, name)


# goalenvs.core became a package and the wrappers moved into goalenvs.wrappers: the old
# top-level modules are aliases of their new homes.
CORE_OLD_NAMES = {
    "goalenvs.devices": (
        "goalenvs.core.backend",
        [
            "InfoLike",
            "is_tensor",
            "torch_goal_arrays",
            "constant_like",
            "check_tensor_actions",
            "resolve_device",
            "torch_dtype",
            "info_tensor",
            "clear_points",
            "info_values",
        ],
    ),
    "goalenvs.atomic": (
        "goalenvs.core.io",
        ["atomic_write", "atomic_write_file", "temporary_name", "fsync_dir", "_TMP_SUFFIX"],
    ),
    "goalenvs.crash_penalty": (
        "goalenvs.wrappers.crash_penalty",
        ["CrashPenaltyInReward", "PARKING_CRASH_ID", "make_parking_crash"],
    ),
    "goalenvs.torch_envs": ("goalenvs.wrappers.torch_envs", ["sub_env_view", "SubEnvView"]),
}

# Every name goalenvs.core exported before it became a package, and its new home.
CORE_NAMES = {
    "GOAL_KEYS": "goalenvs.core.contract",
    "GoalEnv": "goalenvs.core.contract",
    "goal_arrays": "goalenvs.core.contract",
    "goal_batch": "goalenvs.core.contract",
    "goal_dict_space": "goalenvs.core.contract",
    "GoalVectorEnv": "goalenvs.core.vector",
    "parse_json_object": "goalenvs.core.validate",
    "check_choice": "goalenvs.core.validate",
    "check_positive": "goalenvs.core.validate",
    "check_action": "goalenvs.core.validate",
    "check_actions": "goalenvs.core.validate",
    "check_goal_option": "goalenvs.core.validate",
    "parse_autoreset_mode": "goalenvs.core.validate",
    "command_name": "goalenvs.core.io",
    "InfoLike": "goalenvs.core.backend",
    "check_tensor_actions": "goalenvs.core.backend",
    "info_values": "goalenvs.core.backend",
    "is_tensor": "goalenvs.core.backend",
    "resolve_device": "goalenvs.core.backend",
    "torch_dtype": "goalenvs.core.backend",
    "torch_goal_arrays": "goalenvs.core.backend",
}


def test_every_moved_core_module_is_listed_here():
    from goalenvs.core import MOVED as CORE_MOVED

    assert {old: new for old, (new, _) in CORE_OLD_NAMES.items()} == CORE_MOVED


@pytest.mark.parametrize("old", sorted(CORE_OLD_NAMES))
def test_old_core_module_path_is_the_new_module(old):
    new, names = CORE_OLD_NAMES[old]
    old_module = importlib.import_module(old)
    new_module = importlib.import_module(new)
    assert old_module is new_module
    for name in names:
        namespace: dict = {}
        exec(f"from {old} import {name} as value", namespace)
        assert namespace["value"] is getattr(new_module, name), (old, name)


@pytest.mark.parametrize("old", sorted(CORE_OLD_NAMES))
def test_old_core_module_path_imports_in_a_fresh_interpreter(old):
    new = CORE_OLD_NAMES[old][0]
    code = f"import {old}, {new}, sys; print(sys.modules['{old}'] is {new})"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


@pytest.mark.parametrize("name", sorted(CORE_NAMES))
def test_goalenvs_core_keeps_every_name(name):
    import goalenvs.core

    home = importlib.import_module(CORE_NAMES[name])
    assert getattr(goalenvs.core, name) is getattr(home, name)
