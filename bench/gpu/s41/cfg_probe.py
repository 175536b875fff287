"""Generated modules at given schedules, timed as run.py times (CUDA graphs,
input sets rotated) and checked against the fp32 reference, twice each,
interleaved.

    python3 bench/gpu/s41/cfg_probe.py OUT.json 'workload:B:module.py:CONFIG_JSON' ...
"""
import importlib.util, json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
import run as R  # noqa: E402

MODS = {}


def load(py):
    if py not in MODS:
        spec = importlib.util.spec_from_file_location(os.path.basename(py)[:-3], py)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        MODS[py] = m
    return MODS[py]


def main():
    out, cases = sys.argv[1], []
    for c in sys.argv[2:]:
        w, b, py, cfg = c.split(":", 3)
        cases.append((w, int(b), py, json.loads(cfg) if cfg else None))
    inputs, rows = {}, []
    for rep in range(2):
        for w, b, py, cfg in cases:
            if (w, b) not in inputs:
                ins = R.make_inputs(w, b, 7)
                inputs[(w, b)] = (ins, R.reference(w, ins), R.case_size(w, b)["copies"])
            ins, ref, copies = inputs[(w, b)]
            row = {"workload": w, "B": b, "module": os.path.basename(py), "config": cfg, "rep": rep}
            try:
                mod = load(py)
                o = mod.run(*ins, config=cfg)
                o = o[0] if isinstance(o, (tuple, list)) else o
                torch.cuda.synchronize()
                row["rel_l2"] = R.rel_l2(o, ref)
                row["us"] = R.timed(lambda *a, m=mod, c=cfg: m.run(*a, config=c), w, b, copies)
            except Exception as e:  # noqa: BLE001
                row["error"] = str(e)[:300]
            print(json.dumps(row), flush=True)
            rows.append(row)
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
