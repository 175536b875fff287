#!/usr/bin/env bash
# The open GPU measurements of issues 27-33, as stages of at most about ten
# minutes each (one device call each), every stage writing its JSON under
# OUT as it goes (a stage cut short keeps what it measured).
#
#   bash bench/gpu/batch.sh prepare          # here (Rust toolchain): binaries and generated modules
#   bash bench/gpu/batch.sh STAGE OUT        # on the GPU machine, repo root as cwd
#
# Stages (carry bench/gpu/bin, bench/gpu/gen and bench/gpu/ttir):
#   ttir     issue 31: TTIR builds against the Python builds (ttir_check.py)
#   layers   issue 29: full-size decoder layers, eager / Inductor / efir backend (layers.py)
#   family   issue 33: one symbolic family against per-shape compiles, untuned (family.py)
#   family-tuned  the same, both tuned (10 s; the family per size bucket)
#   attn     issue 27: attention prefill and decode at B=1/8/16 (run.py)
#   tune     issue 28: tuning against an exhaustive sweep (tune_bench.py)
#   profile  the prefill layer per kernel and whole, register caps, rmsnorm_mlp/swiglu B=1
#   prefill  issue 29: the Llama prefill layer chunk by chunk, each kernel's warps and
#            stages varied (chunk_times.py --neighbours), then whole (layers.py)
set -euo pipefail
cd "$(dirname "$0")/../.."

stage="${1:?usage: bash bench/gpu/batch.sh prepare | STAGE OUT}"
if [ "$stage" = prepare ]; then
  cargo build --release -p efir-opt -p efir-translate
  mkdir -p bench/gpu/bin
  cp target/release/efir-opt target/release/efir-translate bench/gpu/bin/
  strip bench/gpu/bin/efir-opt bench/gpu/bin/efir-translate 2>/dev/null || true
  bash bench/gpu/prepare.sh 4 400
  bash bench/gpu/ttir_prepare.sh
  exit 0
fi
out="${2:?usage: bash bench/gpu/batch.sh STAGE OUT}"
mkdir -p "$out"
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin"
lim=560
case "$stage" in
  ttir)
    timeout "$lim" python3 bench/gpu/ttir_check.py \
      --cases '_best$|^(gated_mlp|layernorm_gemm|lora|ngpt|rmsnorm_mlp|rmsnorm_swiglu)_B' \
      --out "$out/ttir_check.json" ;;
  layers)
    timeout "$lim" python3 bench/gpu/layers.py --only 'fp16' --out "$out/layers.json" ;;
  family)
    timeout "$lim" python3 bench/gpu/family.py --out "$out/family.json" ;;
  family-tuned)
    timeout "$lim" python3 bench/gpu/family.py --tune 10 --out "$out/family-tuned.json" ;;
  attn)
    timeout "$lim" python3 bench/gpu/run.py --workloads attn_prefill,attn_decode --batches 1,8,16 \
      --candidates 3 --warm 8 --sweep 6 --climb 1 --climb-width 8 --compile-budget 10 --compile-timeout 25 \
      --out "$out/attn.json" --md "$out/attn.md" ;;
  tune)
    timeout "$lim" python3 bench/gpu/tune_bench.py --cases gated_mlp:1,lora:1,rmsnorm_mlp:16,attn_prefill:8 \
      --budget 20 --wide-budget 45 --out "$out/tune.json" --md "$out/tune.md" ;;
  prefill)
    export PYTHONPATH="$PWD/python"
    timeout 290 python3 bench/gpu/chunk_times.py --case llama_prefill_bf16 --profile --neighbours \
      --sources "$out/src" --out "$out/chunk-times.json" || true
    # The MLP chunks' kernels with their registers capped (two programs an SM), one at a time.
    timeout 90 python3 bench/gpu/module_probe.py --out "$out/module-probe.json" --each-kernel 128 \
      "$out/src/llama_prefill_bf16_part2.py" "$out/src/llama_prefill_bf16_part2.py||*=128" \
      "$out/src/llama_prefill_bf16_part3.py" "$out/src/llama_prefill_bf16_part3.py||*=128" || true
    timeout 200 python3 bench/gpu/layers.py --only 'llama_prefill_fp16' --out "$out/layers-llama.json" ;;
  profile)
    # One call's worth of where-the-time-goes: the Llama prefill and decode layers' chunks
    # per kernel (no neighbours), the prefill MLP chunk with registers capped, the prefill
    # layer whole, and the two weakest suite cases (decode-shaped MLPs at B=1).
    export PYTHONPATH="$PWD/python"
    timeout 130 python3 bench/gpu/chunk_times.py --case llama_prefill_bf16 --profile \
      --sources "$out/src" --out "$out/chunk-times.json" || true
    timeout 50 python3 bench/gpu/module_probe.py --out "$out/module-probe.json" --each-kernel 128 \
      "$out/src/llama_prefill_bf16_part2.py" "$out/src/llama_prefill_bf16_part2.py||*=128" || true
    timeout 100 python3 bench/gpu/chunk_times.py --case llama_decode_bf16 --profile \
      --sources "$out/src" --out "$out/chunk-times-decode.json" || true
    timeout 140 python3 bench/gpu/layers.py --only 'llama_prefill_fp16' --out "$out/layers-llama.json" || true
    timeout 130 python3 bench/gpu/run.py --cases rmsnorm_mlp:1,rmsnorm_swiglu:1 \
      --candidates 3 --warm 2 --sweep 4 --climb 1 --climb-width 6 --compile-budget 10 --compile-timeout 25 \
      --out "$out/suite.json" --md "$out/suite.md" ;;
  *)
    echo "unknown stage '$stage' (prepare, ttir, layers, family, family-tuned, attn, tune, prefill, profile)" >&2
    exit 2 ;;
esac
