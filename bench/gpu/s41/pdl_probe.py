"""Programmatic dependent launch (PDL) on generated multi-kernel modules:
each module at a given schedule as emitted, and with every kernel after the
first launched with `launch_pdl=True` and a grid-dependency wait at the top
of each kernel (`gdc_wait`; variant `trig` also signals its dependents at the
top with `gdc_launch_dependents`). A module emitted with the `pdl` option
(efir-translate since session 41) is timed with it off and on instead. Timed as run.py times (CUDA graphs, input
sets rotated), interleaved, checked against the fp32 reference.

    python3 bench/gpu/s41/pdl_probe.py OUT.json 'workload:B:module.py:CONFIG_JSON' ...
"""
import json, os, re, sys, tempfile, importlib.util
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402
import run as R  # noqa: E402


def variant(text, trig):
    head = "    tl.extra.cuda.gdc_wait()\n" + ("    tl.extra.cuda.gdc_launch_dependents()\n" if trig else "")
    # after each kernel's docstring line (the line after `def _k...`)
    text = re.sub(r'(@triton\.jit\ndef _k[^\n]*\n    """[^\n]*"""\n)', lambda m: m.group(1) + head, text)
    text = text.replace("def run(*inputs, config=None):\n", "def run(*inputs, config=None):\n    _P = [False]\n")
    text = re.sub(r"(\w+\[\([^\n]*?\)\]\([^\n]*?)num_warps=", r"\1launch_pdl=_pdl(_P), num_warps=", text)
    text += "\n\ndef _pdl(p):\n    v = p[0]\n    p[0] = True\n    return v\n"
    return text


def load(text, tag):
    f = tempfile.NamedTemporaryFile("w", suffix=f"_{tag}.py", delete=False)
    f.write(text)
    f.close()
    spec = importlib.util.spec_from_file_location(os.path.basename(f.name)[:-3], f.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, f.name


def main():
    out = sys.argv[1]
    rows = []
    for case in sys.argv[2:]:
        w, b, py, cfg = case.split(":", 3)
        b = int(b)
        cfg = json.loads(cfg) if cfg else None
        text = open(py).read()
        if '"pdl": [0, 1]' in text:
            # a module emitted with `pdl` (session 41): off and on by configuration
            m = load(text, "emitted")[0]
            mods = {"off": (m, {**(cfg or {}), "pdl": 0}), "on": (m, {**(cfg or {}), "pdl": 1})}
        else:
            mods = {"base": (load(text, "base")[0], cfg)}
            for v, trig in (("wait", False), ("trig", True)):
                try:
                    mods[v] = (load(variant(text, trig), v)[0], cfg)
                except Exception as e:  # noqa: BLE001
                    print(w, b, v, "load failed:", e)
        size = R.case_size(w, b)
        ins = R.make_inputs(w, b, 7)
        ref = R.reference(w, ins)
        for rep in range(2):
            for v, (mod, c) in mods.items():
                row = {"workload": w, "B": b, "module": os.path.basename(py), "config": c, "variant": v, "rep": rep}
                try:
                    o = mod.run(*ins, config=c)
                    o = o[0] if isinstance(o, (tuple, list)) else o
                    torch.cuda.synchronize()
                    row["rel_l2"] = R.rel_l2(o, ref)
                    row["us"] = R.timed(lambda *a, m=mod, c=c: m.run(*a, config=c), w, b, size["copies"])
                except Exception as e:  # noqa: BLE001
                    row["error"] = str(e)[:300]
                print(json.dumps(row), flush=True)
                rows.append(row)
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
