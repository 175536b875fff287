"""Kernels over a symbolic extent (issue 33): one module emitted by
`efir-translate --to-triton` for a program with `|@dyn0|` rows, run with
TRITON_INTERPRET=1 and torch on the CPU at several sizes against the efir
interpreter at each size (`efir-run --dim dyn0=N`, fresh seeded inputs,
relative L2 <= 1e-2). The same module object (the same jitted kernels)
serves every size; inputs whose symbolic dims disagree are a clear error.

Programs: a pointwise op, a row statistic over static dims (rms norm), a
reduction along the symbolic dim (one padded block of NP_dyn0), a matmul
with symbolic K (a loop over K tiles), and rmsnorm_mlp with symbolic M (lit-tests/Translate/triton-symbolic-*.efir
check the emitted text).
"""

import numpy as np
import pytest
import triton_harness as h

torch = h.interpreted_triton()

ROOT = h.ROOT
TOL = 1e-2
SIZES = (3, 16, 17)

PROGRAMS = {
    "pw": """
func @pw(%x: tensor<|@dyn0|x64xf32>, %y: tensor<|@dyn0|x64xf32>) -> tensor<|@dyn0|x64xf32> {
  %a = ew.mul %x, %y : tensor<|@dyn0|x64xf32>
  %b = ew.tanh %a : tensor<|@dyn0|x64xf32>
  return %b : tensor<|@dyn0|x64xf32>
}
""",
    "rows": """
func @rows(%x: tensor<|@dyn0|x48xf32>) -> tensor<|@dyn0|x48xf32> {
  %sq = ew.mul %x, %x : tensor<|@dyn0|x48xf32>
  %ss = tensor.reduce<#red.sum, 1> %sq : tensor<|@dyn0|xf32>
  %ss1 = tensor.reshape %ss : tensor<|@dyn0|x1xf32>
  %r = ew.rsqrt %ss1 : tensor<|@dyn0|x1xf32>
  %y = ew.mul %x, %r : tensor<|@dyn0|x48xf32>
  return %y : tensor<|@dyn0|x48xf32>
}
""",
    "cols": """
func @cols(%x: tensor<|@dyn0|x32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %m = tensor.reduce<#red.max, 0> %x : tensor<32xf32>
  %s = tensor.reduce<#red.sum, 0> %x : tensor<32xf32>
  return %m, %s : tensor<32xf32>, tensor<32xf32>
}
""",
    "kdyn": """
func @kdyn(%a: tensor<32x|@dyn0|xf16>, %b: tensor<|@dyn0|x48xf16>) -> tensor<32x48xf16> {
  %c = tensor.matmul %a, %b : tensor<32x48xf16>
  return %c : tensor<32x48xf16>
}
""",
}


def rmsnorm_mlp():
    """examples/small/rmsnorm_mlp.efir with |@dyn0| rows."""
    src = (ROOT / "examples" / "small" / "rmsnorm_mlp.efir").read_text()
    return src.replace("tensor<2x", "tensor<|@dyn0|x").replace("tensor<2xf32>", "tensor<|@dyn0|xf32>")


def emit(tmp_path, name, text):
    src = tmp_path / f"{name}.efir"
    src.write_text(text)
    py = tmp_path / f"{name}.py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(src), "-o", str(py))
    return src, h.load_module(py)


def run_at(mod, src, func, n, work, config=None, sym="dyn0", extra=()):
    """The module's outputs at `sym` = n against the interpreter's: the rel
    L2 error per output."""
    d = work / f"ref_{func}_{n}"
    h.sh(h.tool("efir-run"), str(src), "--func", func, "--dim", f"{sym}={n}", "--seed", str(n),
         "--dump-inputs", "--output-dir", str(d), "--precision", "f64", *extra)
    inputs = [torch.from_numpy(np.ascontiguousarray(np.load(d / f"in_{name}.npy"))).to(dtype)
              for name, _, dtype in mod.INPUTS]
    outs = mod.run(*inputs, config=config)
    outs = outs if isinstance(outs, tuple) else (outs,)
    errs = []
    for i, o in enumerate(outs):
        ref = np.load(d / f"out{i}.npy")
        assert tuple(o.shape) == ref.shape, (func, n, tuple(o.shape), ref.shape)
        errs.append(h.rel_l2(o.to(torch.float64).numpy(), ref))
    return errs


@pytest.mark.parametrize("name", sorted(PROGRAMS) + ["rmsnorm_mlp"])
def test_one_module_every_size(name, tmp_path):
    text = rmsnorm_mlp() if name == "rmsnorm_mlp" else PROGRAMS[name]
    src, mod = emit(tmp_path, name, text)
    assert any(s == "dyn0" for _, shape, _ in mod.INPUTS for s in shape), mod.INPUTS
    kernels = [v for k, v in vars(mod).items() if k.startswith("_k")]
    for n in SIZES:
        errs = run_at(mod, src, name, n, tmp_path)
        assert max(errs) <= TOL, (name, n, errs)
    # The same jitted kernels served every size (one module object, no
    # re-translation, nothing rebound).
    assert kernels == [v for k, v in vars(mod).items() if k.startswith("_k")]


def test_a_partitioned_symbolic_extent(tmp_path):
    """examples/tiled/attn_decode.efir with |@s| keys split by @p
    (lit-tests/Translate/triton-symbolic-split.efir): the online softmax's
    loop over key tiles runs NT_p trips, a runtime integer, the last tile
    masked; blocks of 16 keys and of 1 (one key per trip)."""
    src = ROOT / "lit-tests" / "Translate" / "triton-symbolic-split.efir"
    py = tmp_path / "attn.py"
    h.sh(h.tool("efir-translate"), "--to-triton", str(src), "--func", "attn_decode", "-o", str(py))
    mod = h.load_module(py)
    for n, cfg in ((3, None), (17, None), (17, {"BLOCK_p": 1})):
        errs = run_at(mod, src, "attn_decode", n, tmp_path, config=cfg, sym="s", extra=("--tile", "p=4"))
        assert max(errs) <= TOL, (n, cfg, errs)


def test_smallest_blocks(tmp_path):
    """Blocks smaller than the size: several tiles along the symbolic dim,
    the last one partial, at two sizes."""
    src, mod = emit(tmp_path, "rows", PROGRAMS["rows"])
    # @g0_0: the automatic grid axis over the rows (blocks of 2: 3 tiles at
    # 5 rows, the last one half empty; 8 at 16).
    assert 2 in mod.CONFIG_SPACE["BLOCK_g0_0"], mod.CONFIG_SPACE
    cfg = {"BLOCK_g0_0": 2}
    for n in (5, 16):
        assert max(run_at(mod, src, "rows", n, tmp_path, config=cfg)) <= TOL
    # A symbolic K: a loop over K tiles of 16, the last one partial.
    src, mod = emit(tmp_path, "kdyn", PROGRAMS["kdyn"])
    assert 16 in mod.CONFIG_SPACE["BLOCK_r_dyn0"], mod.CONFIG_SPACE
    assert max(run_at(mod, src, "kdyn", 40, tmp_path, config={"BLOCK_r_dyn0": 16})) <= TOL


def test_disagreeing_sizes_are_an_error(tmp_path):
    _, mod = emit(tmp_path, "pw", PROGRAMS["pw"])
    x, y = torch.randn(3, 64), torch.randn(4, 64)
    with pytest.raises(ValueError, match=r"input %y: dim 0 \(symbolic extent @dyn0\) is 4, but an earlier input has @dyn0 = 3"):
        mod.run(x, y)
    with pytest.raises(ValueError, match=r"input %y: expected \('dyn0', 64\)"):
        mod.run(x, torch.randn(3, 65))


@pytest.mark.parametrize("path", ["binary", "native"])
def test_translate_ranks_at_the_given_sizes(path, tmp_path):
    """`Stages.translate(dims=...)` (what a family ranks its candidates
    with: its example sizes) reaches the translator through the binary's
    `--dim` and the native module's `dims=` alike: the emitted module says
    the estimate's size; without it, the default (64)."""
    h.source_efir()
    from efir.stages import CompileError, Stages, native

    nat = native() if path == "native" else None
    if path == "native" and nat is None:
        pytest.skip("the native module efir._efir is not built")
    (tmp_path / "p.efir").write_text(PROGRAMS["pw"])
    tools = Stages(tmp_path, nat, [])
    (src8,) = [s for _, s in tools.translate("p.efir", dims={"dyn0": 8})[0]]
    assert "estimate and default blocks at 8" in src8
    (src,) = [s for _, s in tools.translate("p.efir")[0]]
    assert "estimate and default blocks at 64" in src
    with pytest.raises(CompileError, match="positive integer"):
        tools.translate("p.efir", dims={"dyn0": 0})
