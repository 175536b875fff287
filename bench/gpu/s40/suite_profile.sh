#!/usr/bin/env bash
# Session 40: suite cases (CASES, SUITE_S seconds), then the per-kernel times
# of the best schedules of PROFILE cases (torch.profiler, kernel_times.py).
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
TAG="${TAG:-suite}"
timeout "${SUITE_S:-480}" python3 bench/gpu/run.py --cases "$CASES" \
  --candidates 3 --warm 4 --sweep 6 --climb 1 --climb-width 6 --compile-budget 10 --compile-timeout 25 \
  --out "$OUT/$TAG.json" --md "$OUT/$TAG.md" 2>&1 | tail -30
if [ -n "${PROFILE:-}" ] && [ -f "$OUT/$TAG.json" ]; then
  timeout 60 python3 bench/gpu/kernel_times.py "$OUT/$TAG.json" $PROFILE 2>&1 | tee "$OUT/$TAG-kernels.txt" | tail -40
fi
