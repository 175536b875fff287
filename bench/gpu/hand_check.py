"""Run the hand-tiled examples' Triton modules on the GPU against efir-run's
f64 outputs, under the default, largest and smallest legal blocks and a
quarter of the smallest (more tiles per loop than any legal schedule).

Inputs: bench/gpu/gen/hand/, written on the Rust machine by
`bash bench/gpu/prepare_hand.sh` (one module and ref_<name>/ per
examples/tiled/*.efir). Usage: python3 bench/gpu/hand_check.py"""
import importlib.util, pathlib, sys
import numpy as np, torch
HERE = pathlib.Path(__file__).resolve().parent / "gen" / "hand"
worst = 0
for py in sorted(HERE.glob("*.py")):
    spec = importlib.util.spec_from_file_location(py.stem, py)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    d = HERE / f"ref_{py.stem}"
    sp = {k: v for k, v in mod.CONFIG_SPACE.items() if k.startswith("BLOCK_")}
    cfgs = [None, {k: max(v) for k, v in sp.items()}, {k: min(v) for k, v in sp.items()}, {k: max(1, min(v) // 4) for k, v in sp.items()}]
    for cfg in cfgs:
        ins = [torch.from_numpy(np.ascontiguousarray(np.load(d / f"in_{n}.npy"))).to("cuda", dt) for n, s, dt in mod.INPUTS]
        outs = mod.run(*ins, config=cfg)
        outs = outs if isinstance(outs, tuple) else (outs,)
        errs = []
        for i, o in enumerate(outs):
            ref = np.load(d / f"out{i}.npy")
            o = o.detach().cpu().double().numpy()
            errs.append(float(np.linalg.norm(o - ref) / max(np.linalg.norm(ref), 1e-30)))
        worst = max(worst, max(errs))
        print(py.stem, cfg, ["%.2e" % e for e in errs], flush=True)
print("hand-tiled worst", worst)
