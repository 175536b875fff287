"""Run a TTIR build: the kernels `efir-translate --to-ttir --output-dir DIR`
writes (one `.ttir` module per kernel, built through MLIR) and its host side
`<name>.ttir.json` (buffers, the launch order, grids, num_warps/num_stages,
launch groups, whether the launches are chained by programmatic dependent
launch).

    python -m efir run-ttir DIR/NAME.ttir.json [--check MODULE.py] [--time]

compiles every kernel with Triton from its IR (`triton.compile(path)`, as
Triton compiles `.ttir` files), runs the program on random inputs and prints
its results' shapes; `--check` compares them with the Python build of the
same program (`efir-translate --to-triton`, its `run()`), by relative L2
error; `--time` times both (triton.testing.do_bench). Needs a GPU.

`load(manifest)` gives a `TtirProgram` whose `run(*inputs)` is the host
function: it allocates the intermediate and result buffers and launches the
kernels in order, as the Python build's `run()` does: a launch group (kernels
none of which reads what another writes, sharing warps and stages; one
module whose programs run the member their id falls in) launched once
instead of its members, unless `use_groups` is set false. A tuple input or
result is one tensor per field, in order (the manifest numbers inputs and
results by leaf), as the Python build returns a tuple result's fields.
"""

import json
import os

DTYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64", "i1": "bool", "i32": "int32", "i64": "int64"}


class TtirProgram:
    """A compiled TTIR build of one program."""

    def __init__(self, manifest, kernels, groups=()):
        self.manifest = manifest
        self.kernels = kernels
        # Launch groups (horizontal fusion, as the Python build's `_h`
        # kernels): compiled groups, launched once instead of their members
        # while `use_groups` is true.
        self.groups = list(groups)
        self.use_groups = True
        self.ungrouped = set()  # groups that ran out of resources
        self.buffers = manifest["buffers"]
        self.inputs = sorted((b for b in self.buffers if b["input"] is not None), key=lambda b: b["input"])
        self.outputs = sorted((b for b in self.buffers if b["output"] is not None), key=lambda b: b["output"])

    def run(self, *inputs):
        """Run the program on torch tensors (on the GPU); returns its result(s)."""
        import torch
        import triton

        if len(inputs) != len(self.inputs):
            raise TypeError(f"@{self.manifest['program']} takes {len(self.inputs)} inputs, got {len(inputs)}")
        dev = inputs[0].device
        bufs = []
        for b in self.buffers:
            dt = getattr(torch, DTYPES[b["dtype"]])
            if b["input"] is not None:
                t = inputs[b["input"]]
                if tuple(t.shape) != tuple(b["shape"]) or t.dtype != dt:
                    raise ValueError(f"input %{b['name']}: expected {tuple(b['shape'])} {dt}, got {tuple(t.shape)} {t.dtype}")
                t = t.contiguous()
                if t.data_ptr() % 16:
                    # The kernels assume 16-byte aligned pointers (tt.divisibility).
                    t = t.clone()
            else:
                t = torch.empty(tuple(b["shape"]), dtype=dt, device=dev)
            bufs.append(t)
        for unit, ck in self.launches():
            try:
                ck[(unit["grid"], 1, 1)](*(bufs[i] for i in unit["args"]))
            except triton.runtime.errors.OutOfResources:
                # A group whose members' shared memory together exceeds the
                # GPU's: its members one by one, from now on.
                if "members" not in unit:
                    raise
                self.ungrouped.add(unit["name"])
                for i in unit["members"]:
                    k = self.manifest["kernels"][i]
                    self.kernels[i][(k["grid"], 1, 1)](*(bufs[j] for j in k["args"]))
        outs = [bufs[self.buffers.index(b)] for b in self.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)


    def launches(self):
        """[(manifest entry, compiled kernel)] in launch order: each group
        in place of its members (with `use_groups`), else the kernels."""
        first = {}
        if self.use_groups:
            for g, cg in zip(self.manifest.get("groups", []), self.groups):
                if g["name"] not in self.ungrouped:
                    first[g["members"][0]] = (g, cg)
        skip = {i for g, _ in first.values() for i in g["members"][1:]}
        out = []
        for i, (k, ck) in enumerate(zip(self.manifest["kernels"], self.kernels)):
            if i in first:
                out.append(first[i])
            elif i not in skip:
                out.append((k, ck))
        return out


# The lines of programmatic dependent launch in a TTIR module (its
# `griddepcontrol` inline assembly, one op a line, results unused).
_PDL_MARK = "griddepcontrol."


def pdl_usable(target=None):
    """Whether kernels for `target` (else the current GPU) may keep their
    programmatic dependent launch: CUDA of compute capability 9.0 or later."""
    if target is not None:
        return target.backend == "cuda" and int(target.arch) >= 90
    try:
        import torch

        return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9
    except Exception:  # noqa: BLE001
        return False


def _compile(path, opts, target, pdl, keep):
    """Triton's compile of one `.ttir` file. A program built with
    programmatic dependent launch (`pdl`) launches with Triton's
    `launch_pdl` (`keep`: every kernel but the program's first); where the
    GPU has no such launch its `griddepcontrol` lines are dropped first."""
    import tempfile

    import triton

    if pdl and not pdl_usable(target):
        with open(path) as f:
            text = "".join(line for line in f if _PDL_MARK not in line)
        with tempfile.NamedTemporaryFile("w", suffix=".ttir", delete=False) as t:
            t.write(text)
        try:
            return triton.compile(t.name, target=target, options=opts)
        finally:
            os.unlink(t.name)
    if pdl and keep:
        opts = dict(opts, launch_pdl=True)
    return triton.compile(path, target=target, options=opts)


def load(manifest_path, target=None):
    """Compile the kernels of a `.ttir.json` manifest with Triton."""
    with open(manifest_path) as f:
        m = json.load(f)
    d = os.path.dirname(os.path.abspath(manifest_path))
    pdl = bool(m.get("pdl"))
    kernels = []
    for i, k in enumerate(m["kernels"]):
        opts = {"num_warps": k["num_warps"], "num_stages": k["num_stages"]}
        kernels.append(_compile(os.path.join(d, k["file"]), opts, target, pdl, keep=i > 0))
    groups = []
    for g in m.get("groups", []):
        opts = {"num_warps": g["num_warps"], "num_stages": g["num_stages"]}
        groups.append(_compile(os.path.join(d, g["file"]), opts, target, pdl, keep=0 not in g["members"]))
    return TtirProgram(m, kernels, groups)


def random_inputs(prog, seed=0, device="cuda"):
    """Seeded random inputs for a program (normal, scaled down for 16-bit types)."""
    import torch

    g = torch.Generator(device="cpu").manual_seed(seed)
    out = []
    for b in prog.inputs:
        dt = getattr(torch, DTYPES[b["dtype"]])
        x = torch.randn(tuple(b["shape"]), generator=g, dtype=torch.float32) * 0.5
        out.append(x.to(dt).to(device))
    return out


def rel_l2(a, b):
    """The relative L2 error of `a` against `b`."""
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _python_build(path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("efir_ttir_check_" + os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def add_parser(sub):
    """The `run-ttir` subcommand's arguments."""
    p = sub.add_parser("run-ttir", help="compile and run a TTIR build (efir-translate --to-ttir --output-dir)")
    p.add_argument("manifest", help="DIR/NAME.ttir.json")
    p.add_argument("--check", metavar="MODULE.py", help="compare with this Python build of the program (efir-translate --to-triton)")
    p.add_argument("--time", action="store_true", help="time the TTIR build (and the Python one with --check)")
    p.add_argument("--seed", type=int, default=0)


def main(args):
    """`python -m efir run-ttir`."""
    prog = load(args.manifest)
    xs = random_inputs(prog, args.seed)
    ys = prog.run(*xs)
    ys = ys if isinstance(ys, tuple) else (ys,)
    print(f"@{prog.manifest['program']}: {len(prog.kernels)} kernel(s) in {len(prog.launches())} launch(es); results " + ", ".join(f"{tuple(y.shape)} {y.dtype}" for y in ys))
    ok = True
    mod = None
    if args.check:
        mod = _python_build(args.check)
        ref = mod.run(*xs)
        ref = ref if isinstance(ref, tuple) else (ref,)
        for i, (y, r) in enumerate(zip(ys, ref)):
            e = rel_l2(y, r)
            ok &= e <= 1e-2
            print(f"result {i}: relative L2 against the Python build {e:.3e} ({'ok' if e <= 1e-2 else 'MISMATCH'})")
    if args.time:
        from triton.testing import do_bench

        t = do_bench(lambda: prog.run(*xs))
        line = f"time: TTIR {t * 1e3:.2f} us"
        if mod is not None:
            tp = do_bench(lambda: mod.run(*xs))
            line += f", Python {tp * 1e3:.2f} us, ratio {t / tp:.3f}"
        print(line)
    return 0 if ok else 1
