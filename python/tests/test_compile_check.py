"""Candidates checked against eager PyTorch (issue 30), under
TRITON_INTERPRET=1: where the candidate with the best static estimate gives
a wrong or non-finite output, `efir.compile` falls to the next by estimate
(not to eager PyTorch), up to `check.CHECK_TRIES`, says which it chose and
why, and fails with every reason when none agrees; a family of sizes
(`dynamic=...`, and the torch.compile backend's) does the same at each
size. A wrong candidate is injected in front of the translator's ranking:
its module is the best candidate's with `run` returning NaN (or scaled)."""

import logging
import sys
import warnings

import pytest
import triton_harness as h

torch = h.interpreted_triton()
efir = h.source_efir()
from efir import check, stages  # noqa: E402

C = sys.modules["efir.compile"]


def broken(source, how):
    """`source` (a generated module) whose `run` returns its outputs `how`
    (a Python expression of `out`)."""
    return source + f"\n\n_efir_test_run = run\n\n\ndef run(*a, **k):\n    out = _efir_test_run(*a, **k)\n    return {how}\n"


@pytest.fixture
def inject(monkeypatch):
    """`inject(*hows)`: from now on each translation returns, in front of
    its real candidates, one broken copy of the best per `how` (named
    `bad0`, `bad1`, ...); `translated` lists the `top` asked for."""
    real = stages.Stages.translate
    state = {"hows": (), "top": []}

    def translate(self, src, top=1, **kw):
        programs, ranking = real(self, src, top=top, **kw)
        state["top"].append(top)
        bad = [(f"bad{i}", broken(programs[0][1], how)) for i, how in enumerate(state["hows"])]
        return bad + programs, ranking

    monkeypatch.setattr(stages.Stages, "translate", translate)

    def set_hows(*hows):
        state["hows"] = hows
        return state

    return set_hows


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.a(x)) * 2.0 + x


NAN = "out * float('nan')"


def test_a_candidate_that_fails_the_check_falls_to_the_next(inject, caplog):
    state = inject(NAN)
    torch.manual_seed(0)
    m = Mlp().eval()
    x = torch.randn(4, 16)
    with caplog.at_level(logging.INFO, logger="efir"), warnings.catch_warnings():
        warnings.simplefilter("error")
        f = efir.compile(m, (x,), candidates=2, quiet=True)
    assert state["top"] == [check.CHECK_TRIES]
    (bad, why), = f.stats["rejected"]
    assert bad == "bad0" and "non-finite values in output 0" in why, why
    assert f"def run" in f.source and "_efir_test_run" not in f.source
    y = torch.randn(4, 16)
    assert torch.allclose(f(y), m(y), atol=1e-5)
    # said in the log (INFO) and in the report
    said = [r.getMessage() for r in caplog.records]
    assert any("candidate @bad0 failed the check against PyTorch: candidate @bad0 gives non-finite" in s for s in said), said
    chose = [s for s in said if s.startswith("chose @")]
    assert len(chose) == 1 and "the next by static estimate after 1 that failed the check" in chose[0], chose
    assert "1 with a better estimate failed the check: @bad0: candidate @bad0 gives non-finite" in f.report(), f.report()


def test_a_wrong_but_finite_candidate_falls_too(inject):
    inject("out * 1.5")
    torch.manual_seed(0)
    m = Mlp().eval()
    f = efir.compile(m, (torch.randn(4, 16),), candidates=2, quiet=True)
    (bad, why), = f.stats["rejected"]
    assert bad == "bad0" and "relative L2 error" in why


def test_a_candidate_that_fails_to_run_falls_too(inject):
    inject("(_ for _ in ()).throw(RuntimeError('out of resources: shared memory\\nmore'))")
    torch.manual_seed(0)
    m = Mlp().eval()
    x = torch.randn(4, 16)
    f = efir.compile(m, (x,), candidates=2, quiet=True)
    (bad, why), = f.stats["rejected"]
    assert bad == "bad0" and why == "candidate @bad0 fails to run: RuntimeError: out of resources: shared memory", why
    assert torch.allclose(f(x), m(x), atol=1e-5)


def test_when_no_candidate_agrees_the_compile_fails_naming_each(inject):
    inject(NAN, "out * 1.5", NAN, NAN)
    torch.manual_seed(0)
    with pytest.raises(efir.CompileError) as e:
        efir.compile(Mlp().eval(), (torch.randn(4, 16),), candidates=2, quiet=True)
    msg = str(e.value)
    assert msg.startswith(f"no candidate agrees with PyTorch on the example inputs ({check.CHECK_TRIES} tried"), msg
    assert "@bad0 gives non-finite" in msg and "@bad1 disagrees" in msg and "@bad2" in msg and "@bad3" not in msg


def test_the_backend_falls_to_the_next_candidate_not_to_eager(inject, backend_calls):
    inject(NAN)
    torch.manual_seed(0)
    m = Mlp().eval()
    x = torch.randn(4, 16)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = torch.compile(m, backend="efir", options={"candidates": 2})(x)
    assert not [str(v.message) for v in w if "efir" in str(v.message)]
    assert torch.allclose(out, m(x), atol=1e-5)
    assert backend_calls.runs == 1 and [c.ok for c in backend_calls.compiles] == [True]


def test_each_size_of_a_family_is_checked(inject, caplog):
    state = inject(NAN)
    torch.manual_seed(0)
    m = Mlp().eval()
    with caplog.at_level(logging.INFO, logger="efir"):
        f = efir.compile(m, (torch.randn(4, 16),), candidates=2, quiet=True, dynamic={"batch": (0, 0)})
        for b in (1, 3, 8, 3):
            x = torch.randn(b, 16)
            assert torch.allclose(f(x), m(x), atol=1e-5), b
    # (symbolic kernels: the candidates translated once, checked per size)
    assert f.family.translations == 1 and state["top"] == [check.CHECK_TRIES]
    assert sorted(f.stats["rejected"]) == [(1,), (3,), (8,)]
    assert all(r[0][0] == "bad0" and "non-finite" in r[0][1] for r in f.stats["rejected"].values())
    said = [r.getMessage() for r in caplog.records]
    assert any(s.startswith("family at sizes (8,): chose @") and "after 1 that failed" in s for s in said), said
    assert "rejected @bad0: candidate @bad0 gives non-finite" in f.report()


def test_the_backend_family_checks_each_size(inject, backend_calls, caplog):
    inject(NAN, NAN)
    torch.manual_seed(0)
    m = Mlp().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2}, dynamic=True)
    with warnings.catch_warnings(record=True) as w, caplog.at_level(logging.INFO, logger="efir"):
        warnings.simplefilter("always")
        for b in (3, 8):
            x = torch.randn(b, 5, 16)
            assert torch.allclose(cm(x), m(x), atol=1e-5), b
    assert not [str(v.message) for v in w if "efir" in str(v.message)]
    said = [r.getMessage() for r in caplog.records]
    assert sum("compiled a graph once for all its dynamic sizes" in s for s in said) == 1, said
    chose = [s for s in said if s.startswith("family at sizes") and "chose @" in s]
    assert len(chose) == 2 and all("after 2 that failed" in s for s in chose), chose
    assert not any("compiled per shape" in s for s in said), said


def test_choose_tries_at_most_check_tries():
    seen = []

    def verify(mod, name):
        seen.append(name)
        raise check.CompileError(f"candidate @{name} is wrong")

    programs = [(f"c{i}", "") for i in range(check.CHECK_TRIES + 2)]
    with pytest.raises(check.CompileError, match=r"\(3 tried, best static estimate first\): candidate @c0 is wrong; candidate @c1"):
        check.choose(programs, lambda n, s: n, verify)
    assert seen == [f"c{i}" for i in range(check.CHECK_TRIES)]
    # no check: the first, nothing rejected
    got = check.choose(programs, lambda n, s: n.upper(), None)
    assert (got.program, got.module, got.rejected) == ("c0", "C0", [])
