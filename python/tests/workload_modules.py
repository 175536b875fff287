"""The workloads of WORKLOADS.md as ordinary torch.nn.Modules (nn.Linear,
a hand RMSNorm or F.rms_norm, F.layer_norm, F.scaled_dot_product_attention),
at any size: used by the importer and efir.compile tests (tiny shapes) and by
bench/gpu/compile_b8.py (the real shapes, on the GPU)."""

import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    def __init__(self, d, hand=True):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(d))
        self.hand = hand

    def forward(self, x):
        if not self.hand:
            return F.rms_norm(x.float(), (x.shape[-1],), self.weight.float(), 1e-6).to(x.dtype)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight.float()).to(x.dtype)


class RMSNormMLP(torch.nn.Module):
    def __init__(self, d=32, h=48, down=False, hand=True):
        super().__init__()
        self.norm = RMSNorm(d, hand)
        self.gate = torch.nn.Linear(d, h, bias=False)
        self.up = torch.nn.Linear(d, h, bias=False)
        self.down = torch.nn.Linear(h, d, bias=False) if down else None

    def forward(self, x):
        h = self.norm(x)
        y = F.silu(self.gate(h)) * self.up(h)
        return self.down(y) if self.down is not None else y


class GatedMLP(torch.nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.w1 = torch.nn.Linear(d, d, bias=False)
        self.w2 = torch.nn.Linear(d, d, bias=False)

    def forward(self, x):
        return F.silu(self.w1(x)) * self.w2(x)


class LayerNormGemm(torch.nn.Module):
    def __init__(self, d=32, n=48):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d, eps=1e-5)
        self.proj = torch.nn.Linear(d, n, bias=False)

    def forward(self, x):
        h = F.layer_norm(x.float(), (x.shape[-1],), self.ln.weight.float(), self.ln.bias.float(), 1e-5)
        return self.proj(h.to(x.dtype))


class LoRA(torch.nn.Module):
    def __init__(self, d=32, r=4):
        super().__init__()
        self.base = torch.nn.Linear(d, d, bias=False)
        self.a = torch.nn.Linear(d, r, bias=False)
        self.b = torch.nn.Linear(r, d, bias=False)

    def forward(self, x):
        return self.base(x) + self.b(self.a(x))


class NGPT(torch.nn.Module):
    def forward(self, h, x, alpha):
        def rms(t):
            return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)

        hf, xf, af = h.float(), x.float(), alpha.float()
        return rms(xf + af * (rms(hf) - xf)).to(x.dtype)


class Attention(torch.nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
