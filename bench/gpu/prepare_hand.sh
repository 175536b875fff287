#!/usr/bin/env bash
# Inputs of bench/gpu/hand_check.py: every examples/tiled/*.efir as a Triton
# module, with efir-run's inputs and f64 outputs (seed 0), under
# bench/gpu/gen/hand/ (carried to the GPU machine with bench/gpu/gen).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p efir-translate -p efir-run
G=bench/gpu/gen/hand
rm -rf "$G"
mkdir -p "$G"
for f in examples/tiled/*.efir; do
  n=$(basename "$f" .efir)
  target/release/efir-translate --to-triton "$f" -o "$G/$n.py"
  fn=$(grep -o 'Triton kernels for `@[A-Za-z0-9_.]*' "$G/$n.py" | head -1 | sed 's/.*`@//')
  target/release/efir-run "$f" --func "$fn" --seed 0 --dump-inputs --output-dir "$G/ref_$n" --precision f64 >/dev/null 2>&1
done
ls "$G"
