"""A/B of efir's untuned choice: for each case, the module with the lowest
static ESTIMATE in each of two generated folders (say, before and after a
change to the estimate), each at its DEFAULT_CONFIG, timed side by side in
one process with the peers (bench/gpu/run.py's inputs, reference and
timing: CUDA graphs, input copies rotated past L2), each checked against
the fp32 reference.

    python3 bench/gpu/ab_defaults.py --a bench/gpu/gen --b bench/gpu/gen_new \
        --cases gated_mlp:8,lora:16 [--peers] --out x.json
"""
import argparse, glob, importlib.util, json, os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402


def best_module(d):
    best = None
    for p in glob.glob(os.path.join(d, "*.py")):
        m = re.search(r"^ESTIMATE = (\{.*\})$", open(p).read(), re.M)
        if m:
            t = json.loads(m.group(1))["time_us"]
            if best is None or t < best[0]:
                best = (t, p)
    return best


def load(p):
    spec = importlib.util.spec_from_file_location("m_" + str(abs(hash(p))), p)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--cases", required=True)
    ap.add_argument("--peers", action="store_true")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import datetime
    import torch
    import triton
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "date": datetime.date.today().isoformat(), "a": a.a, "b": a.b}
    rows = []
    for c in a.cases.split(","):
        name, b = c.split(":"); b = int(b)
        size = run.case_size(name, b)
        row = {"workload": name, "B": b, "floor_bytes": size["bytes"]}
        ins = run.make_inputs(name, b, 5)
        ref = run.reference(name, ins)
        for side, d in (("a", a.a), ("b", a.b)):
            got = best_module(os.path.join(d, f"{name}_B{b}"))
            if not got:
                row[side] = {"error": "no module"}; continue
            est, path = got
            r = {"module": os.path.basename(path), "estimate_us": est}
            try:
                mod = load(path)
                r["rel_l2"] = run.rel_l2(mod.run(*ins), ref)
                r["time_us"] = run.timed(mod.run, name, b, size["copies"])
            except Exception as e:  # noqa: BLE001 (a failing module is a row)
                r["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            row[side] = r
        if a.peers:
            row["peers"] = run.time_peers(name, b, "max-autotune-no-cudagraphs", size["copies"], lambda s: None)
        rows.append(row)
        print(json.dumps(row), flush=True)
        json.dump({**meta, "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
