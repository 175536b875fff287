#!/usr/bin/env bash
# Session 42: the split-K fixup probe (fixup_probe.py), then call1.sh's work
# (on an H200 the suite over CASES, elsewhere tune_bench over TUNE_CASES).
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
if [ -n "${FIXUP:-}" ]; then
  timeout "${FIXUP_S:-120}" python3 bench/gpu/s42/fixup_probe.py > "$OUT/fixup.jsonl" 2> "$OUT/fixup.err"
  python3 - "$OUT/fixup.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(f"{r.get('work',''):10s} B={r['B']:<3} {r['variant']:40s} {r.get('us', float('nan')):8.2f} us  rel {r.get('rel_l2', float('nan')):.1e}/{r.get('rel_l2_again', float('nan')):.1e} {r.get('error', '')[:120]}")
PY
  tail -3 "$OUT/fixup.err"
fi
bash bench/gpu/s42/call1.sh
