#!/usr/bin/env bash
# Build the GPU benchmark's inputs on a machine with the Rust toolchain: the
# eight workloads at B in {1, 8, 16}, saturated, compacted, and the best
# candidates by static estimate emitted as Triton modules under
# bench/gpu/gen/<workload>_B<B>/ (carried to the GPU machine by bench/gpu/run.py's caller).
# Usage: bash bench/gpu/prepare.sh [TOP] [MAX_CANDIDATES]  (default 4 400)
# 400 candidates (session 28): rmsnorm_swiglu's best static estimate is
# 134.9 us at 64 and 87.9 us at 400 (B=16; 81.2 -> 73.3 at B=1); the other
# cases find the same best estimate at 64 and 400. About 2 minutes in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
TOP="${1:-4}"
MAXC="${2:-400}"
cargo build --release -q -p efir-opt -p efir-translate
BIN=target/release
GEN=bench/gpu/gen
rm -rf "$GEN"
mkdir -p "$GEN/src"
for B in 1 8 16; do python3 bench/gpu/workloads.py "$B" "$GEN/src"; done
for src in "$GEN"/src/*.efir; do
  name=$(basename "$src" .efir)
  start=$(date +%s.%N)
  "$BIN/efir-opt" "$src" --saturate --compact=max-candidates=$MAXC,time-limit=20 -o "$GEN/src/$name.cands.efir" 2>/dev/null
  "$BIN/efir-translate" --to-triton "$GEN/src/$name.cands.efir" --top "$TOP" --output-dir "$GEN/$name" 2>/dev/null
  end=$(date +%s.%N)
  printf '%-22s %s modules  %.1f s\n' "$name" "$(ls "$GEN/$name" | wc -l)" "$(echo "$end - $start" | bc)"
done
