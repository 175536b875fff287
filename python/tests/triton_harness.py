"""Run efir's generated Triton modules against the efir interpreter.

Used by test_triton_cpu.py, test_triton_store_view.py and the other tests
that run kernels (TRITON_INTERPRET=1, torch on the CPU): `interpreted_triton`
is their shared prelude, `source_efir` imports this checkout's package. A
module comes from `efir-translate --to-triton`; the reference outputs and
the inputs come from `efir-run --dump-inputs`.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def interpreted_triton():
    """The prelude of a test module that runs generated kernels on the CPU,
    called at its import: Triton's interpreter (TRITON_INTERPRET=1 before
    triton is imported; conftest.py sets it too, before any test module),
    torch and triton imported, or the module skipped where they are missing
    unless EFIR_REQUIRE_TRITON=1 (CI, whose venv has them) makes that an
    error. Returns torch."""
    os.environ["TRITON_INTERPRET"] = "1"
    import pytest

    try:
        import torch
        import triton  # noqa: F401
    except ImportError:  # pragma: no cover
        if os.environ.get("EFIR_REQUIRE_TRITON") == "1":
            raise
        pytest.skip("torch and triton are not installed", allow_module_level=True)
    _interpreter_bf16_dot()
    return torch


def _interpreter_bf16_dot():
    """Triton's interpreter (3.x, up to 3.9 at least) keeps bf16 tensors as
    their raw uint16 bits and its `tl.dot` multiplies those integers
    (`np.matmul` on the bits; only fp8 operands are converted first), so
    every bf16 product it computes is garbage (relative error ~1e9 on a
    bf16 attention). On the GPU the product is right. Here the interpreter's
    dot gets its bf16 operands as the f32 values they hold (exactly)."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    if getattr(builder.create_dot, "_efir_bf16", False):
        return
    original = builder.create_dot

    def widen(x):
        if x.dtype.scalar == tl.bfloat16:
            bits = x.data.astype(np.uint32) << np.uint32(16)
            return interpreter.TensorHandle(bits.view(np.float32), tl.float32)
        return x

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        return original(self, widen(a), widen(b), d, input_precision, max_num_imprecise_acc)

    create_dot._efir_bf16 = True
    builder.create_dot = create_dot


def source_efir():
    """The efir package of this checkout (python/ first on sys.path),
    imported; importing it registers the torch.compile backend."""
    sys.path.insert(0, str(ROOT / "python"))
    import efir

    return efir


def tool(name):
    d = os.environ.get("EFIR_BIN_DIR", str(ROOT / "target" / "debug"))
    return str(pathlib.Path(d) / name)


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r


def load_module(path):
    name = "efir_gen_" + pathlib.Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def reference(efir_file, func, out_dir, seed=0):
    """Inputs and interpreter outputs of `func` (numpy arrays, in order)."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    sh(tool("efir-run"), str(efir_file), "--func", func, "--seed", str(seed),
       "--dump-inputs", "--output-dir", str(out_dir), "--precision", "f64")
    return out_dir


def rel_l2(out, ref):
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    den = np.linalg.norm(ref.ravel())
    return float(np.linalg.norm((out - ref).ravel()) / (den if den > 0 else 1.0))


def check_module(py_path, efir_file, func, work, config=None, device="cpu"):
    """Run the module on the interpreter's inputs; the rel L2 error per output."""
    import torch

    mod = load_module(py_path)
    d = reference(efir_file, func, work)
    inputs = []
    for name, shape, dtype in mod.INPUTS:
        a = np.load(d / f"in_{name}.npy")
        inputs.append(torch.from_numpy(np.ascontiguousarray(a)).to(device=device, dtype=dtype))
    outs = mod.run(*inputs, config=config)
    if not isinstance(outs, tuple):
        outs = (outs,)
    errs = []
    for i, o in enumerate(outs):
        ref = np.load(d / f"out{i}.npy")
        errs.append(rel_l2(o.detach().to("cpu", torch.float64).numpy(), ref))
    return errs
