#!/usr/bin/env bash
# Session 41, second device call: the emitted `pdl` option off and on at the
# session-40 best schedules (pdl_probe.py), then run.py on CASES.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
mapfile -t CASES_PDL < bench/gpu/s41/pdl_cases.txt
timeout "${PDL_S:-200}" python3 bench/gpu/s41/pdl_probe.py "$OUT/pdl2.json" "${CASES_PDL[@]}" > "$OUT/pdl2.log" 2>&1
python3 - "$OUT/pdl2.log" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t = collections.defaultdict(list)
for r in rows:
    t[(r["workload"], r["B"], r["variant"])].append(r.get("us", float("nan")))
for w, b in sorted({(w, b) for w, b, _ in t}):
    print(w, b, " ".join(f"{v}={min(t[(w,b,v)]):.1f}" for v in ("off", "on", "base") if (w,b,v) in t),
          "rel", max(r.get("rel_l2", 9) for r in rows if r["workload"] == w and r["B"] == b))
PY
grep -i error "$OUT/pdl2.log" | head -5
if [ -n "${CASES:-}" ]; then
  timeout "${SUITE_S:-300}" python3 bench/gpu/run.py --cases "$CASES" \
    --candidates 2 --warm 4 --sweep 4 --climb 1 --climb-width 4 --compile-budget 10 --compile-timeout 25 \
    --out "$OUT/${TAG:-suite}.json" --md "$OUT/${TAG:-suite}.md" 2>&1 | tail -30
fi
