"""The config is read in few places: the plan's module and the parts it configures
(benchmarks/config_walk.py follows it from the trainer's constructor)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import config_walk  # noqa: E402

# Where a run's config may be read: the trainer that assembles the parts, the plan, the
# agent (its registry, base class and DDPG, the default algorithm), the run folder that
# records it, and the config's own methods.
ROOMS = {f"goalenvs.train.{name}" for name in ("trainer", "plan", "run_folder")}
ROOMS |= {f"goalenvs.agents.{name}" for name in ("registry", "base", "ddpg", "config")}


def test_the_config_walk_from_the_trainer_stays_short():
    walk = config_walk.walk()
    where = [stop["where"] for stop in walk["stops"]]
    assert where[0] == "goalenvs.train.trainer:Trainer.__init__"
    assert set(walk["rooms"]) <= ROOMS, sorted(set(walk["rooms"]) - ROOMS)
    assert walk["counts"]["stops"] <= 15, where
    # the plan's helpers take the values they decide on, not the config
    assert "goalenvs.train.plan:_overlap" not in where
    plan = next(s for s in walk["stops"] if s["where"].endswith(":make_plan"))
    assert {"precision", "env_workers", "overlap", "cuda_graphs"} <= set(plan["reads"])


def test_the_walk_follows_the_config_into_a_function_it_is_passed_to(tmp_path):
    package = tmp_path / "goalenvs" / "train"
    package.mkdir(parents=True)
    (tmp_path / "goalenvs" / "agents").mkdir()
    for empty in ("__init__.py", "agents/__init__.py", "agents/registry.py", "train/__init__.py"):
        (tmp_path / "goalenvs" / empty).write_text("")
    (tmp_path / "goalenvs" / "agents" / "config.py").write_text(
        "class TrainConfig:\n    def kwargs(self):\n        return {'a': self.a}\n"
    )
    (package / "helpers.py").write_text(
        "def size(config):\n    return config.width * 2\n\ndef untouched(config):\n    return 1\n"
    )
    (package / "trainer.py").write_text(
        "from goalenvs.train.helpers import size, untouched\n\n"
        "class Trainer:\n"
        "    def __init__(self, config):\n"
        "        self.config = config\n"
        "        self.n = size(config) + untouched(config)\n"
        "        self.kw = config.kwargs()\n"
        "        self.other()\n\n"
        "    def other(self):\n"
        "        return self.config.seed\n"
    )
    walk = config_walk.walk(tmp_path)
    reads = {stop["where"]: stop["reads"] for stop in walk["stops"]}
    assert reads["goalenvs.train.helpers:size"] == ["width"]
    assert reads["goalenvs.train.trainer:Trainer.other"] == ["seed"]
    assert reads["goalenvs.agents.config:TrainConfig.kwargs"] == ["a"]
    # a function handed the config that reads nothing of it is passed, not a stop
    assert "goalenvs.train.helpers:untouched" not in reads
    assert walk["counts"] == {"stops": 4, "rooms": 3, "returns": 0}
