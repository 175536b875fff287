#!/usr/bin/env bash
# Session 43 device calls. First A/Bs of the untuned default: AB_CASES
# between bench/gpu/gen/old (efir-translate at 058e4c6, before the
# statistics block's one-trip guard and the split-K seed) and
# bench/gpu/gen/head (at 3f20cb7), AB2_CASES between gen/head and
# bench/gpu/gen (launch-group members estimated side by side); then session
# 42's call1.sh (an H200: the suite over CASES; another GPU: tune_bench over
# TUNE_CASES).
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
ab() {  # ab TAG A B CASES SECONDS
  timeout "$5" python3 bench/gpu/ab_defaults.py --a "$2" --b "$3" \
    --cases "$4" ${AB_PEERS:+--peers} --out "$OUT/$1.json" > "$OUT/$1.jsonl" 2> "$OUT/$1.err"
  python3 - "$OUT/$1.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    f = lambda s: f"{s.get('module','?')[:22]:22s} est {s.get('estimate_us', 0):7.1f} meas {s.get('time_us', float('nan')):7.2f} rel {s.get('rel_l2', float('nan')):.1e} {s.get('error','')[:80]}"
    print(f"{r['workload']:15s} B={r['B']:<3} a {f(r['a'])} | b {f(r['b'])}")
PY
  tail -2 "$OUT/$1.err"
}
[ -n "${AB_CASES:-}" ] && ab ab bench/gpu/gen/old bench/gpu/gen/head "$AB_CASES" "${AB_S:-150}"
[ -n "${AB2_CASES:-}" ] && ab ab2 bench/gpu/gen/head bench/gpu/gen "$AB2_CASES" "${AB2_S:-200}"
bash bench/gpu/s42/call1.sh
