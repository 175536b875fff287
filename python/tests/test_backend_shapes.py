"""The torch.compile backend when input shapes change (issue 33), under
TRITON_INTERPRET=1 (torch on the CPU, tiny shapes): torch.compile makes a
dim dynamic once it varies (its size then arrives as a SymInt argument);
efir compiles the graph once for its dynamic sizes where it can
(test_backend_family.py), else once per concrete shape, keeps the most
recent ones, and never falls back to eager for a plain shape change."""

import collections.abc
import logging
import sys
import warnings

import pytest
import triton_harness as h

torch = h.interpreted_triton()
efir = h.source_efir()  # registers the backend

C = sys.modules["efir.compile"]


@pytest.fixture
def compiles(backend_calls):
    """The example input shapes of every `efir.compile` the backend makes
    (conftest.py's `backend_calls`, nothing built before)."""
    return _Shapes(backend_calls)


class _Shapes(collections.abc.Sequence):
    def __init__(self, calls):
        self.calls = calls

    def __getitem__(self, i):
        return [c.shapes for c in self.calls.compiles][i]

    def __len__(self):
        return len(self.calls.compiles)

    def __repr__(self):
        return repr(list(self))


def efir_warnings(w):
    return [str(x.message) for x in w if str(x.message).startswith("efir:")]


class Block(torch.nn.Module):
    """A linear layer over the last dim and a mean over the sequence: batch
    and sequence length both vary (small, so that a compile is cheap)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.a(x)) + x.mean(dim=1, keepdim=True)


SHAPES = [(1, 5), (3, 5), (8, 5), (17, 5), (3, 64), (17, 64)]


def _run_shapes(cm, m, shapes):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for b, s in shapes:
            x = torch.randn(b, s, 16)
            out = cm(x)
            with torch.no_grad():
                ref = m(x)
            assert out.shape == ref.shape
            assert torch.allclose(out, ref, rtol=1e-4, atol=1e-5), (b, s, (out - ref).abs().max())
    assert efir_warnings(w) == []


def _compiled_shapes(compiles):
    return [next(t for t in c if len(t) == 3)[:2] for c in compiles]  # x among the lifted weights


def test_batch_and_sequence_change_without_fallback(compiles):
    torch.manual_seed(0)
    m = Block().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2})
    _run_shapes(cm, m, SHAPES)
    # torch.compile traces (1, 5) static: one compile for that shape; at
    # (3, 5) it traces again with the batch dynamic: one family (the mean's
    # keepdim reshape of the symbolic batch is legal) for batch 3, 8 and 17;
    # at (3, 64) with the sequence dynamic too, which the mean divides by
    # (a constant, not an extent): one compile per shape from then on.
    done = _compiled_shapes(compiles)
    assert sorted(done) == [(1, 5), (3, 64), (17, 64)], done
    # Shapes compiled per shape before compile nothing again. (8, 5) and
    # (3, 5), which the batch family served, now reach the graph traced
    # with both dims dynamic, whose sequence stays static: compiled per
    # shape there, once. (Not yet: a family of the dims that can be
    # symbolic, the others part of its key.)
    n = len(compiles)
    _run_shapes(cm, m, [(17, 64), (3, 64), (8, 5), (3, 5)])
    assert _compiled_shapes(compiles)[n:] == [(8, 5), (3, 5)], _compiled_shapes(compiles)[n:]
    built = len(C._BUILT.built)
    _run_shapes(cm, m, [(8, 5), (3, 5), (17, 64), (1, 5)])
    assert len(compiles) == n + 2 and len(C._BUILT.built) == built, _compiled_shapes(compiles)[n:]


class Cum(torch.nn.Module):
    def forward(self, x):
        return torch.cumsum(x, dim=0) * 2.0


def test_a_graph_that_falls_back_warns_once_across_shapes(compiles):
    cm = torch.compile(Cum(), backend="efir")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in (4, 8, 16):
            x = torch.randn(n, 3)
            assert torch.allclose(cm(x), torch.cumsum(x, 0) * 2.0)
    # torch.compile traces the function twice (at the first size, then with
    # the size dynamic): one warning per trace, the same message, naming
    # the op and the user's line, never a failure about SymInt sizes
    msgs = efir_warnings(w)
    assert 1 <= len(msgs) <= 2 and len(set(msgs)) == 1, msgs
    assert msgs[0].startswith("efir: falling back to eager:") and "cumsum" in msgs[0] and "SymInt" not in msgs[0], msgs
    assert "torch.cumsum(x, dim=0)" in msgs[0], msgs


class Centered(torch.nn.Module):
    """A mean over the batch: its count is a constant that changes with the
    batch, so the batch cannot be symbolic and the graph is compiled per
    shape (a plain Linear + Tanh would be one family, test_backend_family.py)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.tanh(self.a(x))
        return y - y.mean(dim=0, keepdim=True)


def test_least_recently_used_shapes_are_dropped(compiles, caplog):
    m = Centered().eval()
    cm = torch.compile(m, backend="efir", options={"candidates": 2, "max_shapes": 2})
    with caplog.at_level(logging.INFO, logger="efir"):
        for n in (2, 3, 4, 3, 2):  # 2 is dropped when 4 comes; 3 stays (used since)
            x = torch.randn(n, 8)
            with torch.no_grad():
                assert torch.allclose(cm(x), m(x), rtol=1e-4, atol=1e-5)
    batches = [next(t for t in c if len(t) == 2 and t[1] == 8 and t[0] != 8)[0] for c in compiles]
    assert batches == [2, 3, 4, 2], compiles
    # each compile is logged at INFO (EFIR_LOG=info shows them), with its shapes
    notes = [r.getMessage() for r in caplog.records if "compiling a graph for inputs" in r.getMessage()]
    assert len(notes) == 4 and "4x8:float32" in notes[2], notes


def test_bad_max_shapes_is_refused(compiles):
    with pytest.raises(Exception, match="max_shapes must be a positive integer"):
        torch.compile(torch.nn.Linear(4, 4), backend="efir", options={"max_shapes": 0})(torch.randn(2, 4))


def test_compile_with_symint_example_inputs_is_not_an_error():
    # What torch.compile hands the backend for a dynamic graph: a SymInt
    # among the example inputs. The backend compiles at call time, on the
    # call's concrete arguments (a size is fixed in the compiled program).
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    s = ShapeEnv().create_unbacked_symint()
    gm = torch.fx.symbolic_trace(lambda n, x: (torch.exp(x) * 2.0,))
    call = C._backend(gm, [s, torch.randn(4, 3)], {"candidates": 2})
    x = torch.randn(5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (out,) = call(5, x)
    assert torch.allclose(out, torch.exp(x) * 2.0) and call.compiles == 1 and len(call.shapes) == 1


def test_reuse_skips_the_build_of_a_program_built_before(monkeypatch):
    stages = []
    real = C._Stages.opt
    monkeypatch.setattr(C._Stages, "opt", lambda self, *a: (stages.append(a), real(self, *a))[1])
    r = efir.Reuse(size=1)
    f = efir.compile(lambda x: torch.tanh(x) * 2.0, (torch.randn(4, 8),), candidates=2, quiet=True, reuse=r)
    # another module that imports to the same program, other values
    g = efir.compile(lambda x: torch.tanh(x) * 2.0, (torch.randn(4, 8),), candidates=2, quiet=True, reuse=r)
    assert len(stages) == 1 and g.stats["stages"].get("reused") == 0.0 and g.module is f.module
    x = torch.randn(4, 8)
    assert torch.allclose(g(x), torch.tanh(x) * 2.0)
    # other options or another shape: built (and the oldest dropped at size 1)
    efir.compile(lambda x: torch.tanh(x) * 2.0, (torch.randn(4, 8),), candidates=3, quiet=True, reuse=r)
    efir.compile(lambda x: torch.tanh(x) * 2.0, (torch.randn(5, 8),), candidates=2, quiet=True, reuse=r)
    assert len(stages) == 3 and len(r.built) == 1
