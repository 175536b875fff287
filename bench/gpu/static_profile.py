"""Registers, spills, shared memory and memory ops of a generated module's
kernels at given schedules, compiled for sm_90 without a GPU (Triton's
passes, LLVM and ptxas on the CPU; see bench/gpu/ttir_static.py, whose
launch capture and statistics this reuses).

    python3 bench/gpu/static_profile.py MODULE.py ['{"num_warps": 2}' ...]

Each schedule is a JSON object applied over the module's DEFAULT_CONFIG
(none: the default). Spills and a blown register budget are what a GPU time
many times the expected one usually comes from; this finds them offline.
Needs torch and Triton.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ttir_static import python_kernels, stats  # noqa: E402


def main():
    path = sys.argv[1]
    cfgs = [json.loads(a) for a in sys.argv[2:]] or [{}]
    text = open(path).read()
    for cfg in cfgs:
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write(text + f"\nDEFAULT_CONFIG.update({json.dumps(cfg)})\n")
        try:
            print(f"== {os.path.basename(path)} {json.dumps(cfg) if cfg else '(default)'}")
            for name, grid, nw, ns, c in python_kernels(f.name):
                print(f"   {name:12} grid={grid} {stats(c)}")
        except Exception as e:  # a schedule that does not compile is a finding too
            print(f"   failed: {type(e).__name__}: {str(e)[:200]}")
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    main()
