#!/usr/bin/env bash
# Session 41, third and fourth device calls: lora's merged-weight candidates
# (c0 at B=1, c6 at B=8/16: x @ (W + A Bm), one kernel or split-K and a sum)
# swept by run.py (LORA=1), then the tuner against a wide sweep and the
# peers (tune_bench.py) on TUNE_CASES.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
if [ -n "${LORA:-}" ]; then
  timeout "${LORA_S:-150}" python3 bench/gpu/run.py --cases lora:1,lora:8,lora:16 --glob 'lora_c[06].py' \
    --candidates 1 --warm 3 --sweep 12 --climb 2 --climb-width 6 --compile-budget 15 --compile-timeout 25 \
    --out "$OUT/lora-merged.json" --md "$OUT/lora-merged.md" 2>&1 | grep -E "^\||quick:|re-timed" | tail -12
fi
if [ -n "${TUNE_CASES:-}" ]; then
  timeout "${TUNE_S:-420}" python3 bench/gpu/tune_bench.py --cases "$TUNE_CASES" --budget 20 --wide-budget 30 \
    --deadline "$(( ${TUNE_S:-420} - 20 ))" --out "$OUT/${TAG:-tune}.json" --md "$OUT/${TAG:-tune}.md" 2>&1 | tail -15
fi
