#!/usr/bin/env bash
# Runs every quick benchmark (not train.py, which takes long: `make bench-train`).
# Usage: benchmarks/run_all.sh [PYTHON]; run from anywhere.
set -euo pipefail
py=${1:-python}
# Resolve a relative interpreter path before leaving the caller's directory.
if [[ "$py" == */* ]]; then
  py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"
fi
cd "$(dirname "$0")"
for script in envs.py new_envs.py parking_vs_highway.py render.py her_buffer.py checker.py; do
  echo "== benchmarks/$script"
  "$py" "$script"
done
