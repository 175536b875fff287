"""The eight workloads of WORKLOADS.md at any batch B, as .efir text.

The B=16 programs are examples/<name>.efir; B is their leading dim (the
token count, or the batch of attention). lora's rank-16 factor Bm[16, 4096]
keeps its 16.
Usage: python3 bench/gpu/workloads.py B OUT_DIR
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = ["rmsnorm_mlp", "rmsnorm_swiglu", "gated_mlp", "layernorm_gemm", "lora", "ngpt", "attn_decode", "attn_prefill"]


def at_batch(name, b):
    text = (ROOT / "examples" / f"{name}.efir").read_text()
    text = re.sub(r"tensor<16x", f"tensor<{b}x", text)
    text = re.sub(r"tensor<16xf", f"tensor<{b}xf", text)
    if name == "lora":
        text = text.replace(f"%bm: tensor<{b}x4096xf16>", "%bm: tensor<16x4096xf16>")
    return text


if __name__ == "__main__":
    b, out = int(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for n in NAMES:
        (out / f"{n}_B{b}.efir").write_text(at_batch(n, b))


def derived_rmsnorm_mlp(b):
    """examples/derivations/rmsnorm_mlp.efir (normalization after both
    projections) at the real shapes: its small dims 2, 64 and 176 are B, 4096
    and 11008 (all distinct, so the mapping is exact), and so are the axis
    extents and the mean's divisor."""
    text = (ROOT / "examples" / "derivations" / "rmsnorm_mlp.efir").read_text()
    dims = {"2": str(b), "64": "4096", "176": "11008", "1": "1"}

    def shape(m):
        parts = m.group(1).split("x")
        return "tensor<" + "x".join(dims.get(p, p) for p in parts[:-1]) + ("x" if len(parts) > 1 else "") + parts[-1]

    text = re.sub(r"tensor<((?:\d+x)*[a-z]+\d*)", shape, text)
    text = text.replace("@n176", "@n11008").replace("tensor.full<64.0>", "tensor.full<4096.0>")
    return text
