"""The PyTorch importer: every workload of WORKLOADS.md written as an ordinary
torch.nn.Module imports, and efir's interpreter on the imported program
matches PyTorch (relative L2 <= 1e-3; both in float64, so only the program's
meaning is compared) at small shapes; unsupported programs give clear errors.
"""

import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover
    if os.environ.get("EFIR_REQUIRE_TRITON") == "1":
        raise
    pytest.skip("torch is not installed", allow_module_level=True)

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
import efir  # noqa: E402

BIN = pathlib.Path(os.environ.get("EFIR_BIN_DIR", ROOT / "target" / "debug"))


from workload_modules import NGPT, Attention, GatedMLP, LayerNormGemm, LoRA, RMSNormMLP  # noqa: E402,F401


class Rotary(torch.nn.Module):
    """Rotary embedding of a projection, rotate-half form: the halves of the
    last dim swapped, the second negated (slice and cat)."""

    def __init__(self, d=16):
        super().__init__()
        self.proj = torch.nn.Linear(d, d, bias=False)

    def forward(self, x, cos, sin):
        q = self.proj(x)
        h = q.shape[-1] // 2
        q1, q2 = q[..., :h], q[..., h:]
        return q * cos + torch.cat((-q2, q1), dim=-1) * sin


class LogSoftmax(torch.nn.Module):
    def forward(self, x):
        return F.log_softmax(x, dim=-1) + F.log_softmax(x, dim=0)


class NegativeSlices(torch.nn.Module):
    """Slices with negative starts and ends, an end past the extent, a step,
    narrow and select with negative indices, chunk, split and unbind
    (getitem)."""

    def forward(self, x):
        a = x[:, -3:] * 2.0 + x[:, -7:-4] + x[:, 1:8:3] + x.narrow(1, -5, 3)
        b = a + x[:, -1:] + x.select(1, -2)[:, None] + x[-1:, 7:100] + x.unbind(1)[3][:, None]
        lo, hi = x.chunk(2, dim=-1)
        p, q = x.split([4, 6], dim=1)
        return torch.cat((b, lo - hi, p[:, ::2] * q[:, -2:]), dim=-1)


def cases():
    t = lambda *s: torch.randn(*s)  # noqa: E731
    return [
        ("rmsnorm_mlp", RMSNormMLP(), (t(2, 32),)),
        ("rmsnorm_mlp_frms", RMSNormMLP(hand=False), (t(2, 32),)),
        ("rmsnorm_swiglu", RMSNormMLP(down=True), (t(2, 32),)),
        ("gated_mlp", GatedMLP(), (t(2, 32),)),
        ("layernorm_gemm", LayerNormGemm(), (t(2, 32),)),
        ("lora", LoRA(), (t(2, 32),)),
        ("ngpt", NGPT(), (t(2, 32), t(2, 32), t(2, 32).abs() * 0.1)),
        ("attn_decode", Attention(False), (t(2, 2, 1, 16), t(2, 2, 16, 16), t(2, 2, 16, 16))),
        ("attn_prefill", Attention(True), (t(2, 2, 16, 16), t(2, 2, 16, 16), t(2, 2, 16, 16))),
        ("rotary", Rotary(), (t(2, 4, 16), t(4, 16), t(4, 16))),
        ("log_softmax", LogSoftmax(), (t(4, 12),)),
        ("negative_slices", NegativeSlices(), (t(4, 10),)),
    ]


@pytest.mark.parametrize("name,mod,inputs", cases(), ids=[c[0] for c in cases()])
def test_imported_program_matches_pytorch(name, mod, inputs, tmp_path):
    torch.manual_seed(0)
    mod16 = mod.half()
    ep = torch.export.export(mod16, tuple(x.half() for x in inputs))
    text = efir.import_program(ep, name)
    src = tmp_path / f"{name}.efir"
    src.write_text(text)
    # Inputs: parameters (by their real names) then the user inputs.
    feeds = {}
    for spec in ep.graph_signature.input_specs:
        if spec.target:
            feeds[spec.target] = dict(mod16.named_parameters())[spec.target]
    user = [s.arg.name for s in ep.graph_signature.input_specs if not s.target]
    for n, x in zip(user, inputs):
        feeds[n] = x.half()
    args = []
    for n, x in feeds.items():
        p = tmp_path / f"in_{n}.npy"
        np.save(p, x.detach().numpy())
        args += ["--input", f"{n}={p}"]
    out = tmp_path / "out"
    r = subprocess.run([str(BIN / "efir-run"), str(src), "--precision", "f64", "--output-dir", str(out), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + text
    got = np.load(out / "out0.npy").astype(np.float64)
    # PyTorch in float64 on the same (fp16-valued) inputs and parameters.
    ref_mod = mod16.double()
    with torch.no_grad():
        ref = ref_mod(*[x.half().double() for x in inputs]).numpy()
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err <= 1e-3, (name, err)


def test_unsupported_op_names_op_and_line():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, dim=0)

    ep = torch.export.export(Bad(), (torch.randn(4),))
    with pytest.raises(efir.ImportError_, match=r"cumsum.*test_import.py"):
        efir.import_program(ep)


def test_slices_import_as_tensor_slice_and_concat():
    ep = torch.export.export(Rotary(), (torch.randn(2, 4, 16), torch.randn(4, 16), torch.randn(4, 16)))
    text = efir.import_program(ep, "rotary")
    assert "tensor.slice<[0, 0, 0], [2, 4, 8], [1, 1, 1]>" in text, text
    assert "tensor.slice<[0, 0, 8], [2, 4, 16], [1, 1, 1]>" in text, text
    assert "tensor.concat<2>" in text, text
    ep = torch.export.export(NegativeSlices(), (torch.randn(4, 10),))
    text = efir.import_program(ep, "neg")
    # x[:, -3:] is columns 7..10; x[:, -7:-4] columns 3..6; x[-1:, 7:100] row 3, columns 7..10.
    assert "tensor.slice<[0, 7], [4, 10], [1, 1]>" in text, text
    assert "tensor.slice<[0, 3], [4, 6], [1, 1]>" in text, text
    assert "tensor.slice<[3, 0], [4, 10], [1, 1]>" in text and "tensor.slice<[0, 7], [1, 10], [1, 1]>" in text, text
    # x[:, 1:8:3], x.narrow(1, -5, 3), x.select(1, -2).
    assert "tensor.slice<[0, 1], [4, 8], [1, 3]>" in text, text
    assert "tensor.slice<[0, 5], [4, 8], [1, 1]>" in text, text
    assert "tensor.slice<[0, 8], [4, 9], [1, 1]>" in text, text


def test_empty_slices_are_refused():
    class Empty(torch.nn.Module):
        def forward(self, x):
            return x[:, 5:2] * 2.0

    ep = torch.export.export(Empty(), (torch.randn(4, 8),))
    with pytest.raises(efir.ImportError_, match=r"empty tensor.*test_import.py"):
        efir.import_program(ep)


def test_dynamic_shapes_are_refused():
    class Id(torch.nn.Module):
        def forward(self, x):
            return x * 2.0

    d = torch.export.Dim("n", min=2, max=64)
    ep = torch.export.export(Id(), (torch.randn(4, 8),), dynamic_shapes=({0: d},))
    with pytest.raises(efir.ImportError_, match="dynamic shape"):
        efir.import_program(ep)


def test_data_dependent_branch_is_a_clear_error():
    class Branch(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2.0
            return x

    with pytest.raises(Exception, match="(?i)data.dependent|guard|control flow"):
        ep = torch.export.export(Branch(), (torch.randn(4),))
        efir.import_program(ep)


def test_command_line(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import torch\n"
        "def mlp(x, w):\n"
        "    return torch.nn.functional.silu(x @ w)\n"
    )
    out = tmp_path / "mlp.efir"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run(
        [sys.executable, "-m", "efir", "import", f"{prog}:mlp", "--example-shapes", "2x8:f16", "--example-shapes", "8x4:f16", "-o", str(out)],
        capture_output=True, text=True, env=env,
    )
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "func @mlp(" in text and "tensor.matmul" in text and "ew.sigmoid" in text
    r = subprocess.run([str(BIN / "efir-opt"), str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


class MaskedAttention(torch.nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, q, k, v, mask):
        if self.kind == "gqa":
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=0.3)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("kind", ["bool", "float", "gqa"])
def test_sdpa_masks_and_grouped_heads(kind, tmp_path):
    torch.manual_seed(0)
    hk = 2 if kind == "gqa" else 4
    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, hk, 8, 16), torch.randn(1, hk, 8, 16)
    if kind == "bool":
        mask = torch.rand(8, 8) > 0.3
        mask[:, 0] = True  # no fully masked row
    else:
        mask = torch.randn(1, 1, 8, 8)
    m = MaskedAttention(kind)
    ex = (q.half(), k.half(), v.half(), mask if kind == "bool" else mask.half())
    ep = torch.export.export(m, ex)
    text = efir.import_program(ep, "attn")
    src = tmp_path / "attn.efir"
    src.write_text(text)
    names = [s.arg.name for s in ep.graph_signature.input_specs]
    args = []
    for n, x in zip(names, ex):
        p = tmp_path / f"in_{n}.npy"
        np.save(p, x.numpy())
        args += ["--input", f"{n}={p}"]
    out = tmp_path / "out"
    r = subprocess.run([str(BIN / "efir-run"), str(src), "--precision", "f64", "--output-dir", str(out), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + text
    got = np.load(out / "out0.npy").astype(np.float64)
    with torch.no_grad():
        ref = m(*(x.double() if x.dtype != torch.bool else x for x in ex)).numpy()
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err <= 1e-3, (kind, err)
