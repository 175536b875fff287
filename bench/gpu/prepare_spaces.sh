#!/usr/bin/env bash
# Two builds' candidates side by side (session 18: the default space before
# and after `partitions=view`): each workload at B=16, saturated, compacted
# with each build's defaults (max-candidates=200, time-limit=20), the best 3
# by static estimate written as bench/gpu/gen/<workload>_B16/old_*.py and
# new_*.py. Then, on the GPU machine (carry bench/gpu/gen):
#   python3 bench/gpu/run.py --batches 16 --candidates 6 --configs 2 --compile-mode none --out r.json
# Usage: OLD_BIN=<dir with the other build's efir-opt and efir-translate> bash bench/gpu/prepare_spaces.sh
#   (for example: git worktree add /tmp/old 8954163 && (cd /tmp/old &&
#    CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p efir-opt -p efir-translate);
#    OLD_BIN=/tmp/old-target/release)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OLD_BIN:?set OLD_BIN to the release directory of the other build}"
cargo build --release -q -p efir-opt -p efir-translate
GEN=bench/gpu/gen
rm -rf $GEN; mkdir -p $GEN/src
python3 bench/gpu/workloads.py 16 $GEN/src
for src in $GEN/src/*.efir; do
  name=$(basename $src .efir)
  for v in old new; do
    if [ $v = old ]; then BIN=$OLD_BIN; else BIN=target/release; fi
    s=$(date +%s.%N)
    $BIN/efir-opt $src --saturate --compact=max-candidates=200,time-limit=20 -o $GEN/src/$name.$v.efir 2>/dev/null
    mkdir -p $GEN/tmp_$v
    rm -rf $GEN/tmp_$v/*
    $BIN/efir-translate --to-triton $GEN/src/$name.$v.efir --top 3 --output-dir $GEN/tmp_$v 2>/dev/null
    mkdir -p $GEN/$name
    for f in $GEN/tmp_$v/*.py; do cp $f $GEN/$name/${v}_$(basename $f); done
    e=$(date +%s.%N)
    printf '%-22s %s %s cands  %.1f s\n' $name $v "$(grep -c '^func @' $GEN/src/$name.$v.efir)" "$(echo "$e - $s" | bc)"
  done
done
rm -rf $GEN/tmp_old $GEN/tmp_new
