"""Grouped key/value heads (issue 29, item 1): the broadcast of each
key/value head to its query group (`expand` + `reshape` as transformers'
`repeat_kv` writes it, `repeat_interleave`, SDPA with `enable_gqa`) is
imported as a broadcast view, never a copy: the attention's matmuls,
softmax and mask work on `[b, hk, g, s, d]` against key/value heads
`[b, hk, 1, s, d]` (the matmul's batch broadcast), so no `tensor.broadcast`
of K or V is written. Each variant runs under `efir-run` (float64) to
PyTorch's result in f32, f16 and bf16; one compiles under TRITON_INTERPRET=1
to one attention kernel plus the output projection's (it was four: K and V
were materialized first).
"""

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest
import triton_harness as h

# Torch only, not triton as h.interpreted_triton() requires: efir-run checks
# need no triton.
try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    if os.environ.get("EFIR_REQUIRE_TRITON") == "1":
        raise
    pytest.skip("torch is not installed", allow_module_level=True)

efir = h.source_efir()
from test_import_ops import check  # noqa: E402

B, HQ, HK, S, D = 1, 4, 2, 8, 16


def repeat_kv(x, n):
    """transformers' repeat_kv: expand a new dim, merge it into the heads."""
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


class EagerAttention(torch.nn.Module):
    """Attention as transformers' eager path writes it: repeated K/V heads,
    matmuls, an additive mask, softmax in f32, the heads merged and
    projected."""

    def __init__(self, repeat="expand"):
        super().__init__()
        self.o = torch.nn.Linear(HQ * D, 32, bias=False)
        self.repeat = repeat

    def forward(self, q, k, v, mask):
        g = HQ // HK
        if self.repeat == "expand":
            k, v = repeat_kv(k, g), repeat_kv(v, g)
        else:
            k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        w = torch.matmul(q, k.transpose(2, 3)) * D**-0.5 + mask
        p = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        o = torch.matmul(p, v).transpose(1, 2).reshape(B, S, HQ * D)
        return self.o(o)


class SdpaAttention(torch.nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, enable_gqa=True)


def inputs(mask=True):
    torch.manual_seed(0)
    xs = [torch.randn(B, HQ, S, D), torch.randn(B, HK, S, D), torch.randn(B, HK, S, D)]
    if mask:
        # A sliding-window causal mask (window 4), additive, shared by the heads.
        i = torch.arange(S)
        keep = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < 4)
        xs.append(torch.where(keep, 0.0, -1e4)[None, None])
    return xs


def no_repeated_heads(text):
    """No broadcast of key/value heads: the program has no broadcast at all,
    and its matmuls see K and V with a unit group dim."""
    assert "tensor.broadcast" not in text, text
    assert f"tensor<{B}x{HK}x1x{S}x{D}x" in text, text


@pytest.mark.parametrize("repeat", ["expand", "repeat_interleave"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_repeated_heads_are_a_view(repeat, dtype, tmp_path):
    text = check(EagerAttention(repeat), inputs(), dtype, tmp_path, tol=1e-3 if dtype == "f32" else 2e-2)
    no_repeated_heads(text)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_sdpa_grouped_heads_are_a_view(causal, dtype, tmp_path):
    text = check(SdpaAttention(causal), inputs(mask=False), dtype, tmp_path, tol=1e-3 if dtype == "f32" else 2e-2)
    no_repeated_heads(text)


def test_repeated_heads_read_plainly_elsewhere(tmp_path):
    """A repeated value that something other than a matmul, pointwise op,
    cast, transpose or reduction reads (here a slice, and the function's
    result) is still written whole, and correct."""

    class M(torch.nn.Module):
        def forward(self, k):
            r = repeat_kv(k, 2)
            return r[:, 1:3], r * 2.0, r.sum(-1)

    check(M(), [torch.randn(B, HK, S, D)], "f32", tmp_path)


def test_grouped_attention_compiles_to_one_kernel():
    """Under TRITON_INTERPRET=1: the attention (scores, mask, softmax, P V)
    is one kernel and the output projection another, equal to PyTorch."""
    pytest.importorskip("triton")
    m = EagerAttention().eval()
    xs = inputs()
    f = efir.compile(m, xs, quiet=True, candidates=4)
    report = f.report()
    assert "kernels: 2\n" in report, report
    with torch.no_grad():
        ref = m(*xs)
    out = f(*xs)
    out = out[0] if isinstance(out, (tuple, list)) else out
    err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
    assert err <= 1e-4, err
