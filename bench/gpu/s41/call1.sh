#!/usr/bin/env bash
# Session 41, first device call: the PDL probe on the multi-kernel cases,
# then (on an H200 only) suite cases for the record.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
mapfile -t CASES_PDL < bench/gpu/s41/pdl_cases.txt
timeout "${PDL_S:-220}" python3 bench/gpu/s41/pdl_probe.py "$OUT/pdl.json" "${CASES_PDL[@]}" > "$OUT/pdl.log" 2>&1
python3 - "$OUT/pdl.log" <<'PY'
import json, sys, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
t = collections.defaultdict(list)
for r in rows:
    t[(r["workload"], r["B"], r["variant"])].append(r.get("us", float("nan")))
keys = sorted({(w, b) for w, b, _ in t})
for w, b in keys:
    print(w, b, " ".join(f"{v}={min(t[(w,b,v)]):.1f}" for v in ("base", "wait", "trig", "off", "on") if (w,b,v) in t),
          "rel", max(r.get("rel_l2", 9) for r in rows if r["workload"] == w and r["B"] == b))
PY
grep -i error "$OUT/pdl.log" | head -5
if grep -q H200 "$OUT/gpu.txt" && [ -n "${CASES:-}" ]; then
  OUT="$OUT" TAG="${TAG:-h200-a}" CASES="$CASES" SUITE_S="${SUITE_S:-300}" bash bench/gpu/s40/suite_profile.sh
fi
