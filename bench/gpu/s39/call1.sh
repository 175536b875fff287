#!/usr/bin/env bash
# Session 39's first device call: the folded score scale A/B (session 38's build
# against the one before it, on the same candidates), decode with a padded dot
# against efir's modules and SDPA (B=16 and B=1), efir's decode with its query row
# padded into the dots (bench/gpu/s39/mods, gitignored: efir-translate of gen/src at
# this commit), then the suite's weakest cases. Carry bench/gpu/bin, gen, s38, s39.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" | tee -a "$OUT/gpu.txt"
timeout 90 python3 bench/gpu/module_probe.py --check --list bench/gpu/s39/pad_list.txt --out "$OUT/decode-pad.json" 2>&1 | tail -20
timeout 60 python3 bench/gpu/decode_probe.py --b 16 --out "$OUT/decode-probe-b16.json" --efir bench/gpu/gen/attn_decode_B16/attn_decode_c0.py bench/gpu/s39/mods/dec16_c0_pad.py 2>&1 | tail -20
timeout 60 python3 bench/gpu/module_probe.py --check --list bench/gpu/s39/fold_list.txt --out "$OUT/attn-fold.json" 2>&1 | tail -20
timeout 40 python3 bench/gpu/decode_probe.py --b 1 --out "$OUT/decode-probe-b1.json" --efir bench/gpu/gen/attn_decode_B1/attn_decode_c364.py 2>&1 | tail -20
timeout "${SUITE_S:-200}" python3 bench/gpu/run.py --cases "${CASES:-attn_decode:1,attn_decode:16,rmsnorm_swiglu:1}" \
  --candidates 3 --warm 4 --sweep 6 --climb 1 --climb-width 6 --compile-budget 10 --compile-timeout 25 \
  --out "$OUT/suite.json" --md "$OUT/suite.md" 2>&1 | tail -30
