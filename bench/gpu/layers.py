"""Whole decoder layers of real models at full size (issue 29's figures).

`transformers`' LlamaDecoderLayer (hidden 4096, intermediate 14336, 32
heads, 8 key/value heads), Qwen2DecoderLayer (Qwen2-7B: hidden 3584,
intermediate 18944, 28 heads, 4 key/value heads, q/k/v biases) and
MistralDecoderLayer (Mistral-7B: Llama's shapes, sliding window 4096),
random weights, in fp16 and bf16; at decode (one token against a 4,095-token
cache) and at a 512-token prefill (causal).

Two modes:

- `--search-only` (any machine, no GPU): efir's search on the CPU, per case:
  the import (torch.export and efir's importer), then `efir-opt --saturate
  --compact=max-candidates=N` and `efir-translate --top 1 --print-plan`
  with the binaries of `--bin` (release builds), each timed; the kernel
  count of the chosen candidate. The issue's target: the whole-layer search
  within 60 s on 2 cores.
- default (a CUDA GPU): per case, side by side in one process, eager,
  Inductor (`torch.compile(mode="max-autotune-no-cudagraphs")`) and
  `torch.compile(backend="efir")`: whether efir fell back (an `efir:`
  warning, or a part left to PyTorch), its relative L2 error against eager
  (target <= 1e-2), and each one's median time (CUDA graphs where the
  callable allows capture, else plain `do_bench` medians; the column says
  which).

    python3 bench/gpu/layers.py --search-only --bin target/release --out bench/results/<date>-layers-search-cpu.json
    python3 bench/gpu/layers.py --smoke --only llama_decode_fp16 --out /tmp/smoke.json   # the GPU mode, on the CPU
    EFIR_BIN_DIR=bench/gpu/bin python3 bench/gpu/layers.py --out bench/results/<date>-h200-layers.json

`--only llama_decode_fp16` (a regular expression over case names) picks
cases; `--tiny` uses a tiny config (hidden 64) to check the script itself.
The JSON is rewritten after every case, so a run cut short keeps what it
measured.
"""

import argparse
import json
import logging
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import warnings

import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))
from layer_modules import Decode, Prefill, layer_and_rope  # noqa: E402

CACHE, PREFILL = 4095, 512

# Full-size configs (the Llama; Qwen2-7B; Mistral-7B).
MODELS = {
    "llama": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8),
    "qwen2": dict(hidden_size=3584, intermediate_size=18944, num_attention_heads=28, num_key_value_heads=4),
    "mistral": dict(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                    sliding_window=4096),
}
TINY = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def build(kind, tiny):
    shape = dict(TINY) if tiny else dict(MODELS[kind])
    if kind == "mistral":
        shape["sliding_window"] = MODELS[kind]["sliding_window"]
    return layer_and_rope(kind, **shape)


def case(kind, phase, dtype, tiny, device):
    """The module and its inputs (random, seeded)."""
    cfg, layer, rope = build(kind, tiny)
    dt = DTYPES[dtype]
    layer = layer.to(device=device, dtype=dt)
    rope = rope.to(device)
    g = torch.Generator(device="cpu").manual_seed(1)
    h = cfg.hidden_size
    hd = h // cfg.num_attention_heads
    past, seq = (7, 8) if tiny else (CACHE, PREFILL)
    randn = lambda *s: torch.randn(*s, generator=g).to(device=device, dtype=dt)  # noqa: E731
    if phase == "prefill":
        x = randn(1, seq, h)
        cos, sin = rope(x, torch.arange(seq, device=device)[None])
        return Prefill(layer), (x, cos, sin)
    x = randn(1, 1, h)
    cos, sin = rope(x, torch.tensor([[past]], device=device))
    kv = cfg.num_key_value_heads
    return Decode(cfg, layer), (x, cos, sin, randn(1, kv, past, hd), randn(1, kv, past, hd))


def search(name, m, xs, bindir, candidates, work):
    """Import, saturate + compact, translate: seconds of each, and the chosen
    candidate's kernel count."""
    import efir
    from efir.program import export

    row = {"case": name}
    t = time.perf_counter()
    with torch.no_grad():
        text = efir.import_program(export(m, xs), name="layer")
    row["import_s"] = round(time.perf_counter() - t, 2)
    src = work / f"{name}.efir"
    src.write_text(text)
    row["ops"] = sum(1 for line in text.splitlines() if " = " in line)
    cands = work / f"{name}.cands.efir"
    t = time.perf_counter()
    r = subprocess.run([str(bindir / "efir-opt"), "--saturate", f"--compact=max-candidates={candidates}", str(src), "-o", str(cands)],
                       capture_output=True, text=True)
    row["search_s"] = round(time.perf_counter() - t, 2)
    if r.returncode != 0:
        row["error"] = r.stderr.strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        return row
    row["warnings"] = [ln for ln in r.stderr.splitlines() if ln.startswith("warning")]
    t = time.perf_counter()
    r = subprocess.run([str(bindir / "efir-translate"), "--to-triton", "--top", "1", "--print-plan", str(cands), "-o", str(work / f"{name}.py")],
                       capture_output=True, text=True)
    row["translate_s"] = round(time.perf_counter() - t, 2)
    chosen = re.search(r"^@(\S+): (\d+) kernel\(s\).*\[chosen\]", r.stderr, re.M)
    if r.returncode != 0 or not chosen:
        row["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1:]
        return row
    row["kernels"] = int(chosen[2])
    row["candidates"] = len(re.findall(r"^@\S+: \d+ kernel\(s\)", r.stderr, re.M))
    return row


def median_us(fn):
    """Median time of `fn` in us and how it was timed (CUDA-graph replays,
    or plain launches where the callable cannot be captured; wall clock on
    the CPU, `--smoke`)."""
    if not torch.cuda.is_available():
        ts = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return sorted(ts)[1] * 1e6, "cpu-wall"
    from triton.testing import do_bench, do_bench_cudagraph

    try:
        return do_bench_cudagraph(fn, rep=40, return_mode="median") * 1e3, "graph"
    except Exception:  # noqa: BLE001 (a callable that syncs or allocates on the host)
        torch.cuda.synchronize()
        return do_bench(fn, rep=100, return_mode="median") * 1e3, "launch"


def rel_l2(out, ref):
    out = out[0] if isinstance(out, tuple) else out
    ref = ref[0] if isinstance(ref, tuple) else ref
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def gpu(name, m, xs, budget):
    import efir  # noqa: F401 (registers the backend)

    row = {"case": name}
    with torch.no_grad():
        ref = m(*xs)
        row["eager_us"], row["eager_timing"] = median_us(lambda: m(*xs))
        torch._dynamo.reset()
        ind = torch.compile(m, mode="max-autotune-no-cudagraphs")
        t = time.perf_counter()
        ind(*xs)
        row["inductor_compile_s"] = round(time.perf_counter() - t, 1)
        row["inductor_us"], row["inductor_timing"] = median_us(lambda: ind(*xs))
        torch._dynamo.reset()
        ef = torch.compile(m, backend="efir", options={"tune": budget})
        t = time.perf_counter()
        # the backend's choice between the whole graph and its chunks
        said = []
        h = logging.Handler()
        h.emit = lambda r: said.append(r.getMessage())
        lg = logging.getLogger("efir")
        lg.addHandler(h)
        level = lg.level
        lg.setLevel(logging.INFO)
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                out = ef(*xs)
        finally:
            lg.removeHandler(h)
            lg.setLevel(level)
        row["efir_choice"] = [x for x in said if "compiled the graph" in x]
        row["efir_compile_s"] = round(time.perf_counter() - t, 1)
        said = [str(x.message) for x in w if str(x.message).startswith("efir")]
        row["fell_back"] = said
        row["rel_l2"] = rel_l2(out, ref)
        row["efir_us"], row["efir_timing"] = median_us(lambda: ef(*xs))
    row["vs_eager"] = row["eager_us"] / row["efir_us"]
    row["vs_inductor"] = row["inductor_us"] / row["efir_us"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--search-only", action="store_true", help="the CPU search only (no GPU)")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release"), help="folder of efir-opt and efir-translate (--search-only)")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--tune", type=float, default=0, help="efir backend's tuning budget per graph (GPU mode)")
    ap.add_argument("--only", default="", help="regular expression over case names")
    ap.add_argument("--tiny", action="store_true", help="tiny configs (checks the script)")
    ap.add_argument("--smoke", action="store_true", help="the GPU mode's comparison on the CPU at tiny configs, kernels under TRITON_INTERPRET=1 (checks the script without a GPU)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    device = "cpu" if a.search_only or a.smoke else "cuda"
    if a.smoke:
        os.environ["TRITON_INTERPRET"] = "1"
        a.tiny = True
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: no CUDA device (use --search-only for the CPU search, --smoke to check the script)")
    names = [f"{k}_{p}_{d}" for k in MODELS for p in ("decode", "prefill") for d in DTYPES]
    names = [n for n in names if re.search(a.only, n)]
    rows = []
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = ""
    head = {"mode": "search" if a.search_only else "gpu", "tiny": a.tiny, "commit": commit, "cpus": os.cpu_count(),
            "load_average_start": os.getloadavg()[0], "torch": torch.__version__}
    with tempfile.TemporaryDirectory(prefix="efir-layers-") as work:
        for n in names:
            kind, phase, dtype = n.split("_")
            m, xs = case(kind, phase, dtype, a.tiny, device)
            try:
                row = search(n, m, xs, pathlib.Path(a.bin), a.candidates, pathlib.Path(work)) if a.search_only else gpu(n, m, xs, a.tune)
            except Exception as e:  # noqa: BLE001 (a case that fails is a figure too)
                row = {"case": n, "error": f"{type(e).__name__}: {str(e)[:300]}"}
            rows.append(row)
            print(json.dumps(row), flush=True)
            head["load_average_now"] = os.getloadavg()[0]
            pathlib.Path(a.out).write_text(json.dumps({**head, "results": rows}, indent=1))
            del m, xs
            if device == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
