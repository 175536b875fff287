#!/usr/bin/env bash
# The TTIR build against the Python build on the GPU (issue 31), after the
# matmul operands loaded as matrices (e50339e): prepare here with
# `bash bench/gpu/ttir_prepare.sh 64` (carry bench/gpu/ttir), then run this
# on the device. The attention source programs (whole-row softmax blocks,
# minutes of Triton compile each) are left out.
set -u
cd "$(dirname "$0")/../../.."
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
timeout "${TTIR_S:-500}" python3 bench/gpu/ttir_check.py --rep 100 \
  --cases "${TTIR_CASES:-_best|mlp|lora|ngpt|layernorm|swiglu}" --out "$OUT/ttir-check.json" 2>&1 | grep -v "^ *$" | tail -60
