# `make test` and `make demo` work on a fresh clone: each creates .venv when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The local CPU wheel; a bare `torch` requirement would pull several GB of CUDA packages.
TORCH := torch==2.13.0
HIGHWAY := highway-env==1.12.1
# stable-baselines3's own tests/test_her.py, from the source distribution of the installed
# version (its wheel ships no tests): tests/test_sb3_suite.py runs it against our buffer.
SB3_TESTS := $(VENV)/sb3-tests

.PHONY: setup test demo bench bench-train lint format clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[train,sb3,dev]"
	# highway-env without its pygame-ce requirement (see pyproject.toml); its other needs are in dev.
	$(BIN)/python -m pip install -q --no-deps $(HIGHWAY)
	rm -rf $(SB3_TESTS)
	$(BIN)/python benchmarks/sb3_suite.py fetch $(SB3_TESTS)
	touch $(STAMP)

test: $(STAMP)
	SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy $(BIN)/python -m pytest -q -p no:cacheprovider --durations=20
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

demo: $(STAMP)
	$(BIN)/python -m goalenvs.demo

bench: $(STAMP)
	SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy ./benchmarks/run_all.sh $(BIN)/python

bench-train: $(STAMP)
	$(BIN)/python benchmarks/train.py

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
