"""A layer case's chunks as efir compiles them (efir.partial.chunked), on
the CPU: each chunk imported to `.efir`, saturated and compacted, and the
best by static estimate translated to a Triton module, for static compiles
(bench/gpu/ttir_static.py) and GPU probes (bench/gpu/module_probe.py).

    python3 bench/gpu/chunk_plans.py --case llama_decode_bf16 --out DIR [--candidates 200] [--bin target/release]

Writes DIR/<case>_part<i>.efir, .cands.efir and .py. Cases as
bench/gpu/layers.py names them (full size, random weights; torch.export's
graphs follow the local torch, so a chunk may differ from the GPU
machine's)."""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import torch  # noqa: E402
import layers  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", type=int, default=64, help="as efir.compile's default")
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "target", "release"))
    a = ap.parse_args()
    import efir
    from efir import partial
    from efir.program import export

    kind, phase, dt = a.case.split("_")
    m, xs = layers.case(kind, phase, dt, False, "cpu")
    recs = []

    def compile_fn(gm, args, **kw):
        recs.append((gm, list(args)))
        return lambda *x: gm(*x)

    with torch.no_grad():
        partial.chunked(m, list(xs), {"tune": 0}, compile_fn, None)
    os.makedirs(a.out, exist_ok=True)
    for i, (gm, args) in enumerate(recs):
        with torch.no_grad():
            text = efir.import_program(export(gm, args), name="program")
        p = os.path.join(a.out, f"{a.case}_part{i}")
        with open(p + ".efir", "w") as f:
            f.write(text)
        subprocess.run([os.path.join(a.bin, "efir-opt"), p + ".efir", "--saturate",
                        f"--compact=max-candidates={a.candidates}", "-o", p + ".cands.efir"],
                       check=True, stderr=subprocess.DEVNULL)
        r = subprocess.run([os.path.join(a.bin, "efir-translate"), "--to-triton", p + ".cands.efir",
                            "--top", "1", "--print-plan", "-o", p + ".py"], capture_output=True, text=True, check=True)
        chosen = [l for l in r.stderr.splitlines() if "[chosen]" in l]
        print(f"part {i}: {chosen[0] if chosen else '?'}", flush=True)


if __name__ == "__main__":
    main()
