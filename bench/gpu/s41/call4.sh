#!/usr/bin/env bash
# Session 41, fourth device call: layernorm_gemm's statistics-loop blocks
# (cfg_probe.py over lg_cases.txt), then tune_bench.py on TUNE_CASES.
set -u
cd "$(dirname "$0")/../../.."
export EFIR_NO_NATIVE=1 EFIR_BIN_DIR="$PWD/bench/gpu/bin" PYTHONPATH="$PWD/python"
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader | tee "$OUT/gpu.txt"
mapfile -t C < bench/gpu/s41/lg_cases.txt
timeout "${LG_S:-150}" python3 bench/gpu/s41/cfg_probe.py "$OUT/lg.json" "${C[@]}" > "$OUT/lg.log" 2>&1
python3 - "$OUT/lg.log" <<'PY'
import json, sys, collections
t = collections.defaultdict(list)
for l in open(sys.argv[1]):
    if l.startswith("{"):
        r = json.loads(l)
        c = r["config"]
        t[(r["B"], r["module"], c.get("BLOCK_k1024__r0"), c["num_stages"])].append((r.get("us", float("nan")), r.get("rel_l2", 9)))
for k, v in sorted(t.items()):
    print(k, f"{min(x for x, _ in v):.2f} us rel {max(y for _, y in v):.1e}")
PY
grep -i error "$OUT/lg.log" | head -3
if [ -n "${TUNE_CASES:-}" ]; then
  timeout "${TUNE_S:-420}" python3 bench/gpu/tune_bench.py --cases "$TUNE_CASES" --budget 20 --wide-budget 30 \
    --deadline "$(( ${TUNE_S:-420} - 20 ))" --out "$OUT/${TAG:-tune}.json" --md "$OUT/${TAG:-tune}.md" 2>&1 | tail -8
fi
