"""bf16 end to end on the GPU (issue 29, item 3): `efir.compile` of bf16
programs, their Triton kernels run on CUDA, checked against PyTorch.

The CPU Triton interpreter computes bf16 wrongly, so CI checks bf16 only
through efir's own interpreter (`efir-run`); this script runs the generated
bf16 kernels for real. For each case, in bf16 (and fp16 beside it): the
relative L2 error of efir's output and of eager PyTorch's, both against
the module in fp32 on the same rounded inputs and weights; a case passes
when efir's error is at most max(2 x eager's, 1e-2). Also the CUDA-graph
median time of both (no tuning: `tune=0`).

Cases: an RMSNorm + SwiGLU MLP (hidden 4096, B=8), grouped-query attention
as transformers writes it (repeat_kv + SDPA with a causal mask; 32 query /
8 key-value heads, 512 tokens), and a Llama-style decoder layer written in
plain PyTorch (the transformers code path: RMSNorm upcast to fp32, rotary
embedding with slices and cat, repeat_kv, SDPA, SwiGLU; hidden 4096, 32/8
heads, intermediate 14336) at decode (1 token, 4095-token cache as inputs)
and 128-token prefill.

    EFIR_BIN_DIR=bench/gpu/bin python3 bench/gpu/bf16_check.py --out bench/results/bf16.json

Rust stages run as the efir-opt/efir-translate binaries of EFIR_BIN_DIR
(built on the CPU machine with `cargo build --release` and carried).
"""

import argparse
import copy
import json
import pathlib
import sys
import time
import traceback

import torch
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
import efir  # noqa: E402


def repeat_kv(x, n):
    b, h, s, d = x.shape
    return x[:, :, None, :, :].expand(b, h, n, s, d).reshape(b, h * n, s, d)


class RMSNorm(torch.nn.Module):
    """transformers' LlamaRMSNorm: the statistics in fp32."""

    def __init__(self, n, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n) + 0.1 * torch.randn(n))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dt)


class MLP(torch.nn.Module):
    def __init__(self, h, i):
        super().__init__()
        self.gate = torch.nn.Linear(h, i, bias=False)
        self.up = torch.nn.Linear(h, i, bias=False)
        self.down = torch.nn.Linear(i, h, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class NormMLP(torch.nn.Module):
    def __init__(self, h, i):
        super().__init__()
        self.norm, self.mlp = RMSNorm(h), MLP(h, i)

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class GQA(torch.nn.Module):
    def __init__(self, groups, causal):
        super().__init__()
        self.groups, self.causal = groups, causal

    def forward(self, q, k, v):
        k, v = repeat_kv(k, self.groups), repeat_kv(v, self.groups)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Layer(torch.nn.Module):
    """A Llama decoder layer as transformers computes it, with the key/value
    cache passed in (decode) or absent (prefill)."""

    def __init__(self, h, heads, kv, inter):
        super().__init__()
        self.heads, self.kv, self.d = heads, kv, h // heads
        self.q = torch.nn.Linear(h, heads * self.d, bias=False)
        self.k = torch.nn.Linear(h, kv * self.d, bias=False)
        self.v = torch.nn.Linear(h, kv * self.d, bias=False)
        self.o = torch.nn.Linear(heads * self.d, h, bias=False)
        self.n1, self.n2, self.mlp = RMSNorm(h), RMSNorm(h), MLP(h, inter)

    def forward(self, x, cos, sin, pk=None, pv=None):
        b, s, _ = x.shape
        y = self.n1(x)
        q = self.q(y).view(b, s, -1, self.d).transpose(1, 2)
        k = self.k(y).view(b, s, -1, self.d).transpose(1, 2)
        v = self.v(y).view(b, s, -1, self.d).transpose(1, 2)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        if pk is not None:
            k, v = torch.cat([pk, k], 2), torch.cat([pv, v], 2)
        g = self.heads // self.kv
        a = F.scaled_dot_product_attention(q, repeat_kv(k, g), repeat_kv(v, g), is_causal=pk is None and s > 1)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        return x + self.mlp(self.n2(x))


def rope(s, d, start=0, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    f = torch.outer(torch.arange(start, start + s, dtype=torch.float32), inv)
    e = torch.cat([f, f], -1)[None]
    return e.cos().to(DEVICE), e.sin().to(DEVICE)


DEVICE = "cuda"


def cases(tiny=False):
    """name -> (module maker, inputs maker); `tiny`: shapes for a dry run on
    the CPU (TRITON_INTERPRET=1, --dtypes f32)."""
    r = lambda *s: torch.randn(*s, device=DEVICE)  # noqa: E731
    H, NH, KV, I, D, S, CACHE, P = (64, 4, 2, 128, 16, 8, 7, 8) if tiny else (4096, 32, 8, 14336, 128, 512, 4095, 128)
    return {
        "rmsnorm_swiglu_B8": (lambda: NormMLP(H, 11008 if not tiny else I), lambda: (r(8, H),)),
        f"gqa_prefill_{S}": (lambda: GQA(NH // KV, True), lambda: (r(1, NH, S, D), r(1, KV, S, D), r(1, KV, S, D))),
        f"llama_layer_decode_{CACHE}": (lambda: Layer(H, NH, KV, I), lambda: (r(1, 1, H), *rope(1, D, CACHE), r(1, KV, CACHE, D), r(1, KV, CACHE, D))),
        f"llama_layer_prefill_{P}": (lambda: Layer(H, NH, KV, I), lambda: (r(1, P, H), *rope(P, D))),
    }


def rel_l2(out, ref):
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref.float()) / torch.linalg.vector_norm(ref.float())).item()


def median_us(fn):
    from triton.testing import do_bench_cudagraph

    return do_bench_cudagraph(fn, rep=40, return_mode="median") * 1000.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", help="comma-separated case names (default: all)")
    ap.add_argument("--dtypes", default="bf16,f16")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--no-time", action="store_true", help="skip the timings")
    ap.add_argument("--out", help="write the results as JSON here")
    ap.add_argument("--tiny", action="store_true", help="tiny shapes on the CPU (a dry run: TRITON_INTERPRET=1 --dtypes f32 --no-time)")
    args = ap.parse_args()
    global DEVICE
    if args.tiny:
        DEVICE = "cpu"
    torch.manual_seed(0)
    dts = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    table = cases(args.tiny)
    rows = []
    print(f"{'case':26} {'dtype':5} {'efir err':>10} {'eager err':>10} {'ok':>3} {'efir us':>9} {'eager us':>9} {'compile s':>9}  kernels")
    for name in args.cases.split(",") if args.cases else table:
        make_mod, make_in = table[name]
        base = make_mod().to(DEVICE).eval()
        xs32 = make_in()
        for dn in args.dtypes.split(","):
            dt = dts[dn]
            row = {"case": name, "dtype": dn}
            try:
                mod = copy.deepcopy(base).to(dt)
                xs = tuple(x.to(dt) for x in xs32)
                ref_mod = copy.deepcopy(mod).float()
                with torch.no_grad():
                    ref = ref_mod(*(x.float() for x in xs))
                    eager = mod(*xs)
                t = time.time()
                f = efir.compile(mod, xs, candidates=args.candidates, quiet=True, tune=0)
                row["compile_s"] = time.time() - t
                with torch.no_grad():
                    out = f(*xs)
                out = out[0] if isinstance(out, (tuple, list)) else out
                row["efir_err"], row["eager_err"] = rel_l2(out, ref), rel_l2(eager, ref)
                row["ok"] = row["efir_err"] <= max(2 * row["eager_err"], 1e-2)
                rep = f.report()
                row["kernels"] = next((ln.split(":")[1].strip() for ln in rep.splitlines() if ln.startswith("kernels:")), "?")
                if not args.no_time:
                    with torch.no_grad():
                        row["efir_us"] = median_us(lambda: f(*xs))
                        row["eager_us"] = median_us(lambda: mod(*xs))
            except Exception as e:  # noqa: BLE001 (report every case)
                row["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
                traceback.print_exc()
            rows.append(row)
            if "error" in row:
                print(f"{name:26} {dn:5} ERROR {row['error'][:120]}")
            else:
                print(
                    f"{name:26} {dn:5} {row['efir_err']:10.2e} {row['eager_err']:10.2e} {'yes' if row['ok'] else 'NO':>3} "
                    f"{row.get('efir_us', float('nan')):9.1f} {row.get('eager_us', float('nan')):9.1f} {row['compile_s']:9.1f}  {row['kernels']}",
                    flush=True,
                )
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r.get("ok")]
    print(f"{len(rows) - len(bad)}/{len(rows)} cases pass")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
