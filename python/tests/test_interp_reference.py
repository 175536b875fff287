"""efir-run's outputs on every examples/small workload equal a reference
written independently in numpy (float64), relative L2 <= 1e-4.

efir-run evaluates in f64 (--precision f64) so that both sides compute the
same real-number function; the inputs are efir-run's own seeded draws
(--dump-inputs), read back with numpy.
"""

import os
import pathlib
import subprocess
import tempfile

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("EFIR_BIN_DIR", ROOT / "target" / "debug")) / "efir-run"


def rms(x):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)


def silu(z):
    return z / (1.0 + np.exp(-z))


def softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def attention(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        n = s.shape[-1]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    return softmax(s) @ v


REFERENCES = {
    "rmsnorm_mlp": lambda x, gamma, wg, wu: silu((rms(x) * gamma) @ wg) * ((rms(x) * gamma) @ wu),
    "rmsnorm_swiglu": lambda x, gamma, wg, wu, wd: (silu((rms(x) * gamma) @ wg) * ((rms(x) * gamma) @ wu)) @ wd,
    "gated_mlp": lambda x, w1, w2: silu(x @ w1) * (x @ w2),
    "layernorm_gemm": lambda x, gamma, beta, w: (
        (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * gamma + beta
    )
    @ w,
    "lora": lambda x, w, a, bm: x @ w + (x @ a) @ bm,
    "ngpt": lambda h, x, alpha: rms(x + alpha * (rms(h) - x)),
    "attn_decode": lambda q, k, v: attention(q, k, v, causal=False),
    "attn_prefill": lambda q, k, v: attention(q, k, v, causal=True),
    "attn_gqa": lambda q, k, v: attention(q, k, v, causal=True),
}

PARAMS = {
    "rmsnorm_mlp": ["x", "gamma", "wg", "wu"],
    "rmsnorm_swiglu": ["x", "gamma", "wg", "wu", "wd"],
    "gated_mlp": ["x", "w1", "w2"],
    "layernorm_gemm": ["x", "gamma", "beta", "w"],
    "lora": ["x", "w", "a", "bm"],
    "ngpt": ["h", "x", "alpha"],
    "attn_decode": ["q", "k", "v"],
    "attn_prefill": ["q", "k", "v"],
    "attn_gqa": ["q", "k", "v"],
}


def test_every_small_example_has_a_reference():
    names = sorted(p.stem for p in (ROOT / "examples" / "small").glob("*.efir"))
    assert names == sorted(REFERENCES)


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("seed", [1, 2])
def test_interpreter_matches_numpy(name, seed):
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [str(BIN), str(ROOT / "examples" / "small" / f"{name}.efir"), "--seed", str(seed),
             "--precision", "f64", "--output-dir", out, "--dump-inputs"],
            check=True, capture_output=True,
        )
        args = [np.load(os.path.join(out, f"in_{p}.npy")).astype(np.float64) for p in PARAMS[name]]
        assert all(np.all(a != 0) for a in args), "inputs must never be zero"
        got = np.load(os.path.join(out, "out0.npy"))
    assert got.dtype == np.float64
    want = REFERENCES[name](*args)
    assert got.shape == want.shape
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= 1e-4, f"{name}: relative L2 {err:.3e}"
