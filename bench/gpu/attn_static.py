"""efir's generated attention module(s) against the hand kernels of
attn_probe.py, compiled for sm_90 on the CPU (no GPU): registers, spills,
shared memory, wgmma shapes, ex2/cvt/mul counts in the PTX, layout
conversions and shared-memory allocations in the TTGIR.

    python3 bench/gpu/attn_static.py A.py[:B.py...] BM,BN,WARPS,STAGES

A.py: a generated attn_prefill module (its BLOCK_g0_2 and BLOCK_k1024 are
set to BM and BN). Results: bench/results/2026-12-02-s27-attn-static-cpu.md
"""
import sys, os, re, json, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton
from triton.compiler import ASTSource
from ttir_static import python_kernels, stats, TGT
import attn_probe as ap

def extra(c):
    g, p = c.asm["ttgir"], c.asm["ptx"]
    return dict(cvt_layout=g.count("ttg.convert_layout"), local_alloc=g.count("ttg.local_alloc"),
                wgmma=sorted(set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m\d+n\d+k\d+\.\w+\.\w+\.\w+)", p))),
                ex2=p.count("ex2.approx"), cvt=len(re.findall(r"\bcvt\.", p)), mul=len(re.findall(r"\bmul\.f32|\bmul\.rn\.f32|\bfma\.rn\.f32", p)))

BM, BN, W, S = [int(x) for x in sys.argv[2].split(",")]
for path in sys.argv[1].split(":"):
    text = open(path).read()
    cfg = {"BLOCK_g0_2": BM, "BLOCK_k1024": BN, "num_warps": W, "num_stages": S}
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(text + f"\nDEFAULT_CONFIG.update({json.dumps(cfg)})\n")
    for name, grid, nw, ns, c in python_kernels(f.name):
        print(os.path.basename(path), stats(c), extra(c))
for label, kw in [("rebase-exp2", dict(REBASE=True, EXP2=True, ROUND=True, GUARD=True)), ("fa2", dict(REBASE=True, EXP2=True, ROUND=False, GUARD=False))]:
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "O": "*fp16", "sm": "fp32"}
    cons = dict(N=1024, H=32, D=128, BM=BM, BN=BN, **kw)
    for k in cons: sig[k] = "constexpr"
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(4)}
    c = triton.compile(ASTSource(ap._fa, sig, cons, attrs), target=TGT, options={"num_warps": W, "num_stages": S})
    print(label, stats(c), extra(c))
