#!/usr/bin/env bash
# Runs every quick benchmark (not train.py, which takes long: `make bench-train`).
set -euo pipefail
py=${1:-python}
cd "$(dirname "$0")"
for script in envs.py parking_vs_highway.py render.py her_buffer.py checker.py; do
  if [ -f "$script" ]; then
    echo "== benchmarks/$script"
    "$py" "$script"
  fi
done
