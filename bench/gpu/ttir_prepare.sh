#!/usr/bin/env bash
# Build the inputs of bench/gpu/ttir_check.py on a machine with Rust and
# LLVM/MLIR 22 (README: "TTIR through MLIR"). For the eight workloads at B in
# {1, 8, 16} (bench/gpu/workloads.py), two programs each, translated twice at
# the same plan and schedule: by efir-translate --to-ttir (kernels built
# through MLIR) and --to-triton (the Python build):
#   bench/gpu/ttir/<workload>_B<B>/       the source program;
#   bench/gpu/ttir/<workload>_B<B>_best/  efir's best candidate by static
#       estimate (--to-triton --top 1): the one bench/gpu/prepare.sh times
#       (its parallel reductions: online-softmax attention loops, split-K
#       collects). The candidates are bench/gpu/gen/src/<case>.cands.efir
#       when bench/gpu/prepare.sh made them, else efir-opt makes them here
#       (as prepare.sh does; about 20 s per case).
# Programs the TTIR path does not cover yet are listed and skipped.
# Usage: bash bench/gpu/ttir_prepare.sh [MAX_CANDIDATES]
set -euo pipefail
cd "$(dirname "$0")/../.."
MAXC="${1:-64}"
export MLIR_SYS_220_PREFIX="${MLIR_SYS_220_PREFIX:-/usr/lib/llvm-22}"
export TABLEGEN_220_PREFIX="${TABLEGEN_220_PREFIX:-/usr/lib/llvm-22}"
T="${CARGO_TARGET_DIR:-$PWD/target-mlir}"
# (Without debug info, as .ci/run builds it: the same build.)
CARGO_TARGET_DIR="$T" CARGO_PROFILE_DEV_DEBUG=0 cargo build -q -p efir-translate --features mlir
BIN="$T/debug/efir-translate"
OPT=target/release/efir-opt
RANK=target/release/efir-translate
[ -x "$RANK" ] || RANK="$BIN"
OUT=${TTIR_OUT:-bench/gpu/ttir}
rm -rf "$OUT"
mkdir -p "$OUT/src"
for B in 1 8 16; do python3 bench/gpu/workloads.py "$B" "$OUT/src"; done

# translate SRC FUNC DIR: both builds of program FUNC of SRC into DIR.
translate() {
  local src=$1 func=$2 dir=$3 name msg
  name=$(basename "$dir")
  if msg=$("$BIN" --to-ttir "$src" --func "$func" --output-dir "$dir" 2>&1); then
    "$BIN" --to-triton "$src" --func "$func" --output-dir "$dir"
    printf '%-28s %s kernel(s)\n' "$name" "$(ls "$dir"/*.ttir | wc -l)"
  else
    rm -rf "${dir:?}"
    printf '%-28s not covered: %s\n' "$name" "$(echo "$msg" | tail -1)"
  fi
}

for src in "$OUT"/src/*_B*.efir; do
  case "$src" in *.cands.efir) continue ;; esac
  name=$(basename "$src" .efir)
  func="@${name%_B*}"
  translate "$src" "$func" "$OUT/$name"
  cands=bench/gpu/gen/src/$name.cands.efir
  if [ ! -f "$cands" ]; then
    cands="$OUT/src/$name.cands.efir"
    [ -x "$OPT" ] || cargo build --release -q -p efir-opt
    "$OPT" "$src" --saturate --compact=max-candidates=$MAXC,time-limit=20 -o "$cands" 2>/dev/null
  fi
  # The best candidate: the program the Python build's --top 1 writes.
  # (Ranked by the release build where there is one: the debug MLIR build
  # takes minutes a case to estimate 400 candidates.)
  top=$(mktemp -d)
  "$RANK" --to-triton "$cands" --top 1 --output-dir "$top" 2>/dev/null
  best=$(sed -n 's/^"""Triton kernels for `\(@[^`]*\)`.*/\1/p' "$top"/*.py | head -1)
  rm -rf "$top"
  if [ -z "$best" ]; then
    printf '%-28s no candidate\n' "${name}_best"
    continue
  fi
  translate "$cands" "$best" "$OUT/${name}_best"
done
