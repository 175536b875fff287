"""Both builds of ttir_check cases compiled for sm_90 without a GPU (issue 31).

For each case directory (bench/gpu/ttir/<case>, from bench/gpu/ttir_prepare.sh),
compile its TTIR kernels (`.ttir`, as efir.ttir.load does) and the Python
build's kernels (`<stem>.py`: its run() is called on CPU tensors with the
kernels' launches captured, and each launch's kernel compiled from its AST
at the launch's constexprs, num_warps and num_stages, pointer arguments
16-byte aligned as Triton's JIT specializes them) for sm_90 with the local
Triton, and print per kernel: registers and spill bytes (ptxas -v on the
PTX), shared memory, and the PTX's global loads/stores by width and its
mma count. Two builds of one kernel at one schedule should agree; a
difference points at what the GPU times will show.

    python3 bench/gpu/ttir_static.py bench/gpu/ttir/ngpt_B16 [...]   (DUMP=1: ttgir/ptx to /tmp/cmp)

Needs torch and Triton (CPU is enough: Triton's passes, LLVM and ptxas).
"""
import glob
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter

import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TGT = GPUTarget("cuda", 90, 32)
DUMP = os.environ.get("DUMP") and "/tmp/cmp"
if DUMP:
    os.makedirs(DUMP, exist_ok=True)
TY = {torch.float16: "*fp16", torch.bfloat16: "*bf16", torch.float32: "*fp32", torch.int32: "*i32", torch.int64: "*i64", torch.bool: "*i1"}

def stats(c):
    """Registers, spills, shared memory and global memory ops of a compiled kernel."""
    ptx = c.asm["ptx"]
    m = c.metadata
    ld = Counter(re.findall(r"ld\.global(?:\.[a-z0-9]+)*", ptx))
    st = Counter(re.findall(r"st\.global(?:\.[a-z0-9]+)*", ptx))
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "k.ptx")
        with open(path, "w") as f:
            f.write(ptx)
        # (A newer Triton's PTX may need its ptxas-blackwell.)
        for pt in ("ptxas", "ptxas-blackwell"):
            pt = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", pt)
            r = subprocess.run([pt, "-arch=sm_90a", "-v", path, "-o", os.devnull], capture_output=True, text=True)
            if r.returncode == 0:
                break
        r = r.stderr
    regs = ",".join(re.findall(r"Used (\d+) registers", r))
    sp = ",".join(re.findall(r"(\d+) bytes spill stores", r))
    return (f"regs={regs} spills={sp} smem={m.shared} warps={m.num_warps} stages={m.num_stages} "
            f"ld={dict(ld)} st={dict(st)} mma={ptx.count('mma')} ptxlines={ptx.count(chr(10))}")


def python_kernels(py):
    """The Python build's kernels as its run() launches them, compiled."""
    spec = importlib.util.spec_from_file_location("m", py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    log = []
    # Launches are captured by the kernels' `[grid]`, so that a kernel that
    # calls another (a launch group's) still sees the real one.
    orig = triton.runtime.jit.KernelInterface.__getitem__

    def capture(self, grid):
        return lambda *args, **kw: log.append((self, grid, args, kw))

    triton.runtime.jit.KernelInterface.__getitem__ = capture
    try:
        xs = [torch.randn(s).to(dt) for _, s, dt in mod.INPUTS]
        mod.run(*xs)
    finally:
        triton.runtime.jit.KernelInterface.__getitem__ = orig
    out = []
    for fn, grid, args, kw in log:
        names = fn.arg_names
        sig, cons, attrs = {}, {}, {}
        kw = dict(kw); nw = kw.pop("num_warps", 4); ns = kw.pop("num_stages", 2)
        given = dict(zip(names, args)); given.update(kw)
        for i, p in enumerate(fn.params):
            n = names[i]
            a = given.get(n, p.default)
            if p.is_constexpr:
                sig[n] = "constexpr"; cons[n] = a
            elif isinstance(a, torch.Tensor):
                sig[n] = TY[a.dtype]; attrs[(i,)] = [["tt.divisibility", 16]]
            elif isinstance(a, int):
                sig[n] = "i32"
                if a % 16 == 0 and a != 0: attrs[(i,)] = [["tt.divisibility", 16]]
            else:
                sig[n] = "fp32"
        src = ASTSource(fn, sig, cons, attrs)
        out.append((fn.__name__, grid, nw, ns, triton.compile(src, target=TGT, options={"num_warps": nw, "num_stages": ns})))
    return out

def main():
    for d in sys.argv[1:]:
        case(d.rstrip("/"))


def case(d):
    man = glob.glob(os.path.join(d, "*.ttir.json"))[0]
    m = json.load(open(man))
    print("==", d)
    # What runs: each launch group (efir.ttir launches a group instead of
    # its members) and the kernels in none.
    groups = m.get("groups") or []
    members = {i for g in groups for i in g["members"]}
    launched = list(groups) + [k for i, k in enumerate(m["kernels"]) if i not in members]
    for k in launched:
        try:
            c = triton.compile(os.path.join(d, k["file"]), target=TGT, options={"num_warps": k["num_warps"], "num_stages": k["num_stages"]})
        except Exception as e:  # a kernel Triton cannot compile: say so, go on
            print(f"TTIR {k['name']:10} grid={k['grid']} FAILED {type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}")
            continue
        print(f"TTIR {k['name']:10} grid={k['grid']} {stats(c)}")
        if DUMP:
            open(f"{DUMP}/{os.path.basename(d)}.{k['name']}.ttir.ttgir", "w").write(c.asm["ttgir"])
            open(f"{DUMP}/{os.path.basename(d)}.{k['name']}.ttir.ptx", "w").write(c.asm["ptx"])
    for name, grid, nw, ns, c in python_kernels(man[:-len(".ttir.json")] + ".py"):
        print(f"PY   {name:10} grid={grid} {stats(c)}")
        if DUMP:
            open(f"{DUMP}/{os.path.basename(d)}.{name}.py.ttir", "w").write(c.asm["ttir"])
            open(f"{DUMP}/{os.path.basename(d)}.{name}.py.ttgir", "w").write(c.asm["ttgir"])
            open(f"{DUMP}/{os.path.basename(d)}.{name}.py.ptx", "w").write(c.asm["ptx"])

if __name__ == "__main__":
    main()
