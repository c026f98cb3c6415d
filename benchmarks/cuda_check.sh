#!/usr/bin/env bash
# What needs a CUDA machine, in one run (not timed yet): the whole test suite with
# the GPU visible (CUDA variants included), then benchmarks/scaling.py on FetchPush with
# the networks on CUDA: env workers 2 ... 16 with and without overlap, the replay buffer
# on the GPU against host memory, and the floor. Logs go to $1 (default: results/cuda).
#
#     bash benchmarks/cuda_check.sh /tmp/cuda_check
#
# Needs torch with CUDA and the project's test and robotics packages importable
# (gymnasium-robotics with mujoco==3.3.7, stable-baselines3, pytest; pytest-xdist runs the
# suite on 8 processes where it is installed). MUJOCO_GL is left unset: the suite renders
# with pygame and the Fetch envs train without a GL context.
set -u
out="${1:-benchmarks/results/cuda}"
mkdir -p "$out"
unset MUJOCO_GL
export SDL_VIDEODRIVER=dummy SDL_AUDIODRIVER=dummy PYTHONUNBUFFERED=1
python=${PYTHON:-python3}

$python - <<'EOF' | tee "$out/machine.txt"
import os, platform, torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
print(f"{platform.machine()}, {os.cpu_count()} cores, {gpu}, torch {torch.__version__}")
EOF

workers=()
if $python -c "import xdist" 2>/dev/null; then workers=(-n 8); fi
# A test that hangs fails with its stack (pytest-timeout, where installed), so the log
# names it instead of the whole suite running into the limit below.
if $python -c "import pytest_timeout" 2>/dev/null; then workers+=(--timeout 200); fi
timeout 330 $python -m pytest -q -p no:cacheprovider -rfE "${workers[@]}" tests \
    > "$out/suite.txt" 2>&1
echo "suite: exit $? ($(tail -n 1 "$out/suite.txt"))"

before=$(cat benchmarks/results/scaling.jsonl 2>/dev/null | wc -l)  # none yet: 0
timeout 240 $python benchmarks/scaling.py --device cuda --cycles 5 \
    --modes preset workers replay floor > "$out/scaling.txt" 2>&1
echo "scaling: exit $?"
tail -n "+$((before + 1))" benchmarks/results/scaling.jsonl > "$out/scaling.jsonl"
tail -n 25 "$out/scaling.txt"
