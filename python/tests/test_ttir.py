"""`python -m efir run-ttir`'s host side (efir.ttir), and Triton reading the
TTIR that `efir-translate --to-ttir` builds through MLIR (issue 31).

The numeric tests run the TTIR builds of the small workloads, the
lit-tests/TTIR programs (a K loop, an uneven reduction, a batched matmul,
online-softmax attention, split-K collects, slices and reshapes) and the
tiled and derived examples with parallel reductions, with a numpy
interpreter of the TTIR (ttir_interp.py) against efir's interpreter
(efir-run, EFIR_BIN_DIR). The host test needs torch only (the kernels are stand-ins that record their
launches). The Triton test needs an efir-translate built with the `mlir`
feature: EFIR_TTIR_TRANSLATE names it (EFIR_BIN_DIR's efir-translate is
used when it has the feature); without one it is skipped. It compiles every
kernel of a workload from its .ttir file for an sm_90 target with the CPU's
Triton (parsing, Triton's passes, LLVM and ptxas: no GPU needed).
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from efir import ttir  # noqa: E402


class FakeKernel:
    def __init__(self, log, name, fn):
        self.log, self.name, self.fn = log, name, fn

    def __getitem__(self, grid):
        def launch(*args):
            self.log.append((self.name, grid, [a.data_ptr() for a in args]))
            self.fn(*args)

        return launch


def test_host_allocates_and_launches_in_order():
    m = {
        "program": "p",
        "buffers": [
            {"name": "x", "shape": [2, 3], "dtype": "f32", "input": 0, "output": None},
            {"name": "t", "shape": [2, 3], "dtype": "f32", "input": None, "output": None},
            {"name": "y", "shape": [2], "dtype": "f16", "input": None, "output": 0},
        ],
        "kernels": [
            {"name": "k0_t", "file": "p.k0.ttir", "args": [0, 1], "grid": 4, "num_warps": 4, "num_stages": 2},
            {"name": "k1_y", "file": "p.k1.ttir", "args": [1, 2], "grid": 1, "num_warps": 4, "num_stages": 2},
        ],
    }
    log = []

    def k0(x, t):
        t.copy_(x * 2)

    def k1(t, y):
        y.copy_(t.sum(1).to(y.dtype))

    prog = ttir.TtirProgram(m, [FakeKernel(log, "k0", k0), FakeKernel(log, "k1", k1)])
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    y = prog.run(x)
    assert y.dtype == torch.float16 and y.tolist() == [6.0, 24.0]
    assert [(n, g) for n, g, _ in log] == [("k0", (4, 1, 1)), ("k1", (1, 1, 1))]
    # The intermediate buffer is the one k0 writes and k1 reads.
    assert log[0][2][1] == log[1][2][0]
    with pytest.raises(ValueError, match="input %x"):
        prog.run(x.half())
    with pytest.raises(TypeError, match="takes 1 inputs"):
        prog.run(x, x)


def _translate():
    t = os.environ.get("EFIR_TTIR_TRANSLATE")
    if not t:
        t = os.path.join(os.environ.get("EFIR_BIN_DIR", ROOT / "target" / "debug"), "efir-translate")
    if not os.path.exists(t):
        return None
    out = subprocess.run([t, "--print-features"], capture_output=True, text=True).stdout.split()
    return t if "mlir" in out else None


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_triton_compiles_the_ttir(tmp_path):
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    subprocess.run(
        [_translate(), "--to-ttir", str(ROOT / "examples/small/rmsnorm_mlp.efir"), "--output-dir", str(tmp_path)],
        check=True,
    )
    m = json.loads((tmp_path / "rmsnorm_mlp.ttir.json").read_text())
    # (How many kernels is the planner's business: one or two here.)
    assert m["kernels"] and m["kernels"][-1]["name"].endswith("_y")
    for k in m["kernels"]:
        c = triton.compile(
            str(tmp_path / k["file"]),
            target=GPUTarget("cuda", 90, 32),
            options={"num_warps": k["num_warps"], "num_stages": k["num_stages"]},
        )
        assert c.name == k["name"]
        assert "ttgir" in c.asm and "ptx" in c.asm


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_triton_compiles_streamed_splitk(tmp_path):
    # A split-K kernel streaming its tiles of K in masked sub-blocks (an
    # scf.for carrying the dot's accumulator) compiles for sm_90, the loop
    # kept.
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    subprocess.run([_translate(), "--to-ttir", str(ROOT / "lit-tests/TTIR/splitk-sub.efir"), "--func", "past",
                    "--output-dir", str(tmp_path)], check=True)
    m = json.loads((tmp_path / "past.ttir.json").read_text())
    k = m["kernels"][0]
    c = triton.compile(str(tmp_path / k["file"]), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": k["num_warps"], "num_stages": k["num_stages"]})
    assert c.name == "k0_c" and "ptx" in c.asm
    assert "scf.for" in c.asm["ttgir"]


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_triton_compiles_launch_groups(tmp_path):
    # A launch group's module (private members, a public function calling
    # the member its program id falls in) compiles for sm_90 as one kernel:
    # the public function, with the calls inlined by LLVM (the TTGIR keeps
    # them, as it keeps the Python build's group kernel's calls).
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    subprocess.run([_translate(), "--to-ttir", str(ROOT / "lit-tests/TTIR/launch-group.efir"), "--func", "three",
                    "--output-dir", str(tmp_path)], check=True)
    m = json.loads((tmp_path / "three.ttir.json").read_text())
    assert [g["members"] for g in m["groups"]] == [[0, 1, 2]]
    g = m["groups"][0]
    assert g["grid"] == sum(m["kernels"][i]["grid"] for i in g["members"])
    c = triton.compile(str(tmp_path / g["file"]), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": g["num_warps"], "num_stages": g["num_stages"]})
    assert c.name == "_h0_1_2" and "ptx" in c.asm
    assert c.asm["ttgir"].count("tt.call @k") == 3 and "call." not in c.asm["ptx"]


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_ttir_pdl_chains_launches(tmp_path):
    # A program of two launches chains them by programmatic dependent launch
    # as the Python build's default does: every launched function waits for
    # the launch before it and lets the next start (griddepcontrol in its
    # PTX for sm_90), and every kernel but the program's first launches with
    # Triton's launch_pdl; for a GPU without it (sm_80) the lines are dropped.
    # A program of one launch has none.
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget

    subprocess.run([_translate(), "--to-ttir", str(ROOT / "lit-tests/TTIR/launch-group.efir"), "--func", "group",
                    "--output-dir", str(tmp_path)], check=True)
    py = subprocess.run([_translate(), "--to-triton", str(ROOT / "lit-tests/TTIR/launch-group.efir"), "--func", "group"],
                        check=True, capture_output=True, text=True).stdout
    m = json.loads((tmp_path / "group.ttir.json").read_text())
    assert m["pdl"] is True and '"pdl": 1,' in py
    prog = ttir.load(str(tmp_path / "group.ttir.json"), target=GPUTarget("cuda", 90, 32))
    assert [k.metadata.launch_pdl for k in prog.kernels] == [False, True, True]
    assert [g.metadata.launch_pdl for g in prog.groups] == [False]  # the group holds kernel 0
    for c in prog.kernels + prog.groups:
        assert "griddepcontrol.wait" in c.asm["ptx"] and "griddepcontrol.launch_dependents" in c.asm["ptx"], c.name
    old = ttir.load(str(tmp_path / "group.ttir.json"), target=GPUTarget("cuda", 80, 32))
    for c in old.kernels + old.groups:
        assert "griddepcontrol" not in c.asm["ptx"] and not c.metadata.launch_pdl, c.name
    one = tmp_path / "one"
    subprocess.run([_translate(), "--to-ttir", str(ROOT / "lit-tests/TTIR/pointwise.efir"), "--output-dir", str(one)], check=True)
    for man in one.glob("*.ttir.json"):
        mm = json.loads(man.read_text())
        if len(mm["kernels"]) == 1:
            assert mm["pdl"] is False
            assert "griddepcontrol" not in (one / mm["kernels"][0]["file"]).read_text()


# The ops of the Triton (and arith/math/scf) dialects that Triton 3.6's
# ConvertTritonToTritonGPU converts on tensors (its patterns; the H200 runs
# Triton 3.6). The CPU's Triton may be newer and accept more: 3.9 converts
# arith.negf, 3.6 failed every kernel with a sigmoid on it (issue 31).
TRITON36_OPS = {
    "arith.constant", "arith.addi", "arith.subi", "arith.muli", "arith.divui", "arith.divsi", "arith.ceildivui",
    "arith.ceildivsi", "arith.floordivsi", "arith.remui", "arith.remsi", "arith.andi", "arith.ori", "arith.xori",
    "arith.shli", "arith.shrui", "arith.shrsi", "arith.addf", "arith.subf", "arith.maximumf", "arith.maxnumf",
    "arith.maxsi", "arith.maxui", "arith.minimumf", "arith.minnumf", "arith.minsi", "arith.minui", "arith.mulf",
    "arith.divf", "arith.remf", "arith.cmpi", "arith.cmpf", "arith.select", "arith.trunci", "arith.truncf",
    "arith.extui", "arith.extsi", "arith.extf", "arith.sitofp", "arith.fptosi", "arith.fptoui", "arith.uitofp",
    "math.exp", "math.exp2", "math.floor", "math.ceil", "math.cos", "math.sin", "math.log", "math.log2", "math.erf",
    "math.absf", "math.absi", "math.sqrt", "math.rsqrt", "math.fma",
    "scf.for", "scf.yield", "scf.if",
    "tt.func", "tt.return", "tt.get_program_id", "tt.make_range", "tt.splat", "tt.broadcast", "tt.expand_dims",
    "tt.reshape", "tt.trans", "tt.addptr", "tt.load", "tt.store", "tt.dot", "tt.reduce", "tt.reduce.return",
    # A launch group's calls of its members (inlined before the conversion;
    # test_triton_compiles_launch_groups).
    "tt.call",
    # Programmatic dependent launch's griddepcontrol (as Triton 3.6's own
    # tl.extra.cuda.gdc_wait writes it; test_ttir_pdl_chains_launches).
    "tt.elementwise_inline_asm",
}


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_ttir_ops_triton36_converts(tmp_path):
    import re

    ops = {}
    for w in ("gated_mlp", "rmsnorm_swiglu", "ngpt", "attn_decode"):
        subprocess.run([_translate(), "--to-ttir", str(ROOT / f"examples/small/{w}.efir"), "--output-dir",
                        str(tmp_path / w)], check=True)
        for f in (tmp_path / w).glob("*.ttir"):
            for op in re.findall(r'(?:^\s*|= |")((?:arith|math|scf|tt|cf|ub)\.[a-z_0-9.]+)', f.read_text(), re.M):
                ops.setdefault(op, f.name)
    assert "arith.subf" in ops and "tt.dot" in ops and "tt.reduce" in ops, ops
    assert {o: f for o, f in ops.items() if o not in TRITON36_OPS} == {}


CASES = [(f"examples/small/{w}.efir", w) for w in (
    "attn_decode", "attn_prefill", "gated_mlp", "layernorm_gemm", "lora", "ngpt", "rmsnorm_mlp", "rmsnorm_swiglu")] + [
    ("lit-tests/TTIR/matmul-k-loop.efir", "mm"),
    ("lit-tests/TTIR/sibling-loops.efir", "gate"),
    ("lit-tests/TTIR/pv-guard-f16.efir", "attn_prefill_c0"),
    ("lit-tests/TTIR/reduce.efir", "rowmax"),
    ("lit-tests/TTIR/pointwise.efir", "pw"),
    ("lit-tests/TTIR/log1p.efir", "lp"),
    ("lit-tests/TTIR/not-covered.efir", "bmm"),
    ("lit-tests/Translate/ttir-triton36.efir", "mmk"),
    ("lit-tests/Translate/ttir-triton36.efir", "silu"),
    ("lit-tests/Translate/ttir-triton36.efir", "rms"),
]


# Programs whose results depend on the tile sizes (an axis over a tile
# count): the interpreter runs at the tiles the schedule pins.
TILES = {
    ("lit-tests/TTIR/tile-counts.efir", "tgrid"): "k768=16,j=32",
    ("lit-tests/TTIR/tile-counts.efir", "tloop"): "k768=16,j=32",
}


def _build_and_run(tmp_path, src, func, mutate=None, seed=0):
    import numpy as np

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h
    import ttir_interp

    out = tmp_path / "ttir"
    subprocess.run([_translate(), "--to-ttir", str(ROOT / src), "--func", func, "--output-dir", str(out)], check=True)
    m = json.loads((out / f"{func.replace('.', '_')}.ttir.json").read_text())
    if (src, func) in TILES:
        # efir's interpreter at the tile sizes of the TTIR build's schedule.
        d = tmp_path / "ref"
        h.sh(h.tool("efir-run"), str(ROOT / src), "--func", func, "--seed", str(seed), "--tile", TILES[(src, func)],
             "--dump-inputs", "--output-dir", str(d), "--precision", "f64")
    else:
        d = h.reference(ROOT / src, func, tmp_path / "ref", seed=seed)
    ins = sorted((b for b in m["buffers"] if b["input"] is not None), key=lambda b: b["input"])
    xs = [np.load(d / f"in_{b['name']}.npy") for b in ins]
    texts = [(out / k["file"]).read_text() for k in m["kernels"]]
    if mutate:
        texts = [mutate(t) for t in texts]
    ys = ttir_interp.run(m, texts, xs)
    errs = [h.rel_l2(y, np.load(d / f"out{i}.npy")) for i, y in enumerate(ys)]
    if m.get("groups") and not mutate:
        # Again with the launch groups in place of their members.
        ys = ttir_interp.run(m, texts, xs, groups=[(out / g["file"]).read_text() for g in m["groups"]])
        errs += [h.rel_l2(y, np.load(d / f"out{i}.npy")) for i, y in enumerate(ys)]
    return errs


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
@pytest.mark.parametrize("src,func", CASES, ids=[c[1] for c in CASES])
def test_ttir_numerics(tmp_path, src, func):
    errs = _build_and_run(tmp_path, src, func)
    assert errs and all(e <= 1e-2 for e in errs), errs


# Kernels with loops of parallel reductions (online-softmax attention: a
# repaired max/sum/sum reducer over key tiles, with the causal mask in
# prefill), split-K kernels whose partial tiles are collected into a buffer
# (a dim of |@k| tiles) and reduced by the next kernel, tuples of reducer
# states, a reduction over an axis that also tiles its result, and ops that
# read memory at other indices (slices, concatenations, reshapes that split
# or merge dims). Each runs
# on fresh random inputs (the seed is in the failure message).
LOOPS = [
    ("examples/derivations/attn_decode.efir", "attn_decode"),
    ("examples/derivations/attn_prefill.efir", "attn_prefill"),
    ("examples/derivations/online_softmax.efir", "online_softmax"),
    ("examples/tiled/attn_decode.efir", "attn_decode"),
    ("examples/tiled/attn_decode_shared_k.efir", "attn_decode"),
    ("examples/tiled/rowsum_shared_axis.efir", "f"),
    ("examples/derivations/splitk_matmul.efir", "splitk"),
    ("examples/derivations/lora_collect.efir", "lora"),
    ("examples/tiled/lora_splitk.efir", "lora"),
    ("examples/tiled/layernorm_gemm_splitk_stats.efir", "layernorm_gemm"),
    ("lit-tests/TTIR/attention.efir", "attn_decode"),
    ("lit-tests/TTIR/attention.efir", "attn_prefill"),
    ("lit-tests/TTIR/operand-reload.efir", "attn_prefill.c0"),
    ("lit-tests/TTIR/decode-pv-dot.efir", "attn_decode.c0"),
    ("lit-tests/TTIR/collect.efir", "splitk"),
    ("lit-tests/TTIR/collect.efir", "pair"),
    ("lit-tests/TTIR/views.efir", "rot"),
    ("lit-tests/TTIR/views.efir", "strided"),
    ("lit-tests/TTIR/views.efir", "regroup"),
    ("lit-tests/TTIR/slice-views.efir", "rot"),
    ("lit-tests/TTIR/slice-views.efir", "tr"),
    ("lit-tests/TTIR/slice-views.efir", "merge"),
    ("lit-tests/TTIR/slice-views.efir", "split3"),
    ("lit-tests/TTIR/slice-views.efir", "tsplit"),
    ("lit-tests/TTIR/slice-views.efir", "tmerge"),
    ("lit-tests/TTIR/batched.efir", "attn"),
    ("lit-tests/TTIR/tile-counts.efir", "tgrid"),
    ("lit-tests/TTIR/tile-counts.efir", "tloop"),
    ("lit-tests/TTIR/int-reduce.efir", "isum"),
    ("lit-tests/TTIR/int-reduce.efir", "imax"),
    ("lit-tests/TTIR/int-reduce.efir", "ploop"),
    ("lit-tests/TTIR/tuples.efir", "stats"),
    ("lit-tests/TTIR/launch-group.efir", "group"),
    ("lit-tests/TTIR/launch-group.efir", "three"),
    ("lit-tests/TTIR/own-blocks.efir", "twok"),
    ("lit-tests/TTIR/own-blocks.efir", "sk"),
    # Split-K tiles streamed in sub-blocks: one trip, one trip with an own
    # block over the tile, four trips, and tiles passing K = 96 (own-blocks
    # sk: K = 100).
    ("lit-tests/TTIR/splitk-sub.efir", "one"),
    ("lit-tests/TTIR/splitk-sub.efir", "clamp"),
    ("lit-tests/TTIR/splitk-sub.efir", "trips"),
    ("lit-tests/TTIR/splitk-sub.efir", "past"),
    # Statistics loops built before the K loop, on their own block.
    ("lit-tests/Translate/ttir-stats-loops.efir", "lngemm"),
    # Kernels storing through views (a head merge after a transpose, a
    # split after a matmul's epilogue, a value with another use, heads
    # repeated to their query group read through the broadcast), and
    # slices and concatenations computing what they read where they load
    # it (the rotary embedding's negated half, a rotation inside a
    # concatenation with the cache, a bias added, a deep sum stored).
    ("lit-tests/Translate/triton-store-view.efir", "merge"),
    ("lit-tests/Translate/triton-store-view.efir", "split"),
    ("lit-tests/Translate/triton-store-view.efir", "both"),
    ("lit-tests/Translate/triton-store-view.efir", "repeat"),
    # Uneven blocks across heads (a split then a transpose), and dims
    # cycled by the transpose (not its own inverse).
    ("lit-tests/TTIR/store-view.efir", "hsplit"),
    ("lit-tests/TTIR/store-view.efir", "cycle"),
    ("lit-tests/Translate/triton-store-view-rotary.efir", "rope"),
    ("lit-tests/Translate/triton-store-view-rotary.efir", "bias"),
    ("lit-tests/Translate/triton-store-view-rotary.efir", "deep"),
    ("lit-tests/Translate/triton-slice.efir", "rot"),
    # An online-softmax loop whose field is a K loop of its own, over V
    # read through the repetition of its heads (narrow accumulators).
    ("lit-tests/TTIR/nested-units.efir", "gqa"),
    # One-query attention with its row padded into the dots, and the
    # flash-decoding twin streaming its splits of keys in sub-blocks.
    ("lit-tests/Translate/triton-decode-padded-row.efir", "attn_decode.c0"),
    ("lit-tests/Translate/triton-flash-decoding-sub-loop.efir", "attn_decode.c4"),
    # Grouped-query decode with the padded row read and stored through views.
    ("lit-tests/Translate/triton-gqa-decode-padded-row.efir", "gqa_decode"),
]


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
@pytest.mark.parametrize("src,func", LOOPS, ids=[f"{pathlib.Path(c[0]).parent.name}/{pathlib.Path(c[0]).stem}/{c[1]}" for c in LOOPS])
def test_ttir_loop_numerics(tmp_path, src, func):
    import random

    seed = random.randrange(1 << 31)
    errs = _build_and_run(tmp_path, src, func, seed=seed)
    assert errs and all(e <= 1e-2 for e in errs), (seed, errs)


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
@pytest.mark.parametrize("func", ["usep", "mixed"])
def test_ttir_tuple_inputs(tmp_path, func):
    # A tuple parameter is one input per field, in order (efir-run takes no
    # tuple parameters: the reference is the program with the fields as
    # parameters, @<func>_flat, on the same inputs).
    import numpy as np

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h
    import ttir_interp

    src = ROOT / "lit-tests/TTIR/tuples.efir"
    out = tmp_path / "ttir"
    subprocess.run([_translate(), "--to-ttir", str(src), "--func", func, "--output-dir", str(out)], check=True)
    m = json.loads((out / f"{func.replace('.', '_')}.ttir.json").read_text())
    assert [(b["name"], b["input"]) for b in m["buffers"] if b["input"] is not None] == [("p.0", 0), ("p.1", 1)]
    d = h.reference(src, f"{func}_flat", tmp_path / "ref", seed=5)
    xs = [np.load(d / "in_a.npy"), np.load(d / "in_b.npy")]
    ys = ttir_interp.run(m, [(out / k["file"]).read_text() for k in m["kernels"]], xs)
    refs = sorted(d.glob("out*.npy"))
    assert len(ys) == len(refs) >= 1
    errs = [h.rel_l2(y, np.load(d / f"out{i}.npy")) for i, y in enumerate(ys)]
    assert all(e <= 1e-2 for e in errs), errs


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
@pytest.mark.parametrize("func", ["corner", "tcorner"])
def test_ttir_wide_offsets(tmp_path, func):
    # A buffer of 2^31 f16 elements (4 GiB, zeroed lazily by the OS: only
    # the pages of its last rows are touched) read at offsets past 2^31,
    # against numpy (efir-run would fill all of it).
    import numpy as np

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import ttir_interp

    out = tmp_path / "ttir"
    subprocess.run([_translate(), "--to-ttir", str(ROOT / "lit-tests/TTIR/wide.efir"), "--func", func,
                    "--output-dir", str(out)], check=True)
    m = json.loads((out / f"{func.replace('.', '_')}.ttir.json").read_text())
    x = np.zeros(1 << 31, dtype=np.float16)
    x2 = x.reshape(65536, 32768)
    x2[65520:, :32] = np.random.default_rng(7).standard_normal((16, 32)).astype(np.float16)
    bufs = [x if b["input"] == 0 else np.zeros(int(np.prod(b["shape"])), dtype=np.float16) for b in m["buffers"]]
    for k in m["kernels"]:
        kern = ttir_interp.Kernel((out / k["file"]).read_text())
        for pid in range(k["grid"]):
            kern.run(bufs, k["args"], pid)
    y = next(bufs[i] for i, b in enumerate(m["buffers"]) if b["output"] == 0).reshape(16, 16)
    corner = x2[65520:, 8:24]
    want = corner + corner if func == "corner" else -corner.T
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(y, want)


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
@pytest.mark.parametrize("name", ["Layers/head-split-rope.efir", "Layers/Inputs/gqa-split.efir"])
def test_ttir_layer_candidates(tmp_path, name):
    # Every candidate compaction finds (8) for a layer's attention (heads
    # split from the projections and rotated; grouped key/value heads)
    # builds through MLIR with the Python build's kernels (their count),
    # none refused (stores through views, reads through broadcasts,
    # slices computing what they read), and matches the interpreter.
    import re

    import numpy as np

    sys.path.insert(0, str(ROOT / "python" / "tests"))
    import triton_harness as h
    import ttir_interp

    cands = tmp_path / "c.efir"
    h.sh(h.tool("efir-opt"), "--saturate", "--compact=max-candidates=8", str(ROOT / "lit-tests" / name), "-o", str(cands))
    text = cands.read_text()
    plan = h.sh(_translate(), "--to-triton", "--print-plan", str(cands), "--output-dir", str(tmp_path / "py")).stderr
    funcs = re.findall(r"^func @([\w.]+)\((.*?)\) ->.*source = @", text, re.M)
    assert len(funcs) == 8, funcs
    for i, (func, sig) in enumerate(funcs):
        out = tmp_path / func
        h.sh(_translate(), "--to-ttir", str(cands), "--func", func, "--output-dir", str(out))
        m = json.loads((out / f"{func.replace('.', '_')}.ttir.json").read_text())
        assert f"@{func}: {len(m['kernels'])} kernel(s)" in plan, (func, len(m["kernels"]), plan)
        d = h.reference(cands, func, tmp_path / f"ref_{func}", seed=i)
        xs = [np.load(d / f"in_{n}.npy") for n in re.findall(r"%(\w+):", sig)]
        ys = ttir_interp.run(m, [(out / k["file"]).read_text() for k in m["kernels"]], xs)
        errs = [h.rel_l2(y, np.load(d / f"out{j}.npy")) for j, y in enumerate(ys)]
        assert errs and all(e <= 1e-2 for e in errs), (func, errs)


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_ttir_numerics_catches_a_wrong_kernel(tmp_path):
    # The check is not vacuous: one product turned into a sum is caught.
    errs = _build_and_run(tmp_path, "examples/small/gated_mlp.efir", "gated_mlp",
                          mutate=lambda t: t.replace("arith.mulf", "arith.addf", 1))
    assert max(errs) > 1e-2, errs


@pytest.mark.skipif(_translate() is None, reason="no efir-translate with the mlir feature (EFIR_TTIR_TRANSLATE)")
def test_ttir_loop_numerics_catch_a_wrong_merge(tmp_path):
    # The attention loop's check is not vacuous: the weighted-sum
    # accumulator added to (not multiplied by) its repair factor is caught.
    def mutate(t):
        assert "arith.mulf %arg7, " in t
        return t.replace("arith.mulf %arg7, ", "arith.addf %arg7, ", 1)

    errs = _build_and_run(tmp_path, "lit-tests/TTIR/attention.efir", "attn_decode", mutate=mutate)
    assert max(errs) > 1e-2, errs
