"""`efir.compile` end to end under TRITON_INTERPRET=1 (torch on the CPU, tiny
shapes): import, saturate, compact, Triton, run; and the torch.compile
backend, including its eager fallback."""

import logging
import sys
import tempfile
import warnings

import pytest
import triton_harness as h

torch = h.interpreted_triton()
efir = h.source_efir()
import torch.nn.functional as F  # noqa: E402
from test_import import LogSoftmax, NegativeSlices, Rotary  # noqa: E402
from workload_modules import NGPT, Attention, GatedMLP, LayerNormGemm, LoRA, RMSNormMLP  # noqa: E402


def rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


CASES = [
    ("gated_mlp", lambda: GatedMLP(), lambda: (torch.randn(2, 32),)),
    ("rmsnorm_mlp", lambda: RMSNormMLP(), lambda: (torch.randn(2, 32),)),
    ("rmsnorm_swiglu", lambda: RMSNormMLP(down=True), lambda: (torch.randn(2, 32),)),
    ("layernorm_gemm", lambda: LayerNormGemm(), lambda: (torch.randn(2, 32),)),
    ("attn_decode", lambda: Attention(False), lambda: (torch.randn(1, 2, 1, 16), torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16))),
    ("lora", lambda: LoRA(), lambda: (torch.randn(2, 32),)),
    ("ngpt", lambda: NGPT(), lambda: (torch.randn(2, 32), torch.randn(2, 32), torch.rand(2, 32) * 0.1)),
    ("attn_prefill", lambda: Attention(True), lambda: tuple(torch.randn(1, 2, 16, 16) for _ in range(3))),
    ("rotary", lambda: Rotary(), lambda: (torch.randn(2, 4, 16), torch.randn(4, 16), torch.randn(4, 16))),
    ("log_softmax", lambda: LogSoftmax(), lambda: (torch.randn(4, 12),)),
    ("negative_slices", lambda: NegativeSlices(), lambda: (torch.randn(4, 10),)),
]


@pytest.mark.parametrize("name,make,inputs", CASES, ids=[c[0] for c in CASES])
def test_compile_matches_pytorch(name, make, inputs, tmp_path):
    torch.manual_seed(0)
    m = make().half()
    xs = tuple(x.half() for x in inputs())
    f = efir.compile(m, xs, quiet=True, workdir=tmp_path)
    fresh = tuple(x.half() for x in inputs())  # new inputs, same shapes
    out = f(*fresh)
    with torch.no_grad():
        ref = m.double()(*(x.double() for x in fresh))
    assert rel(out, ref) <= 1e-2, (name, rel(out, ref))


def test_progress_output_on_a_terminal_or_when_asked(capsys, tmp_path, monkeypatch):
    m = GatedMLP().half()
    x = torch.randn(2, 32).half()
    stages = ("efir: INFO: saturate + compact done in", "efir: INFO: lower to Triton done in")
    # by default, quiet on success where stderr is not a terminal (CI, logs)
    efir.compile(m, (x,), workdir=tmp_path / "a")
    assert capsys.readouterr().err == ""
    # quiet=False: the stages' lines anyway
    efir.compile(m, (x,), quiet=False, workdir=tmp_path / "b")
    err = capsys.readouterr().err
    assert all(s in err for s in stages), err
    # on a terminal: the stages' lines by default, nothing with quiet=True
    monkeypatch.setattr(efir.log, "interactive", lambda: True)
    efir.compile(m, (x,), workdir=tmp_path / "c")
    err = capsys.readouterr().err
    assert all(s in err for s in stages), err
    efir.compile(m, (x,), quiet=True, workdir=tmp_path / "d")
    assert capsys.readouterr().err == ""


def test_torch_compile_backend():
    torch.manual_seed(1)
    m = GatedMLP().half()
    x = torch.randn(2, 32).half()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = torch.compile(m, backend="efir")(x)
    assert not [x for x in w if "falling back" in str(x.message)]
    with torch.no_grad():
        ref = m.double()(x.double())
    assert rel(out, ref) <= 1e-2


def test_torch_compile_falls_back_with_one_warning():
    class Cum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=0) * 2.0

    x = torch.randn(8)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = torch.compile(Cum(), backend="efir")(x)
    msgs = [str(x.message) for x in w if "falling back" in str(x.message)]
    assert len(msgs) == 1 and "cumsum" in msgs[0], msgs
    assert torch.allclose(out, torch.cumsum(x, 0) * 2.0)


class Flatten(torch.nn.Module):
    """A result that is an input unchanged (a copy): no candidate has a
    Triton lowering (E0801)."""

    def forward(self, x):
        return x.clone(), torch.exp(x)


def test_a_program_without_triton_lowering_is_a_compile_error(tmp_path):
    with pytest.raises(efir.CompileError, match=r"^efir-translate.* failed: .*(warning|error)\[E0801\]: cannot lower `@program\.c0` to Triton: a parameter returned as a result is not supported"):
        efir.compile(Flatten(), (torch.randn(2, 8),), quiet=True, workdir=tmp_path)


class SplitMerge(torch.nn.Module):
    """A slice, then a reshape that merges dims, then one that splits them:
    loads at computed offsets (they were E0801 before)."""

    def forward(self, x):
        return torch.exp(x[:, 1:]).reshape(-1).reshape(7, 2) * 2.0


def test_split_and_merge_reshapes_compile(tmp_path):
    x = torch.randn(2, 8)
    f = efir.compile(SplitMerge(), (x,), quiet=True, workdir=tmp_path)
    assert torch.allclose(f(x), SplitMerge()(x), rtol=1e-4, atol=1e-5)


def test_torch_compile_falls_back_when_triton_cannot_lower():
    x = torch.randn(2, 8)
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = torch.compile(Flatten(), backend="efir")(x)
    msgs = [str(x.message) for x in w if "falling back" in str(x.message)]
    assert len(msgs) == 1 and "E0801" in msgs[0] and "parameter returned as a result" in msgs[0], msgs
    assert torch.equal(out[0], x) and torch.allclose(out[1], torch.exp(x))


# Quiet success: the small workloads compile with every warning an error
# (a candidate limit reached, E0706, is a DEBUG log record and a stats entry),
# and the temporary work folder is removed unless asked for.
QUIET = ["gated_mlp", "rmsnorm_mlp", "layernorm_gemm", "attn_decode", "lora"]


@pytest.mark.parametrize("name", QUIET)
def test_compile_is_quiet_and_leaves_no_folder(name, tmp_path, monkeypatch, caplog, capsys):
    _, make, inputs = next(c for c in CASES if c[0] == name)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    torch.manual_seed(0)
    m = make().half()
    xs = tuple(x.half() for x in inputs())
    with caplog.at_level(logging.DEBUG, logger="efir"), warnings.catch_warnings():
        warnings.simplefilter("error")
        f = efir.compile(m, xs, candidates=2, quiet=True)
    assert capsys.readouterr().err == ""
    assert list(tmp_path.iterdir()) == [], "the temporary work folder was left behind"
    assert f.workdir is None
    # max-candidates=2 stops every one of these workloads' enumerations:
    # reported at DEBUG and kept in the stats, not warned.
    limits = [d for d in f.stats["diagnostics"] if d.startswith("warning[E0706]")]
    assert limits, f.stats
    assert any(r.levelno == logging.DEBUG and "E0706" in r.getMessage() for r in caplog.records)
    # the module was loaded from text and still runs (Triton reads its source)
    out = f(*xs)
    with torch.no_grad():
        ref = m.double()(*(x.double() for x in xs))  # converts m in place: after f ran
    assert rel(out, ref) <= 1e-2


def test_keep_workdir_and_report(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    m = GatedMLP().half()
    x = torch.randn(2, 32).half()
    f = efir.compile(m, (x,), candidates=4, quiet=True, keep_workdir=True)
    (kept,) = tmp_path.iterdir()
    assert f.workdir == kept and (kept / "kernels.py").read_text() == f.source
    rep = f.report()
    est = f.module.ESTIMATE
    assert f"chosen candidate: @program.c" in rep, rep
    assert f"estimate: {est['time_us']:.3f} us" in rep, rep
    assert f"kernels: {est['kernels']}\n" in rep, rep
    assert f"generated source: {kept / 'kernels.py'}\n" in rep, rep
    # without keep_workdir the report says where the source was and that it is gone
    g = efir.compile(m, (x,), candidates=4, quiet=True)
    assert "(removed; pass keep_workdir=True to keep it)" in g.report()
    assert g.report().splitlines()[0] == rep.splitlines()[0]
    assert len(list(tmp_path.iterdir())) == 1


def test_failed_compile_leaves_no_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(efir.CompileError):
        efir.compile(Flatten(), (torch.randn(2, 8),), quiet=True)
    assert list(tmp_path.iterdir()) == []


def test_dtypes_accepted_and_refused(tmp_path):
    # every dtype of the table in docs/python.md compiles (f16 is above)
    for dt in (torch.float32, torch.float64, torch.int32, torch.int64):
        x = (torch.randn(4, 8) * 3).to(dt)
        f = efir.compile(lambda x: x * x + x, (x,), candidates=2, quiet=True)
        assert torch.equal(f(x), x * x + x), dt
    x, b = torch.randn(4, 8), torch.rand(4, 8) > 0.5
    assert torch.equal(efir.compile(lambda b, x: torch.where(b, x, 2 * x), (b, x), candidates=2, quiet=True)(b, x), torch.where(b, x, 2 * x))
    # others are refused with a CompileError naming the dtype
    with pytest.raises(efir.CompileError, match=r"input 0 has dtype torch.int8, which efir does not support \(accepted: float16, bfloat16, float32, float64, bool, int32, int64\)"):
        efir.compile(lambda x: x + x, (torch.ones(4, dtype=torch.int8),), quiet=True)
    with pytest.raises(efir.ImportError_, match=r"torch.int8"):
        efir.compile(lambda x: x.to(torch.int8).to(torch.float32), (torch.ones(4),), quiet=True)


def test_compile_on_cpu_skips_tuning_with_one_message(capsys, monkeypatch):
    c = sys.modules["efir.compile"]

    monkeypatch.setattr(c, "_cpu_noted", [])
    torch.manual_seed(0)
    m = GatedMLP().half()
    xs = (torch.randn(2, 32).half(),)
    f = efir.compile(m, xs, quiet=False)  # INFO shown (stderr is not a terminal here)
    g = efir.compile(m, xs, quiet=False)
    err = capsys.readouterr().err
    assert err.count("schedule tuning skipped") == 1
    assert f.tuned is None and g.tuned is None and "static estimate" in f.report()
    with pytest.raises(efir.CompileError, match="EFIR_TUNE"):
        monkeypatch.setenv("EFIR_TUNE", "soon")
        efir.compile(m, xs, quiet=True)


def test_compile_tunes_against_eager_outputs(monkeypatch, tmp_path):
    # On the CPU (TRITON_INTERPRET=1) with a fake timer in place of the GPU:
    # the tuned candidate and schedule are what the module runs.
    c = sys.modules["efir.compile"]
    from efir import tune

    real = tune.tune_file
    seen = {}

    def fake(path, out, **kw):
        seen.update(kw)

        def timer(name, mod, cfg, run):
            return 10.0 + cfg.get("num_warps", 4)

        return real(path, out, timer=timer, cache=tune.Cache(tmp_path / "cache.sqlite"), **kw)

    monkeypatch.setattr(tune, "tune_file", fake)
    monkeypatch.setattr(c, "_tune_budget", lambda t, xs, q: 5.0)
    torch.manual_seed(0)
    m = GatedMLP().half()
    xs = (torch.randn(2, 32).half(),)
    f = efir.compile(m, xs, quiet=True)
    assert f.tuned and f.tuned["candidate"] and not f.tuned["cached"]
    # checked against eager PyTorch's outputs on the model's own weights
    assert len(seen["inputs"]) == 3 and len(seen["expected"]) == 1
    assert "fastest measured on the GPU" in f.report()
    sched = f.tuned["config"]
    for k, v in sched.items():
        assert f.module.DEFAULT_CONFIG[k] == v
    fresh = (torch.randn(2, 32).half(),)
    out = f(*fresh)
    with torch.no_grad():
        ref = m.double()(*(x.double() for x in fresh))
    assert rel(out, ref) < 1e-2


def test_a_function_s_inputs_keep_their_names(tmp_path):
    def scaled(x, gain):
        return torch.exp(x) * gain

    xs = (torch.randn(2, 8), torch.randn(2, 8))
    f = efir.compile(scaled, xs, quiet=True, workdir=tmp_path)
    text = (tmp_path / "program.efir").read_text()
    assert "%x: tensor<2x8xf32>" in text and "%gain: tensor<2x8xf32>" in text, text
    assert torch.allclose(f(*xs), scaled(*xs), rtol=1e-4, atol=1e-6)
    # *args (and lambdas with defaults) keep positional names
    g = efir.compile(lambda *a: a[0] + a[1], xs, quiet=True, workdir=tmp_path / "g")
    assert "%xs_0" in (tmp_path / "g" / "program.efir").read_text()
    assert torch.allclose(g(*xs), xs[0] + xs[1])


def test_the_chosen_candidate_is_checked_against_pytorch():
    """Without tuning, the estimate's choice is run once on the example
    inputs: a non-finite output where PyTorch's is finite (a reformulation
    that overflowed) or a wrong one is a CompileError, so the backend keeps
    PyTorch's code; a right one passes."""
    import importlib
    import types

    c = importlib.import_module("efir.compile")

    x = torch.randn(4, 8)

    def fn(t):
        return torch.exp(t - t.amax(-1, keepdim=True))

    class M(torch.nn.Module):
        def forward(self, t):
            return fn(t)

    def fake(out):
        return types.SimpleNamespace(run=lambda *a, config=None: out)

    ident = lambda ins: ins  # noqa: E731
    c._check_outputs(fake(fn(x)), M(), (x,), ident, None, "p")
    overflow = fn(x).clone()
    overflow[0, 0] = float("nan")
    with pytest.raises(c.CompileError, match="non-finite"):
        c._check_outputs(fake(overflow), M(), (x,), ident, None, "p")
    with pytest.raises(c.CompileError, match="relative L2"):
        c._check_outputs(fake(fn(x) * 1.5), M(), (x,), ident, None, "p")


@pytest.mark.parametrize("eager_faster", [True, False])
def test_tuned_kernels_that_lose_to_eager_keep_pytorch_s_code(monkeypatch, tmp_path, caplog, eager_faster):
    # Never slower than what it replaces: after tuning (a fake timer on the
    # CPU), efir's program and eager PyTorch are timed alike (faked here);
    # where eager is faster the callable runs the module, with one warning.
    import logging

    c = sys.modules["efir.compile"]
    from efir import tune

    real = tune.tune_file

    def fake(path, out, **kw):
        return real(path, out, timer=lambda name, mod, cfg, run: 10.0, cache=tune.Cache(tmp_path / "cache.sqlite"), **kw)

    timed = []

    def versus(efir_run, module, inputs):
        timed.append(True)
        e, p = 20.0, (5.0 if eager_faster else 80.0)
        return {"efir_us": e, "eager_us": p, "kept_eager": p < e}

    monkeypatch.setattr(tune, "tune_file", fake)
    monkeypatch.setattr(c, "_tune_budget", lambda t, xs, q: 5.0)
    monkeypatch.setattr(c, "versus_eager", versus)
    torch.manual_seed(0)
    m = GatedMLP().half()
    xs = (torch.randn(2, 32).half(),)
    with caplog.at_level(logging.INFO, logger="efir"):
        f = efir.compile(m, xs, quiet=True)
        x = torch.randn(2, 32).half()
        out = f(x)
        f(x)
    kept = [r for r in caplog.records if "kept PyTorch's code" in r.getMessage()]
    assert f.kept_eager is eager_faster and len(timed) == 1
    assert len(kept) == (1 if eager_faster else 0) and all(r.levelno == logging.WARNING for r in kept)
    with torch.no_grad():
        ref = m(x)
    if eager_faster:
        assert torch.equal(out, ref)  # PyTorch's own code ran
        assert "not used: eager PyTorch measured faster (5.0 us against 20.0 us)" in f.report()
    else:
        assert rel(out, ref.double()) < 1e-2
        assert "against eager PyTorch: 20.0 us for efir, 80.0 us for eager" in f.report()
