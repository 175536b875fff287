"""Partial compilation in the torch.compile backend (issue 29, item 5), under
TRITON_INTERPRET=1 (torch on the CPU, tiny shapes): where the importer
refuses an op, efir compiles the parts of the graph it supports and leaves
the rest to PyTorch, with one warning naming the op and its source line."""

import warnings

import pytest
import triton_harness as h

torch = h.interpreted_triton()
h.source_efir()  # registers the backend


def rel(out, ref):
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def efir_warnings(w):
    return [str(x.message) for x in w if str(x.message).startswith("efir:")]


class CumMiddle(torch.nn.Module):
    """An MLP, a cumsum (no scan op in efir's IR), another MLP; the first
    part has several outputs (h for the cumsum, g for the second part, and
    a sum of g that the graph returns)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 16)

    def forward(self, x):
        h = self.a(x)
        g = torch.relu(h)
        c = torch.cumsum(h, dim=-1)  # the unsupported op
        y = torch.sigmoid(self.b(g * c))
        return y, g.sum(-1)


def test_one_unsupported_op_in_the_middle_compiles_the_rest(backend_calls):
    torch.manual_seed(0)
    m = CumMiddle().eval()
    x = torch.randn(4, 16)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cm = torch.compile(m, backend="efir", options={"candidates": 2})
        y, s = cm(x)
    msgs = efir_warnings(w)
    assert len(msgs) == 1, msgs
    assert "cumsum" in msgs[0] and "falling back" not in msgs[0], msgs
    line = next(i for i, l in enumerate(open(__file__), 1) if "c = torch.cumsum(h, dim=-1)" in l)
    assert f"line {line}" in msgs[0] and "torch.cumsum(h, dim=-1)" in msgs[0], msgs
    assert "efir compiled the rest (2 part(s))" in msgs[0], msgs
    # The whole graph was tried first, then the two parts on their own.
    ok = [c for c in backend_calls.compiles if c.ok]
    assert len(ok) == 2 and all(c.kwargs.get("candidates") == 2 for c in backend_calls.compiles), backend_calls.compiles
    for sub, *_ in ok:
        targets = {str(n.target) for n in sub.graph.nodes if n.op == "call_function"}
        assert not any("cumsum" in t for t in targets), targets
    assert backend_calls.runs == 2
    with torch.no_grad():
        ry, rs = m(x)
    assert rel(y, ry) <= 1e-2 and rel(s, rs) <= 1e-2, (rel(y, ry), rel(s, rs))
    # A second call with new inputs runs the compiled parts again, no new compile.
    x2 = torch.randn(4, 16)
    y2, s2 = cm(x2)
    with torch.no_grad():
        ry2, rs2 = m(x2)
    assert rel(y2, ry2) <= 1e-2 and rel(s2, rs2) <= 1e-2
    assert backend_calls.runs == 4 and len(backend_calls.compiles) == 3


class CumHalf(torch.nn.Module):
    """The same in f16, two unsupported ops (cumsum, cumprod) in a row."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 8)

    def forward(self, x):
        h = torch.nn.functional.silu(self.a(x))
        h = torch.cumprod(torch.cumsum(h, dim=0).tanh(), dim=-1)
        return self.b(h) * 2.0


def test_two_unsupported_ops_in_f16_one_warning(backend_calls):
    torch.manual_seed(1)
    m = CumHalf().half().eval()
    x = torch.randn(3, 16).half()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = torch.compile(m, backend="efir", options={"candidates": 2})(x)
    msgs = efir_warnings(w)
    assert len(msgs) == 1 and "cumsum" in msgs[0] and "1 more unsupported op(s): cumprod" in msgs[0], msgs
    assert backend_calls.runs == 2, backend_calls
    with torch.no_grad():
        ref = m.double()(x.double())
    assert rel(y, ref) <= 1e-2


def test_a_fully_supported_graph_is_one_partition_without_warning(backend_calls):
    torch.manual_seed(2)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    x = torch.randn(4, 16)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = torch.compile(m, backend="efir", options={"candidates": 2})(x)
    assert efir_warnings(w) == []
    assert len(backend_calls.compiles) == 1 and backend_calls.compiles[0].ok and backend_calls.runs == 1
    # The whole graph (dynamo's), not a part of it.
    assert isinstance(backend_calls.compiles[0].module, torch.fx.GraphModule)
    assert not any(n.op == "call_module" for n in backend_calls.compiles[0].module.graph.nodes)
    with torch.no_grad():
        assert rel(y, m(x)) <= 1e-2


class OnlyCum(torch.nn.Module):
    """Nothing worth compiling: a cumsum, a view and one cheap op."""

    def forward(self, x):
        return torch.cumsum(x, dim=-1).reshape(-1) + 1.0


def test_a_fully_unsupported_graph_falls_back_with_one_warning(backend_calls):
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = torch.compile(OnlyCum(), backend="efir")(x)
    msgs = efir_warnings(w)
    assert len(msgs) == 1 and msgs[0].startswith("efir: falling back to eager:") and "cumsum" in msgs[0], msgs
    assert [c.ok for c in backend_calls.compiles] == [False] and backend_calls.runs == 0
    assert torch.equal(y, torch.cumsum(x, dim=-1).reshape(-1) + 1.0)


class FailingPart(torch.nn.Module):
    """An MLP, a cumsum, then a part that imports but has no Triton
    lowering (one of its results is its input unchanged: E0801)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.cumsum(torch.relu(self.a(x)), dim=-1)
        g = h.clone()
        return torch.exp(g * 0.5), g


def test_a_part_that_fails_to_compile_stays_pytorch(backend_calls):
    torch.manual_seed(3)
    m = FailingPart().eval()
    x = torch.randn(2, 8)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = torch.compile(m, backend="efir", options={"candidates": 2})(x)
    msgs = efir_warnings(w)
    assert len(msgs) == 1 and "cumsum" in msgs[0], msgs
    assert "1 other part(s) failed to compile" in msgs[0] and "E0801" in msgs[0], msgs
    whole, *parts = backend_calls.compiles
    assert not whole.ok and sorted(c.ok for c in parts) == [False, True], backend_calls.compiles
    bad = next(c[0] for c in parts if not c.ok)
    assert any("exp" in str(n.target) for n in bad.graph.nodes), bad.graph
    assert backend_calls.runs == 1
    with torch.no_grad():
        ref = m(x)
    assert all(rel(a, b) <= 1e-2 for a, b in zip(y, ref))


def test_unknown_backend_option_is_refused():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown option"):
        torch.compile(torch.nn.Linear(4, 4), backend="efir", options={"candidate": 2})(torch.randn(2, 4))
    torch._dynamo.reset()
