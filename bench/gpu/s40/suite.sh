#!/usr/bin/env bash
# Session 40: suite cases: more suite cases (CASES, SUITE_S seconds).
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
timeout "${SUITE_S:-280}" python3 bench/gpu/run.py --cases "${CASES:-attn_decode:8,rmsnorm_mlp:1,lora:1}" \
  --candidates 3 --warm 4 --sweep 6 --climb 1 --climb-width 6 --compile-budget 10 --compile-timeout 25 \
  --out "$OUT/${TAG:-suite}.json" --md "$OUT/${TAG:-suite}.md" 2>&1 | tail -40
