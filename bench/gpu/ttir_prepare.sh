#!/usr/bin/env bash
# Build the inputs of bench/gpu/ttir_check.py on a machine with Rust and
# LLVM/MLIR 22 (README: "TTIR through MLIR"): the workloads' source programs
# at B in {1, 8, 16}, each translated twice at the same plan and schedule:
# by efir-translate --to-ttir (kernels built through MLIR) and --to-triton
# (the Python build), under bench/gpu/ttir/<workload>_B<B>/. Programs the
# TTIR path does not cover yet are listed and skipped.
# Usage: bash bench/gpu/ttir_prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export MLIR_SYS_220_PREFIX="${MLIR_SYS_220_PREFIX:-/usr/lib/llvm-22}"
export TABLEGEN_220_PREFIX="${TABLEGEN_220_PREFIX:-/usr/lib/llvm-22}"
T="${CARGO_TARGET_DIR:-$PWD/target-mlir}"
CARGO_TARGET_DIR="$T" cargo build -q -p efir-translate --features mlir
BIN="$T/debug/efir-translate"
OUT=bench/gpu/ttir
rm -rf "$OUT"
mkdir -p "$OUT/src"
for B in 1 8 16; do python3 bench/gpu/workloads.py "$B" "$OUT/src"; done
for src in "$OUT"/src/*.efir; do
  name=$(basename "$src" .efir)
  if msg=$("$BIN" --to-ttir "$src" --output-dir "$OUT/$name" 2>&1); then
    "$BIN" --to-triton "$src" --output-dir "$OUT/$name"
    printf '%-22s %s kernel(s)\n' "$name" "$(ls "$OUT/$name"/*.ttir | wc -l)"
  else
    rm -rf "${OUT:?}/$name"
    printf '%-22s not covered: %s\n' "$name" "$(echo "$msg" | tail -1)"
  fi
done
