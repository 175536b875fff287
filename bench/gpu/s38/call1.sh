#!/usr/bin/env bash
# Session 38's device call: the folded score scale (A/B), decode with a padded dot, the Llama layers.
# MINIMAL=1: the first two only.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout 45 python3 bench/gpu/module_probe.py --check --list bench/gpu/s38/attn_list.txt --out "$OUT/attn-fold.json" 2>&1 | tail -12
timeout 60 python3 bench/gpu/decode_probe.py --b 16 --out "$OUT/decode-probe.json" --efir bench/gpu/gen/attn_decode_B16/attn_decode_c0.py bench/gpu/s38/attn_decode_B16_c0_fold.py 2>&1 | tail -20
[ -n "${MINIMAL:-}" ] || timeout 190 python3 bench/gpu/layers.py --only 'llama_(prefill|decode)_fp16' --out "$OUT/layers.json" 2>&1 | tail -25
