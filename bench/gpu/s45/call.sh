#!/usr/bin/env bash
# Session 45 device calls. WANT=suite runs bench/gpu/s44/call1.sh over CASES
# (the H200 record) when the GPU is an H200; on any other GPU, and with
# WANT=ttir, it runs the TTIR check (bench/gpu/s44/call2.sh) instead, which
# does not depend on the GPU model, after bench/gpu/s45/lora_probe.py when
# PROBE_S (seconds) is set. Carry bench/gpu/bin, bench/gpu/gen and
# bench/gpu/ttir.
set -u
cd "$(dirname "$0")/../../.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "gpu: $gpu"
if [ "${WANT:-suite}" = suite ] && [[ "$gpu" == *H200* ]]; then
  bash bench/gpu/s44/call1.sh
else
  if [ -n "${PROBE_S:-}" ]; then
    timeout "$PROBE_S" python3 bench/gpu/s45/lora_probe.py "$OUT/lora-probe.json" 2>&1 | tail -30
  fi
  bash bench/gpu/s44/call2.sh
fi
