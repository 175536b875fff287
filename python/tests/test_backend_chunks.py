"""A large graph is also compiled in chunks (efir.partial.chunked, the
backend's `_or_chunks`): contiguous runs of at most CHUNK_CONTRACTIONS
contractions of the exported graph, each searched on its own; the backend
keeps the faster of the whole compile and the chunks (static estimates on
the CPU). Tiny transformers decoder layers, kernels under TRITON_INTERPRET."""

import logging
import os
import sys
import warnings

os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402
import triton_harness as h  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

efir = h.source_efir()
from test_import_layers import layer_and_rope, rel  # noqa: E402
from layer_modules import Decode  # noqa: E402

P = sys.modules["efir.partial"]
B = sys.modules["efir.backend"]
estimate = sys.modules["efir.stages"].estimate


def decode_case():
    cfg, layer, rope = layer_and_rope("llama")
    m = Decode(cfg, layer)
    past = 7
    g = torch.Generator().manual_seed(3)
    pk, pv = torch.randn(1, 2, past, 16, generator=g), torch.randn(1, 2, past, 16, generator=g)
    x = torch.randn(1, 1, 64, generator=g)
    cos, sin = rope(x, torch.tensor([[past]]))
    return m, (x, cos, sin, pk, pv)


def test_chunks_compute_the_layer():
    m, xs = decode_case()
    with torch.no_grad():
        ref = m(*xs)
    call, parts = P.chunked(m, list(xs), {}, efir.compile, None)
    # q, k, v | attention | o_proj, gate, up | down: eight contractions in
    # runs of at most three, the attention a run of its own.
    assert call is not None and len(parts) == 4, parts
    out = call(*xs)
    assert rel(out[0], ref) <= 1e-2
    # Each part is a program of its own, with its own kernels.
    assert all(estimate(f.source)["kernels"] >= 1 for f in parts.values())


def test_few_contractions_are_not_chunked():
    m, xs = decode_case()
    assert P.chunked(m, list(xs), {}, efir.compile, None, limit=8) == (None, None)


@pytest.mark.parametrize("min_us", [0.0, 1e12])
def test_backend_keeps_the_cheaper_of_whole_and_chunks(monkeypatch, caplog, min_us):
    m, xs = decode_case()
    with torch.no_grad():
        ref = m(*xs)
    monkeypatch.setattr(B, "CHUNK_MIN_US", min_us)
    made = []
    cls = next(c for c in vars(B).values() if isinstance(c, type) and hasattr(c, "_or_chunks"))
    real = cls._or_chunks

    def spy(self, module, tensors, whole):
        fn = real(self, module, tensors, whole)
        made.append((whole, fn))
        return fn

    monkeypatch.setattr(cls, "_or_chunks", spy)
    torch._dynamo.reset()
    with caplog.at_level(logging.INFO, logger="efir"), warnings.catch_warnings(record=True) as w, torch.no_grad():
        warnings.simplefilter("always")
        out = torch.compile(m, backend="efir")(*xs)
    assert not [str(x.message) for x in w if str(x.message).startswith("efir")]
    assert rel(out, ref) <= 1e-2
    assert len(made) == 1
    whole, fn = made[0]
    if min_us > 0:
        # Below the threshold nothing else is tried.
        assert fn is whole and fn.chunks is None
        assert "chunks" not in caplog.text
        return
    said = [r.getMessage() for r in caplog.records if "compiled the graph" in r.getMessage()]
    assert len(said) == 1, said
    est = estimate(whole.source)["time_us"]
    if fn is whole:
        assert "whole" in said[0] and fn.chunks is None
    else:
        assert "in chunks" in said[0] and len(fn.chunks) == 4
        assert sum(estimate(f.source)["time_us"] for f in fn.chunks.values()) < est


class _Consts(torch.nn.Module):
    """Four matmuls and a constant created in forward (torch.export lifts it
    as a CPU tensor and asserts its device, as in Mistral's decoder layer)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 8, 8))

    def forward(self, x):
        torch.tensor(2).to("cpu")  # unused, as Mistral's: only the trace's check remains
        for i in range(4):
            x = x @ self.w[i]
        return x


def test_chunks_run_where_the_constants_moved():
    # The meta device stands in for the GPU: the program's state moves to the
    # inputs' device, and the trace's check that the constant is on the CPU
    # must not run in a chunk (it failed there with a device mismatch).
    m = _Consts().to("meta")
    x = torch.randn(2, 8, device="meta")

    def pytorch(gm, args, **_):
        return gm

    call, parts = P.chunked(m, [x], {}, pytorch, None, limit=2)
    assert call is not None and len(parts) == 2
    (out,) = call(x)
    assert out.device.type == "meta" and out.shape == (2, 8)
