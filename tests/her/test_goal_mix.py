"""Relabelling mixes (goalenvs.her.goal_mix) in the one HER buffer, with prioritized
replay, in saved files, and in the training config, presets and command line (a bad mix
is refused as every bad setting is: test_buffer_backends.py; the stable-baselines3
adapter takes one: test_her_sb3.py).

The buffers hold the tagged transitions of model.py: env ``e``, episode ``m``, step ``i``
carries ``(e, m, i)`` in its observation and achieved goal, and its episode's desired goal
is ``(-1, e, m)``. So a sampled goal says where it came from: its own episode's desired
goal (original), another episode's desired goal (desired), or the next achieved goal
``(e', m', j)`` of some transition.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from goalenvs.agents.ddpg import DDPGConfig
from goalenvs.agents.registry import config_from_dict
from goalenvs.cli import main
from goalenvs.her import GoalMix
from goalenvs.her.goal_mix import COMPONENTS
from tests.her.model import DEVICES, Model, check_batch, feed, make, tagged, to_numpy

torch.set_num_threads(1)

BACKENDS = [None, "cpu"]
N = 100_000  # sampled transitions per fraction test
Z = 4.5  # a fraction off by more than 4.5 standard deviations fails (about 7e-6 per check)
FUTURELIKE = ("future", "final", "episode", "achieved")
# Episode lengths per env (cycled): varied, so that the in-episode draws and the skipping
# of the own episode are exercised on episodes of every size.
LENGTHS = [[5, 7, 3, 9, 4, 6], [8, 2, 6, 5], [4, 9, 3, 7, 5]]


def filled(device: Any, mix: Any, steps: int = 100, **kwargs: Any) -> tuple[Any, Model]:
    """A 3-env buffer of 3 x 60 rows holding tagged episodes; ``steps`` adds wrap the
    ring, so the oldest episodes have been retired."""
    return tagged(device, 3 * 60, LENGTHS, steps, goal_mix=mix, seed=5, **kwargs)


def intact_lengths(model: Model) -> np.ndarray:
    """``L[e, m]``: the length of env e's episode m when it is complete and intact, else 0."""
    live = model.live()
    table = np.zeros((model.n, max(m for _, m in live) + 2), np.int64)
    for (e, m), ep in live.items():
        table[e, m] = ep.length
    return table


def sources_of(batch: Any, model: Model, mix: GoalMix) -> dict[str, np.ndarray]:
    """Which transitions of ``batch`` took their goal from which source (check_batch
    asserts the provenance of each; the mix has at most one of future, final, episode and
    achieved: their goals are all achieved goals)."""
    futurelike = [name for name in FUTURELIKE if getattr(mix, name) > 0]
    assert len(futurelike) <= 1
    relabeled = check_batch(batch, model, mix.sources)
    desired = relabeled & (to_numpy(batch.observations["desired_goal"])[:, 0] == -1)
    found = {"original": ~relabeled, "desired": desired}
    found.update({name: relabeled & ~desired for name in futurelike})
    for name, chosen in found.items():
        if getattr(mix, name) == 0:
            assert not chosen.any(), f"{name} goals from a mix without them"
    return {name: chosen for name, chosen in found.items() if getattr(mix, name) > 0}


def assert_fractions(sources: dict[str, np.ndarray], mix: GoalMix) -> None:
    """Each source's share of the batch within Z binomial standard deviations of its
    fraction."""
    for name, chosen in sources.items():
        p, n = getattr(mix, name), chosen.size
        sigma = np.sqrt(p * (1 - p) / n)
        assert abs(chosen.mean() - p) <= Z * sigma + 1e-12, (name, chosen.mean(), p)


MIXES = [
    GoalMix(future=0.4, desired=0.4, original=0.2),  # mrl's futureactual
    GoalMix(final=0.25, desired=0.5, original=0.25),
    GoalMix(episode=0.6, desired=0.1, original=0.3),
    GoalMix(achieved=0.2, desired=0.2, original=0.6),
    GoalMix(future=0.8, original=0.2),  # what future k=4 is
]


@pytest.mark.parametrize("mix", MIXES, ids=str)
@pytest.mark.parametrize("device", DEVICES)
def test_each_fraction_of_100k_samples_holds_to_its_binomial_interval(
    device: Any, mix: GoalMix
) -> None:
    buffer, model = filled(device, mix)
    sources = sources_of(buffer.sample(N), model, mix)
    assert set(sources) == {name for name in COMPONENTS if getattr(mix, name) > 0}
    assert_fractions(sources, mix)


@pytest.mark.parametrize("device", BACKENDS)
def test_other_episodes_desired_goals_are_drawn_uniformly_over_their_transitions(
    device: Any,
) -> None:
    # Given its own episode X, a desired goal comes from episode Y != X with probability
    # length(Y) / (transitions - length(X)): the draw skips X and nothing else.
    mix = GoalMix(desired=1.0)
    buffer, model = filled(device, mix)
    batch = buffer.sample(N)
    sources_of(batch, model, mix)
    lengths = intact_lengths(model)
    total = lengths.sum()
    tags = to_numpy(batch.observations["observation"]).astype(np.int64)
    goal = to_numpy(batch.observations["desired_goal"]).astype(np.int64)
    own = (tags[:, 0], tags[:, 1])
    drawn = np.zeros_like(lengths)
    np.add.at(drawn, (goal[:, 1], goal[:, 2]), 1)
    own_length = lengths[own]
    for e, m in zip(*np.nonzero(lengths), strict=True):
        p = np.where((own[0] == e) & (own[1] == m), 0.0, lengths[e, m] / (total - own_length))
        expected, sigma = p.sum(), np.sqrt((p * (1 - p)).sum())
        assert abs(drawn[e, m] - expected) <= Z * sigma, ((e, m), drawn[e, m], expected)
    assert drawn[lengths == 0].sum() == 0


@pytest.mark.parametrize("device", DEVICES)
def test_during_the_warm_up_every_goal_is_a_future_one(device: Any) -> None:
    mix = GoalMix(desired=0.5, original=0.5)
    # 2 envs: the warm-up of 30 env steps ends with the 15th add.
    buffer, model = tagged(device, 2 * 40, [[4], [3]], 14, goal_mix=mix, goal_mix_warmup=30, seed=1)
    sources = sources_of(buffer.sample(5000), model, GoalMix(future=1.0))
    assert sources["future"].all()
    feed([buffer], model)
    sources = sources_of(buffer.sample(5000), model, mix)
    assert "future" not in sources
    assert_fractions(sources, mix)


@pytest.mark.parametrize("device", DEVICES)
def test_a_desired_draw_needs_a_second_intact_episode(device: Any) -> None:
    mix = GoalMix(future=0.5, desired=0.5)
    message = (
        r"goal_mix desired=0\.5 draws the desired goals of other episodes, but the buffer "
        r"holds a single complete episode \(6 transitions\)"
    )
    # One env, 10 rows: an episode of 6 fits, but the second one retires the first.
    buffer, model = tagged(device, 10, [[6]], 6, goal_mix=mix, seed=0)
    assert not buffer.can_sample()  # a trainer waits instead of failing
    with pytest.raises(RuntimeError, match=message):
        buffer.sample(8)
    feed([buffer], model, 6)
    assert len(model.live()) == 1
    assert not buffer.can_sample()
    with pytest.raises(RuntimeError, match=message):
        buffer.sample(8)
    # (Once two episodes are held, in one env or two, it draws: test_buffer_model.py.)
    # A warm-up leaves the draw unused: no error with one episode stored.
    warm, model = tagged(device, 20, [[6]], 6, goal_mix=mix, goal_mix_warmup=12, seed=0)
    assert warm.can_sample()
    assert sources_of(warm.sample(500), model, GoalMix(future=1.0))["future"].all()


@pytest.mark.parametrize("device", BACKENDS)
def test_prioritized_replay_draws_goals_from_the_mix(device: Any) -> None:
    mix = GoalMix(future=0.4, desired=0.4, original=0.2)
    buffer, model = filled(device, mix, prioritized=True)
    batch = buffer.sample(N)
    assert_fractions(sources_of(batch, model, mix), mix)
    # Skewed priorities change which transitions are drawn, not where their goals come from.
    indices = to_numpy(batch.indices)[:2000]
    buffer.update_priorities(indices, np.linspace(0.0, 50.0, indices.size))
    skewed = buffer.sample(N)
    assert not np.allclose(to_numpy(skewed.weights), 1.0)
    skewed = skewed._replace(weights=np.ones(N, np.float32))
    assert_fractions(sources_of(skewed, model, mix), mix)


@pytest.mark.parametrize("device", BACKENDS)
def test_a_strategy_is_its_mix_a_file_without_one_samples_by_it_and_a_mix_is_ordered(
    device: Any,
) -> None:
    buffer = make(device, 60, goal_selection_strategy="final", n_sampled_goal=3)
    assert buffer.goal_mix == GoalMix(final=0.75, original=0.25)
    assert buffer.her_ratio == 0.75
    meta = buffer.settings.to_meta()
    assert meta["goal_mix"] is None and meta["goal_mix_warmup"] == 0
    del meta["goal_mix"], meta["goal_mix_warmup"]  # as files written before goal mixes
    settings = type(buffer.settings).from_meta(meta)
    assert settings.relabel_mix == GoalMix(final=0.75, original=0.25)
    assert settings.goal_selection_strategy.value == "final"
    random = make(device, 60, goal_selection_strategy="random", n_sampled_goal=1)
    assert random.goal_mix == GoalMix(achieved=0.5, original=0.5)
    assert GoalMix.from_strategy("future", 4) == GoalMix(future=0.8, original=0.2)
    assert GoalMix.from_strategy("episode", 0) == GoalMix(original=1.0)
    # A mix covers every component, in order.
    assert COMPONENTS == ("future", "final", "episode", "achieved", "desired", "original")
    mix = GoalMix.parse("future=0.4,desired=0.4,original=0.2")
    assert mix.thresholds() == (0.4, 0.4, 0.4, 0.4, 0.8)
    assert mix.sources == ("future", "desired")
    assert str(mix) == "future=0.4,desired=0.4,original=0.2"


# ---------------------------------------------------------------------- config, presets, CLI


def test_the_config_takes_a_mix_as_a_table_or_as_text_and_hands_it_to_the_buffer() -> None:
    fractions = {"future": 0.4, "desired": 0.4, "original": 0.2}
    config = DDPGConfig(goal_mix="future=0.4, desired=0.4, original=0.2", goal_mix_warmup=25_000)
    assert config.goal_mix == fractions
    assert DDPGConfig(goal_mix={"original": 0.2, "future": 0.4, "desired": 0.4}) == DDPGConfig(
        goal_mix=fractions
    )
    settings = config.her_settings()
    assert settings["goal_mix"] == GoalMix(**fractions)
    assert settings["goal_mix_warmup"] == 25_000
    assert "goal_selection_strategy" not in settings and "n_sampled_goal" not in settings
    again = config_from_dict(json.loads(json.dumps(config.to_dict())))
    assert again == config
    plain = DDPGConfig().her_settings()
    assert (plain["goal_selection_strategy"], plain["n_sampled_goal"]) == ("future", 4)
    with pytest.raises(ValueError, match=r"^goal_mix: future=-0\.4 is negative"):
        DDPGConfig(goal_mix={"future": -0.4, "original": 1.4})
    with pytest.raises(ValueError, match=r"^goal_mix_warmup must be >= 0, got -5"):
        DDPGConfig(goal_mix_warmup=-5)


def test_a_preset_and_the_command_line_set_the_mix(tmp_path: Path, capsys: Any) -> None:
    preset = tmp_path / "futureactual.toml"
    preset.write_text(
        'description = "mrl futureactual"\n'
        "[config]\n"
        "goal_mix = {future = 0.4, desired = 0.4, original = 0.2}\n"
        "goal_mix_warmup = 25000\n"
    )
    base = ["train", "--show-config", "goalenvs/PointReach-v0", "--device", "cpu"]
    assert main([*base, "--preset", str(preset)]) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["goal_mix"] == {"future": 0.4, "desired": 0.4, "original": 0.2}
    assert config["goal_mix_warmup"] == 25000
    argv = [*base, "--goal-mix", "future=0.5,achieved=0.3,original=0.2", "--goal-mix-warmup", "7"]
    assert main(argv) == 0
    config = json.loads(capsys.readouterr().out)
    assert config["goal_mix"] == {"future": 0.5, "achieved": 0.3, "original": 0.2}
    assert config["goal_mix_warmup"] == 7
    assert main([*base, "--goal-mix", "future=0.5"]) == 2
    assert "goal_mix: the fractions sum to 0.5 (future=0.5)" in capsys.readouterr().err


TINY = ["--epochs", "1", "--cycles", "2", "--batches", "2", "--batch-size", "16", "--quiet"]
BITS = ["goalenvs/BitFlipping-v0", "--env-kwargs", '{"n_bits": 4}', "--num-envs", "2"]


def test_training_runs_with_a_mix_and_refuses_a_warm_up_longer_than_the_run(
    tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "run"
    mix = ["--goal-mix", "future=0.4,desired=0.4,original=0.2", "--goal-mix-warmup", "8"]
    assert main(["train", *BITS, *TINY, *mix, "--out", str(out), "--device", "cpu"]) == 0
    assert json.loads((out / "config.json").read_text())["goal_mix"]["desired"] == 0.4
    # 1 epoch x 2 cycles x 4 steps (an episode of BitFlipping with 4 bits) x 2 envs = 16.
    long = ["--goal-mix-warmup", "17", "--out", str(tmp_path / "long"), "--device", "cpu"]
    assert main(["train", *BITS, *TINY, *long]) == 2
    err = capsys.readouterr().err
    assert (
        "goal_mix_warmup 17 is longer than the run: each replay buffer stores 16 env steps "
        "(epochs 1 x n_cycles 2 x 4 steps x num_envs 2)"
    ) in err
