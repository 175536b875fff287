"""One compile for a family of sizes (issue 33), under TRITON_INTERPRET=1
(torch on the CPU, tiny shapes): `efir.compile(..., dynamic=...)` and the
torch.compile backend saturate and compact a program once with its dynamic
extents symbolic (`|@dyn0|`), and only translate it at each new size; a dim
that the program cannot take symbolically is compiled per shape, with the
reason."""

import logging
import sys
import warnings

import pytest
import triton_harness as h

torch = h.interpreted_triton()
ROOT = h.ROOT
efir = h.source_efir()  # registers the backend
from efir import family as F  # noqa: E402

C = sys.modules["efir.compile"]

A = """func @program(%w: tensor<16x3xf32>, %x: tensor<3x5x16xf32>) -> tensor<3x5x3xf32> {
  %y = tensor.matmul %x, %w : tensor<3x5x3xf32>
  return %y : tensor<3x5x3xf32>
}
"""


def test_symbolize_replaces_only_the_extents_that_moved():
    # batch 3 -> 4 and sequence 5 -> 7: the weight's 3 and 16 stay static
    # although the batch is also 3
    b = A.replace("3x5x", "4x7x")
    sym = F.symbolize(A, b, [(3, 4), (5, 7)])
    assert "%w: tensor<16x3xf32>" in sym
    assert "%x: tensor<|@dyn0|x|@dyn1|x16xf32>" in sym and "tensor<|@dyn0|x|@dyn1|x3xf32>" in sym
    assert F.instantiate(sym, (3, 5)) == A and F.instantiate(sym, (4, 7)) == b


def test_symbolize_refuses_what_is_not_an_extent():
    # a mean's count (a constant) that changes with the size
    a = A.replace("  return", "  %n = tensor.full<5.0> : tensor<f32>\n  return")
    with pytest.raises(F.StaticDim, match=r"beyond its extents.*full<5\.0>.*full<7\.0>"):
        F.symbolize(a, a.replace("3x5x", "4x7x").replace("<5.0>", "<7.0>"), [(3, 4), (5, 7)])
    # a product of sizes (15 = 3 * 5 became 28), not a size itself
    a = A.replace("  return", "  %r = tensor.reshape %x : tensor<15x16xf32>\n  return")
    with pytest.raises(F.StaticDim, match="function of the size.*15 became 28"):
        F.symbolize(a, a.replace("3x5x", "4x7x").replace("15x16", "28x16"), [(3, 4), (5, 7)])


def test_parse_dynamic():
    x, m = torch.zeros(3, 5, 16), torch.zeros(3, 1)
    assert F.parse_dynamic({"batch": [(0, 0), (1, 0)], "seq": (0, -2)}, (x, m)) == [[(0, 0), (1, 0)], [(0, 1)]]
    assert F.parse_dynamic([(0, 0), (0, 1)], (x, m)) == [[(0, 0)], [(0, 1)]]
    with pytest.raises(ValueError, match="different sizes"):
        F.parse_dynamic({"b": [(0, 0), (0, 1)]}, (x, m))
    with pytest.raises(ValueError, match="input 1 has 2 dims"):
        F.parse_dynamic([(1, 2)], (x, m))
    with pytest.raises(TypeError):
        F.parse_dynamic("batch", (x, m))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.a(x)) * 2.0 + x


class Block(Mlp):
    """A mean over the sequence (keepdim): its count changes with the
    sequence length, a constant that is not an extent."""

    def forward(self, x):
        return torch.tanh(self.a(x)) + x.mean(dim=1, keepdim=True)


@pytest.fixture
def saturations(monkeypatch):
    """The `efir-opt --saturate --compact` runs (the expensive stage)."""
    runs = []
    real = C._Stages.opt
    monkeypatch.setattr(C._Stages, "opt", lambda self, flags, src, out: (runs.append(src), real(self, flags, src, out))[1])
    monkeypatch.setattr(C, "_BUILT", C.Reuse())
    torch._dynamo.reset()
    yield runs
    torch._dynamo.reset()


def test_compile_dynamic_batch_compiles_once(saturations):
    torch.manual_seed(0)
    m = Mlp().eval()
    f = efir.compile(m, (torch.randn(4, 16),), candidates=2, quiet=True, dynamic={"batch": (0, 0)})
    modules = []
    for b in (1, 3, 8, 17, 3):
        x = torch.randn(b, 16)
        assert torch.allclose(f(x), m(x), atol=1e-5), b
        modules.append(f.module)
    assert saturations == ["family.efir"]
    # symbolic kernels: translated once, one loaded module for every batch
    assert f.family.symbolic_kernels and f.family.translations == 1
    assert all(mod is modules[0] for mod in modules) and '"dyn0"' in f.source
    assert "|@dyn0|x16xf32" in f.family.program
    assert "kernels: symbolic, translated once" in f.report() and "sizes run: 4" in f.report()  # batch 3 seen again: not checked again
    with pytest.raises(ValueError, match="expected"):
        f(torch.randn(3, 8))  # a static dim that changed


class Moved(Mlp):
    """A reshape that moves static dims across the batch (`|@dyn0|x16` to
    `16x|@dyn0|`): equal counts, but data crosses the symbolic extent, which
    the verifier refuses (E0404)."""

    def forward(self, x):
        return self.a(x).reshape(16, -1) * 2.0


def test_compile_dynamic_refuses_a_dim_that_must_stay_static(saturations):
    with pytest.raises(C.CompileError, match="dynamic dims stay static.*E0404.*moves static dims across a symbolic extent"):
        efir.compile(Moved(), (torch.randn(3, 16),), candidates=2, quiet=True, dynamic={"batch": (0, 0)})


sys.path.insert(0, str(ROOT / "python" / "tests"))
from workload_modules import Attention, LayerNormGemm, RMSNormMLP  # noqa: E402

KEEPDIM = {
    # a norm's row statistic reshaped to keepdim (|@dyn0| -> |@dyn0|x1)
    "rmsnorm_mlp": (RMSNormMLP, lambda b: (torch.randn(b, 32),), {"batch": (0, 0)}, "tensor<|@dyn0|x1xf32>"),
    "layernorm_gemm": (LayerNormGemm, lambda b: (torch.randn(b, 32),), {"batch": (0, 0)}, "tensor<|@dyn0|x1xf32>"),
    # the softmax's row max and sum, keepdim over (batch, head, query)
    "attn_decode": (
        lambda: Attention(False),
        lambda b: (torch.randn(b, 2, 1, 16), torch.randn(b, 2, 8, 16), torch.randn(b, 2, 8, 16)),
        {"batch": [(0, 0), (1, 0), (2, 0)]},
        "x1xf32>",
    ),
}


@pytest.mark.parametrize("name", sorted(KEEPDIM))
def test_keepdim_reshapes_of_the_batch_make_a_family(name, saturations):
    """rmsnorm_mlp, layernorm_gemm and attn_decode reshape a statistic of
    the symbolic batch to keepdim; that reshape is legal, so they are one
    family: one saturation, one translation per batch size, no per-shape
    compile, results equal eager."""
    torch.manual_seed(0)
    make, inputs, dynamic, reshaped = KEEPDIM[name]
    m = make().eval()
    f = efir.compile(m, inputs(4), candidates=2, quiet=True, dynamic=dynamic)
    assert "|@dyn0|" in f.family.program and any("tensor.reshape" in ln and "|@dyn0|" in ln and reshaped in ln for ln in f.family.program.splitlines()), f.family.program
    for b in (1, 3, 8, 17):
        xs = inputs(b)
        assert torch.allclose(f(*xs), m(*xs), atol=1e-5), (name, b)
    assert saturations == ["family.efir"], saturations
    assert f.family.symbolic_kernels and f.family.translations == 1


def test_torch_compile_dynamic_batch_and_sequence(saturations, caplog):
    torch.manual_seed(0)
    m = Mlp().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2}, dynamic=True)
    shapes = [(3, 5), (8, 5), (17, 5), (3, 64), (17, 64), (1, 5), (1, 64), (8, 5)]
    with warnings.catch_warnings(record=True) as w, caplog.at_level(logging.INFO, logger="efir"):
        warnings.simplefilter("always")
        for b, s in shapes:
            x = torch.randn(b, s, 16)
            assert torch.allclose(cm(x), m(x), atol=1e-5), (b, s)
    assert not [x for x in w if "efir" in str(x.message)], [str(x.message) for x in w]
    # two graphs (torch.compile specializes a batch of 1), each saturated once
    assert saturations == ["family.efir", "family.efir"], saturations
    assert sum("compiled a graph once for all its dynamic sizes" in r.message for r in caplog.records) == 2


def test_torch_compile_static_dim_is_compiled_per_shape_with_the_reason(saturations, caplog):
    torch.manual_seed(0)
    m = Block().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2}, dynamic=True)
    with caplog.at_level(logging.INFO, logger="efir"):
        for b in (3, 8):
            x = torch.randn(b, 5, 16)
            assert torch.allclose(cm(x), m(x), atol=1e-5), b
    # the mean over the sequence divides by its length, a constant that
    # changes with it: the sequence stays static, so the graph is per shape
    why = [r.message for r in caplog.records if "compiled per shape" in r.message]
    assert len(why) == 1 and "beyond its extents" in why[0] and "full<5.0>" in why[0], why
    assert saturations == ["program.efir", "program.efir"], saturations  # refused before saturation


def test_a_size_the_family_cannot_translate_is_compiled_per_shape(saturations, monkeypatch):
    torch.manual_seed(0)
    m = Mlp().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2}, dynamic=True)
    x = torch.randn(3, 5, 16)
    assert torch.allclose(cm(x), m(x), atol=1e-5)
    real = F.Family.module

    def module(self, sizes, **kw):
        if tuple(sizes) == (8, 5):
            raise C.CompileError("efir-translate failed: error[E0801]: (a size that cannot be lowered)")
        return real(self, sizes, **kw)

    monkeypatch.setattr(F.Family, "module", module)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for b in (8, 4):  # 8 fails, so the signature goes per shape: 4 too
            x = torch.randn(b, 5, 16)
            assert torch.allclose(cm(x), m(x), atol=1e-5), b
    assert not [x for x in w if "efir" in str(x.message)], [str(x.message) for x in w]
    assert saturations == ["family.efir", "program.efir", "program.efir"], saturations


def test_candidates_the_translator_refuses_symbolically_are_translated_per_size(saturations, monkeypatch):
    """The fallback: where efir-translate refuses the symbolic candidates,
    each new size gets them with the size in place of the symbol."""
    real = C._Stages.translate
    seen = []

    def translate(self, src, top=1, dims=None):
        text = (self.work / src).read_text()
        seen.append("|@dyn0|" in text)
        if "|@dyn0|" in text:
            raise C.CompileError("efir-translate failed: error[E0801]: (refused with a symbolic extent)")
        return real(self, src, top=top)

    monkeypatch.setattr(C._Stages, "translate", translate)
    torch.manual_seed(0)
    m = Mlp().eval()
    f = efir.compile(m, (torch.randn(4, 16),), candidates=2, quiet=True, dynamic={"batch": (0, 0)})
    for b in (1, 3, 8, 3):
        x = torch.randn(b, 16)
        assert torch.allclose(f(x), m(x), atol=1e-5), b
    assert seen == [True, False, False, False], seen
    assert not f.family.symbolic_kernels and f.family.translations == 3
    assert "E0801" in f.stats["per_size_why"] and "sizes translated: 3" in f.report()


def test_bucket():
    assert [F.bucket((n,)) for n in (1, 2, 3, 4, 5, 8, 9, 17)] == [(1,), (2,), (4,), (4,), (8,), (8,), (16,), (32,)]
    assert F.bucket((3, 64)) == (4, 64)


def test_family_tunes_once_per_size_bucket_and_caches(saturations, tmp_path):
    """With tuning (a fake timer under TRITON_INTERPRET=1, in place of the
    GPU): the first call in each power-of-two bucket of the batch tunes the
    family's symbolic candidates on that call's inputs, the bucket's other
    sizes reuse the choice, every result equals eager, and a second family
    of the same program finds every bucket in the cache (nothing timed)."""
    from efir import tune as T

    torch.manual_seed(0)
    m = Mlp().eval()
    timed = []

    def timer(name, mod, cfg, run):
        timed.append((name, dict(cfg)))
        return 10.0 + cfg.get("num_warps", 4)  # fewer warps is faster

    cache = T.Cache(tmp_path / "tune.sqlite")
    where = F.parse_dynamic({"batch": (0, 0)}, (torch.randn(4, 16),))
    f = F.compile_family(m, (torch.randn(4, 16),), where, 2, None, True, tuning=F.Tuning(5.0, timer=timer, cache=cache))
    assert f.family.symbolic_kernels
    per_call = []
    for b in (3, 4, 7, 3, 8, 1):
        before = len(timed)
        x = torch.randn(b, 16)
        assert torch.allclose(f(x), m(x), atol=1e-5), b
        per_call.append(len(timed) - before)
    # buckets 4 (3, 4), 8 (7, 8) and 1: tuned at their first size only
    assert [n > 0 for n in per_call] == [True, False, True, False, False, True], per_call
    assert sorted(f.family.tuned) == [(1,), (4,), (8,)]
    for b, got in f.family.tuned.items():
        name, cfg, t, cached = got
        default = f.family._loaded[name].DEFAULT_CONFIG
        assert not cached and t == 10.0 + cfg.get("num_warps", 4) and cfg.get("num_warps", 4) <= default.get("num_warps", 4), (b, got)
    k = f.family.kernels[(8,)]
    assert k.config == f.family.tuned[(8,)][1] and k.program == f.family.tuned[(8,)][0]
    assert "tuning: per size bucket" in f.report() and "tuned for sizes up to (8,)" in f.report()
    # a second family of the same program: every bucket from the cache
    timed.clear()
    g = F.compile_family(m, (torch.randn(4, 16),), where, 2, None, True, tuning=F.Tuning(5.0, timer=timer, cache=cache))
    for b in (3, 7, 1):
        x = torch.randn(b, 16)
        assert torch.allclose(g(x), m(x), atol=1e-5), b
    assert not timed and all(t[3] for t in g.family.tuned.values()) and "(cache)" in g.report()
    # a user's schedule is used at every size: no tuning
    timed.clear()
    cfg = dict(f.family.kernels[(8,)].module.DEFAULT_CONFIG)
    u = F.compile_family(m, (torch.randn(4, 16),), where, 2, cfg, True, tuning=F.Tuning(5.0, timer=timer, cache=cache))
    x = torch.randn(5, 16)
    assert torch.allclose(u(x), m(x), atol=1e-5)
    assert not timed and u.family.tuning is None


def test_a_tuned_bucket_that_loses_to_eager_runs_pytorch_s_code(saturations, tmp_path, monkeypatch, caplog):
    """Never slower than what it replaces, per size bucket: a tuned bucket's
    kernels are timed against the module (faked here: eager faster in the
    bucket of 8, slower in that of 4); the bucket of 8 runs the module's
    own code, with one warning, and the bucket of 4 efir's kernels."""
    from efir import tune as T

    c = sys.modules["efir.compile"]
    verdicts = []

    def versus(efir_run, module, inputs):
        n = inputs[0].shape[0]
        verdicts.append(n)
        e, p = 20.0, (5.0 if n > 4 else 80.0)
        return {"efir_us": e, "eager_us": p, "kept_eager": p < e}

    monkeypatch.setattr(c, "versus_eager", versus)
    torch.manual_seed(0)
    m = Mlp().eval()
    where = F.parse_dynamic({"batch": (0, 0)}, (torch.randn(4, 16),))
    tuning = F.Tuning(5.0, timer=lambda name, mod, cfg, run: 10.0, cache=T.Cache(tmp_path / "tune.sqlite"))
    f = F.compile_family(m, (torch.randn(4, 16),), where, 2, None, True, tuning=tuning)
    with caplog.at_level(logging.INFO, logger="efir"):
        outs = {}
        for b in (3, 7, 8, 4):
            x = torch.randn(b, 16)
            outs[b] = (f(x), x)
    assert verdicts == [3, 7]  # once per bucket, on its first call
    for b, (y, x) in outs.items():
        with torch.no_grad():
            ref = m(x)
        if b > 4:
            assert torch.equal(y, ref), b  # the module's own code
        else:
            assert torch.allclose(y, ref, atol=1e-5), b
    kept = [r for r in caplog.records if "kept PyTorch's code" in r.getMessage()]
    assert len(kept) == 1 and "(8,)" in kept[0].getMessage()
    assert "not used: eager PyTorch measured faster" in f.report()
