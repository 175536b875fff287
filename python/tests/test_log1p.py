"""`ew.log1p` end to end under TRITON_INTERPRET=1: `torch.log1p` imports to
`ew.log1p`, compiles (saturate, compact, Triton) and matches torch on random
inputs, among them values so small that log(1 + x) computed as written in
f32 is off by up to 5% (1 + 1e-6 rounds to 1 + 9.5e-7)."""


import pytest
import triton_harness as h

torch = h.interpreted_triton()
efir = h.source_efir()

# The interpreter evaluates both sides of the kernel's `tl.where` (0 / 0
# where 1 + x == 1, whose side is not taken).
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


def scaled_log1p(x, y):
    return torch.log1p(x) * y


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(4, 32, generator=g) * 3.0 - 0.99  # in (-0.99, 2.01)
    x[0] = torch.randn(32, generator=g) * 1e-6  # tiny: log(1 + x) loses them
    x[1, :4] = torch.tensor([0.0, -0.0, 1e-30, -1e-8])
    return x, torch.randn(4, 32, generator=g)


def test_log1p_compiles_and_matches_torch(tmp_path):
    f = efir.compile(scaled_log1p, inputs(0), quiet=True, workdir=tmp_path)
    assert "ew.log1p" in (tmp_path / "program.efir").read_text()
    for seed in (1, 2):
        x, y = inputs(seed)
        out = f(x, y)
        ref = scaled_log1p(x.double(), y.double())
        # Element by element, relative to each value: the tiny ones too.
        err = (out.double() - ref).abs() / ref.abs().clamp_min(1e-300)
        bad = err > 1e-5
        assert not bad.any(), (x[bad], out[bad], ref[bad])
        naive = torch.log(1.0 + x) * y
        assert ((naive.double() - ref).abs() / ref.abs().clamp_min(1e-300)).max() > 1e-2
