"""Programmatic dependent launch in the generated modules (`pdl` of a
configuration, issue 27): a program of several launches chains them on
sm_90 and later, every kernel waiting for the one launched before it.

The launches are captured (no GPU): with `pdl` on, every launch after the
program's first is a dependent launch (`launch_pdl=True`) and every kernel
gets `PDL=True`; with it off, or on a CPU, none. The kernels compile for an
sm_90 target with the CPU's Triton (its passes, LLVM and ptxas), and the
PTX holds the grid-dependency wait and trigger exactly where `PDL` is on.
The numerics of the modules (PDL off on the CPU) are covered by the
interpreter tests of every workload.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("EFIR_BIN_DIR", ROOT / "target" / "debug"))

pytest.importorskip("torch")
pytest.importorskip("triton")

# Run without Triton's interpreter (the JIT functions must be compilable):
# capture run()'s launches, then compile each launched kernel for sm_90.
PROBE = r"""
import importlib.util, json, sys
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

spec = importlib.util.spec_from_file_location("m", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
cfg = json.loads(sys.argv[2])
compile_ = sys.argv[3] == "1"
mod._pdl_on = lambda c, dev: bool(c.get("pdl"))  # as on an sm_90 GPU
log = []
orig = triton.runtime.jit.KernelInterface.__getitem__
triton.runtime.jit.KernelInterface.__getitem__ = lambda self, grid: (lambda *a, **kw: log.append((self, a, kw)))
try:
    mod.run(*[torch.randn(s).to(dt) for _, s, dt in mod.INPUTS], config=cfg)
finally:
    triton.runtime.jit.KernelInterface.__getitem__ = orig
TY = {torch.float16: "*fp16", torch.float32: "*fp32"}
out = []
for fn, args, kw in log:
    kw = dict(kw)
    row = {"kernel": fn.__name__, "launch_pdl": kw.pop("launch_pdl", False), "PDL": bool(kw.get("PDL"))}
    if compile_:
        nw, ns = kw.pop("num_warps", 4), kw.pop("num_stages", 2)
        kw.pop("maxnreg", None)
        given = dict(zip(fn.arg_names, args)); given.update(kw)
        sig, cons = {}, {}
        for i, p in enumerate(fn.params):
            a = given.get(fn.arg_names[i], p.default)
            if p.is_constexpr:
                sig[fn.arg_names[i]] = "constexpr"; cons[fn.arg_names[i]] = a
            elif isinstance(a, torch.Tensor):
                sig[fn.arg_names[i]] = TY[a.dtype]
            else:
                sig[fn.arg_names[i]] = "i32"
        c = triton.compile(ASTSource(fn, sig, cons), target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": nw, "num_stages": ns})
        ptx = c.asm["ptx"]
        row["wait"] = "griddepcontrol.wait" in ptx
        row["trigger"] = "griddepcontrol.launch_dependents" in ptx
    out.append(row)
print(json.dumps(out))
"""


def _module(tmp_path):
    exe = BIN / "efir-translate"
    if not exe.exists():
        pytest.skip(f"no {exe} (build with cargo build)")
    out = tmp_path / "group.py"
    subprocess.run([str(exe), "--to-triton", str(ROOT / "lit-tests/Translate/triton-launch-group.efir"), "-o", str(out)],
                   check=True)
    return out


def _launches(module, cfg, compile_=False):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    r = subprocess.run([sys.executable, "-c", PROBE, str(module), json.dumps(cfg), "1" if compile_ else "0"],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_pdl_is_offered_and_on_by_default_for_two_launches(tmp_path):
    text = _module(tmp_path).read_text()
    assert '"pdl": 1,' in text and '"pdl": [0, 1],' in text


def test_dependent_launches_after_the_first(tmp_path):
    mod = _module(tmp_path)
    on = _launches(mod, {"pdl": 1})
    # the group launch (the gate kernel and the split-K partials), then the reduce
    assert [r["kernel"] for r in on] == ["_h0_1", "_k2__13"]
    assert [r["launch_pdl"] for r in on] == [False, True]
    assert all(r["PDL"] for r in on)
    # The group's members at different warps launch one by one: the
    # second member is a dependent launch too.
    split = _launches(mod, {"pdl": 1, "num_warps_k1": 8})
    assert [r["kernel"] for r in split] == ["_k0__5", "_k1__10", "_k2__13"]
    assert [r["launch_pdl"] for r in split] == [False, True, True]
    off = _launches(mod, {"pdl": 0})
    assert [r["launch_pdl"] for r in off] == [False, False]
    assert not any(r["PDL"] for r in off)


def test_pdl_kernels_compile_for_sm90_with_the_wait(tmp_path):
    mod = _module(tmp_path)
    for r in _launches(mod, {"pdl": 1}, compile_=True):
        assert r["wait"] and r["trigger"], r
    for r in _launches(mod, {"pdl": 0}, compile_=True):
        assert not r["wait"] and not r["trigger"], r


def test_pdl_is_off_on_the_cpu(tmp_path):
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("group_pdl", _module(tmp_path))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert m._pdl_on({"pdl": 1}, torch.device("cpu")) is False
    assert m._launch_pdl(False) == {} and m._launch_pdl(True) == {"launch_pdl": True}
