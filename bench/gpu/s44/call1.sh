#!/usr/bin/env bash
# Session 44 device calls: run.py over CASES (the suite, --candidates 2
# --sweep 4 --climb 1) on whatever GPU came; the GPU's name is in gpu.txt and
# in the JSON, and only H200 results enter the record.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
timeout "${SUITE_S:-540}" python3 bench/gpu/run.py --cases "$CASES" \
  --candidates 2 --warm 4 --sweep 4 --climb 1 --climb-width 4 --compile-budget 10 --compile-timeout 25 \
  --out "$OUT/${TAG:-suite}.json" --md "$OUT/${TAG:-suite}.md" 2>&1 | grep -v "^ *[0-9]*%" | tail -40
