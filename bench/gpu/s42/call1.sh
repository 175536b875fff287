#!/usr/bin/env bash
# Session 42 device calls. On an H200: run.py over CASES (the suite for the
# record, --candidates 2 --sweep 4 --climb 1). On any other GPU: tune_bench on
# TUNE_CASES (the tuner against a wide sweep, for the static ranking's data).
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
if grep -q H200 "$OUT/gpu.txt"; then
  timeout "${SUITE_S:-540}" python3 bench/gpu/run.py --cases "$CASES" \
    --candidates 2 --warm 4 --sweep 4 --climb 1 --climb-width 4 --compile-budget 10 --compile-timeout 25 \
    --out "$OUT/${TAG:-suite}.json" --md "$OUT/${TAG:-suite}.md" 2>&1 | grep -v "^ *[0-9]*%" | tail -40
elif [ -n "${TUNE_CASES:-}" ]; then
  timeout "${TUNE_S:-520}" python3 bench/gpu/tune_bench.py --cases "$TUNE_CASES" --budget 20 --wide-budget 30 \
    --deadline "$(( ${TUNE_S:-520} - 20 ))" --out "$OUT/${TTAG:-tune}.json" --md "$OUT/${TTAG:-tune}.md" 2>&1 | tail -15
fi
