"""Cases for the Python package: `python -m efir ...` and `efir.compile`."""

import textwrap

from .checks import check_python_ok
from .model import Case, ROOT
from .programs import SIMPLE, SMALL


PY_COMPILE = r'''
import os, sys, warnings
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import torch, efir
from efir.importer import ImportError_
torch.manual_seed(0)
ns = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "efir": efir}
try:
    exec(open("case.py").read(), ns)
except Exception as e:
    print(f"RESULT setup {type(e).__name__}: {e}"); sys.exit(1)
kw = ns.get("KW", {})
try:
    f = efir.compile(ns["M"], ns["X"], quiet=True, **kw)
except (efir.CompileError, ImportError_, TypeError, ValueError) as e:
    if os.path.exists("PWNED"):
        print("RESULT injection"); sys.exit(0)
    code = getattr(e, "code", "n/a")
    print(f"RESULT clean {type(e).__name__} (code {code}): {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
    sys.exit(1)
except Exception as e:
    print(f"RESULT panic {type(e).__name__}: {str(e).strip().splitlines()[0][:150] if str(e).strip() else ''}")
    sys.exit(1)
X2 = ns.get("X2", ns["X"])
with torch.no_grad():
    m = ns["M"]
    ref = m(*X2)
try:
    out = f(*X2)
except Exception as e:
    print(f"RESULT panic at call: {type(e).__name__}: {str(e).strip().splitlines()[0][:150] if str(e).strip() else ''}")
    sys.exit(1)
refs = ref if isinstance(ref, (tuple, list)) else (ref,)
outs = out if isinstance(out, (tuple, list)) else (out,)
if len(refs) != len(outs):
    print(f"RESULT wrong {len(outs)} outputs, expected {len(refs)}"); sys.exit(0)
tol = ns.get("TOL", 2e-2)
for o, r in zip(outs, refs):
    if o.shape != r.shape:
        print(f"RESULT wrong shape {tuple(o.shape)} != {tuple(r.shape)}"); sys.exit(0)
    r = r.double(); o = o.double()
    if not torch.equal(r.isnan(), o.isnan()):
        print("RESULT wrong NaN positions differ"); sys.exit(0)
    r = torch.nan_to_num(r, nan=0.0); o = torch.nan_to_num(o, nan=0.0)
    e = ((o - r).norm() / (r.norm() if r.norm() > 0 else 1)).item()
    if not (e <= tol):
        print(f"RESULT wrong rel_l2 {e:.3g} > {tol}"); sys.exit(0)
for bad in ns.get("BAD_CALLS", []):
    try:
        f(*bad)
        print("RESULT wrong a call with bad inputs returned"); sys.exit(0)
    except (TypeError, ValueError, efir.CompileError):
        pass
    except Exception as e:
        print(f"RESULT panic bad call: {type(e).__name__}: {str(e).strip().splitlines()[0][:150]}"); sys.exit(1)
print("ok")
'''


def cases_python(rng):
    C = []
    env = {"EFIR_NO_NATIVE": "1"}

    def cli(cat, name, argv, files=None, expect="any", **kw):
        C.append(Case("python", cat, name, ["-m", "efir"] + argv, files=files or {}, env={**env, "PYTHONPATH": str(ROOT / "python"), **kw.pop("env", {})}, expect=expect, **kw))

    mod_py = textwrap.dedent("""
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = torch.nn.Linear(8, 4)
            def forward(self, x):
                return torch.relu(self.l(x))
        def fn(x, y):
            return x * y + 1
        def boom(x):
            raise RuntimeError("user code fails")
        class Needs(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
        value = 3
        """)
    files = {"m.py": mod_py}
    cli("usage", "no-args", [], expect="error")
    cli("usage", "bad-subcommand", ["frobnicate"], expect="error")
    cli("usage", "help", ["--help"])
    cli("import", "ok-module", ["import", "m.py:M", "--example-shapes", "2x8:f32"], files=files, expect="ok", timeout=90)
    cli("import", "ok-fn", ["import", "m.py:fn", "--example-shapes", "2x8", "--example-shapes", "2x8"], files=files, expect="ok", timeout=90)
    for n, argv in [("missing-file", ["import", "nope.py:M"]), ("no-colon", ["import", "m.py"]), ("missing-name", ["import", "m.py:Nope"]),
                    ("not-callable", ["import", "m.py:value", "--example-shapes", "2"]), ("user-raises", ["import", "m.py:boom", "--example-shapes", "2x8"]),
                    ("needs-args", ["import", "m.py:Needs"]), ("shape-junk", ["import", "m.py:M", "--example-shapes", "axb:f32"]),
                    ("shape-negative", ["import", "m.py:M", "--example-shapes", "-1x8"]),
                    ("shape-huge", ["import", "m.py:M", "--example-shapes", "99999999999x99999999999"]),
                    ("dtype-f64", ["import", "m.py:M", "--example-shapes", "2x8:f64"]), ("dtype-int", ["import", "m.py:M", "--example-shapes", "2x8:i32"]),
                    ("too-few-shapes", ["import", "m.py:fn", "--example-shapes", "2x8"]), ("wrong-shape", ["import", "m.py:M", "--example-shapes", "2x7"]),
                    ("not-python", ["import", "m.efir:M", "--example-shapes", "2x8"]), ("directory", ["import", ".:M"]),
                    ("dev-zero", ["import", "/dev/zero:M"]), ("o-dev-full", ["import", "m.py:M", "--example-shapes", "2x8", "-o", "/dev/full"]),
                    ("o-dir", ["import", "m.py:M", "--example-shapes", "2x8", "-o", "."]),
                    ("syntax-error-file", ["import", "bad.py:M", "--example-shapes", "2x8"])]:
        cli("import", n, argv, files={**files, "m.efir": SIMPLE, "bad.py": "def (:\n"}, expect="error", timeout=90)
    cli("import", "shape-zero", ["import", "m.py:M", "--example-shapes", "0x8"], files=files, timeout=90)
    cli("import", "stdout-closed", ["import", "m.py:M", "--example-shapes", "2x8"], files=files, stdout="closed", timeout=90)
    cli("import", "stdout-dev-full", ["import", "m.py:M", "--example-shapes", "2x8"], files=files, stdout="devfull", expect="error", timeout=90)
    for n, argv in [("missing", ["tune", "nope.efir", "-o", "t.efir"]), ("no-o", ["tune", "c.efir"]), ("budget-nan", ["tune", "c.efir", "-o", "t.efir", "--budget", "nan"]),
                    ("budget-neg", ["tune", "c.efir", "-o", "t.efir", "--budget", "-1"]), ("budget-inf", ["tune", "c.efir", "-o", "t.efir", "--budget", "inf"]),
                    ("top-0", ["tune", "c.efir", "-o", "t.efir", "--top", "0"]), ("top-neg", ["tune", "c.efir", "-o", "t.efir", "--top", "-3"]),
                    ("malformed", ["tune", "bad.efir", "-o", "t.efir"]), ("dev-zero", ["tune", "/dev/zero", "-o", "t.efir"]),
                    ("no-gpu", ["tune", "c.efir", "-o", "t.efir", "--budget", "1"])]:
        cli("tune", n, argv, files={"c.efir": SMALL["rmsnorm_mlp"], "bad.efir": "func @"}, expect="error", timeout=90)
    for n, e in [("budget-env-junk", {"EFIR_TUNE_BUDGET": "abc"}), ("budget-env-nan", {"EFIR_TUNE_BUDGET": "nan"})]:
        cli("environment", n, ["cache", "list"], env=e)
    for n, e in [("cache-dir-file", {"EFIR_CACHE_DIR": "/dev/null"}), ("cache-dir-missing", {"EFIR_CACHE_DIR": "/nonexistent/x"}),
                 ("xdg-junk", {"XDG_CACHE_HOME": "\x01"}), ("no-home", {"HOME": None, "XDG_CACHE_HOME": None, "EFIR_CACHE_DIR": None})]:
        cli("environment", f"cache-list-{n}", ["cache", "list"], env=e)
        cli("environment", f"cache-clear-{n}", ["cache", "clear"], env=e)
    cli("environment", "cache-list-corrupt", ["cache", "list"], files={"cache/x.json": "{not json", "cache/y.json": "\x00\xff"}, env={"EFIR_CACHE_DIR": "cache"})

    # efir.compile through the binaries
    def comp(cat, name, src, expect="any", **kw):
        C.append(Case("python", cat, name, ["-c", PY_COMPILE, str(ROOT)], files={"case.py": textwrap.dedent(src)},
                      env={**env, "EFIR_BIN_DIR": kw.pop("bin_dir", None) or "BIN"}, expect=expect, check=check_python_ok,
                      check_rc=(0, 1), timeout=kw.pop("timeout", 240), **kw))

    lin = """
        class Mod(nn.Module):
            def __init__(self):
                super().__init__()
                self.l = nn.Linear(8, 8, bias=False)
                self.l_weight = nn.Parameter(torch.randn(8, 8))
            def forward(self, x):
                return self.l(x) * self.l_weight.sum() + x
        M = Mod(); X = (torch.randn(2, 8),)
        TOL = 1e-3
        """
    comp("hostile-names", "l.weight-vs-l_weight", lin, expect="ok")
    for pname in ['a"""b', "a\nb", "class", "a\\b", "é", "a$b", "a b", "__import__('os')\n#", "PWNED\"); open('PWNED','w'); (\"", "0abc"]:
        comp("hostile-names", f"param-{pname[:16]!r}", f"""
            class Mod(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_parameter({pname!r}, nn.Parameter(torch.randn(8)))
                    self.register_parameter("plain", nn.Parameter(torch.randn(8)))
                def forward(self, x):
                    return x * getattr(self, {pname!r}) + self.plain
            M = Mod(); X = (torch.randn(2, 8),)
            TOL = 1e-3
            """)
    for bname in ["x.y", "x_y"]:
        comp("hostile-names", f"buffer-{bname}", f"""
            class Mod(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.sub = nn.Module()
                    self.sub.register_buffer("y", torch.randn(8))
                    self.register_buffer({bname.replace('.', '_')!r}, torch.randn(8))
                def forward(self, x):
                    return x + self.sub.y * getattr(self, {bname.replace('.', '_')!r})
            M = Mod(); X = (torch.randn(2, 8),)
            TOL = 1e-3
            """, expect="ok")
    for arg in ["lambda_", "def_", "x", "run", "torch", "tl", "INPUTS"]:
        comp("hostile-names", f"arg-{arg}", f"""
            def fn({arg}, y):
                return {arg} * y + {arg}
            M = efir.compile.__globals__['as_module'](fn) if False else None
            class Mod(nn.Module):
                def forward(self, {arg}, y):
                    return fn({arg}, y)
            M = Mod(); X = (torch.randn(4, 8), torch.randn(4, 8))
            TOL = 1e-3
            """, expect="ok")
    for wd in ['w"""\nopen("PWNED","w")\n"""', "w\\x", "wé\u2028", "-w", "w'; touch PWNED #"]:
        comp("hostile-names", f"workdir-{wd[:10]!r}", f"""
            M = nn.Linear(8, 4); X = (torch.randn(2, 8),)
            KW = dict(workdir={wd!r})
            TOL = 1e-3
            """, expect="ok")
    for n, kw in [("candidates-0", "candidates=0"), ("candidates-neg", "candidates=-5"), ("candidates-nan", "candidates=float('nan')"),
                  ("candidates-huge", "candidates=10**30"), ("candidates-str", "candidates='8'"), ("config-junk", "config={'BLOCK_x': -1}"),
                  ("config-str", "config='fast'"), ("tune-nan", "tune=float('nan')"), ("tune-neg", "tune=-1"), ("tune-str", "tune='abc'"),
                  ("workdir-file", "workdir='/dev/null'"), ("workdir-proc", "workdir='/proc/x'")]:
        comp("numeric-options", n, f"""
            M = nn.Linear(8, 4); X = (torch.randn(2, 8),)
            KW = dict({kw})
            TOL = 1e-3
            """)
    shapes = [("zero-batch", "torch.randn(0, 8)"), ("one", "torch.randn(1, 8)"), ("scalar-ish", "torch.randn(1, 1)"),
              ("odd", "torch.randn(3, 8)"), ("f64", "torch.randn(2, 8, dtype=torch.float64)"), ("int", "torch.ones(2, 8, dtype=torch.int64)"),
              ("bool", "torch.ones(2, 8, dtype=torch.bool)"), ("noncontig", "torch.randn(8, 2).t()"), ("nan", "torch.full((2, 8), float('nan'))"),
              ("requires-grad", "torch.randn(2, 8, requires_grad=True)")]
    for n, x in shapes:
        comp("shapes", f"input-{n}", f"""
            class Mod(nn.Module):
                def forward(self, x):
                    return torch.exp(x) + x.sum(-1, keepdim=True)
            M = Mod(); X = ({x},)
            TOL = 1e-3
            """)
    comp("shapes", "call-other-shape", """
        class Mod(nn.Module):
            def forward(self, x):
                return x.softmax(-1)
        M = Mod(); X = (torch.randn(2, 8),)
        BAD_CALLS = [(torch.randn(3, 8),), (torch.randn(2, 8), torch.randn(2, 8)), (), (torch.randn(2, 8).double(),)]
        TOL = 1e-3
        """)
    comp("shapes", "scalar-output", """
        class Mod(nn.Module):
            def forward(self, x):
                return x.sum()
        M = Mod(); X = (torch.randn(4, 8),)
        TOL = 1e-3
        """)
    comp("shapes", "input-returned", """
        class Mod(nn.Module):
            def forward(self, x, y):
                return x, y * 2
        M = Mod(); X = (torch.randn(4, 8), torch.randn(4, 8))
        TOL = 1e-3
        """)
    comp("shapes", "non-tensor-input", """
        class Mod(nn.Module):
            def forward(self, x, k):
                return x * k
        M = Mod(); X = (torch.randn(4, 8), 3)
        TOL = 1e-3
        """)
    comp("depth", "chain-300", """
        class Mod(nn.Module):
            def forward(self, x):
                for _ in range(300):
                    x = torch.sin(x) + 0.5
                return x
        M = Mod(); X = (torch.randn(2, 8),)
        TOL = 1e-3
        """, timeout=400)
    comp("semantics", "mlp-f32", """
        M = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8)); X = (torch.randn(3, 16),)
        TOL = 1e-3
        """, expect="ok")
    comp("semantics", "layernorm-f16", """
        M = nn.LayerNorm(16).half(); X = (torch.randn(2, 16).half(),)
        TOL = 2e-2
        """, expect="ok")
    comp("semantics", "attention-causal", """
        class Mod(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        M = Mod(); X = tuple(torch.randn(1, 2, 8, 16) for _ in range(3))
        TOL = 1e-3
        """)
    comp("semantics", "integer-valued-floats-2^24", """
        class Mod(nn.Module):
            def forward(self, x):
                return x + 1.0
        M = Mod(); X = (torch.full((2, 8), 16777216.0),)
        TOL = 0.0
        """)
    comp("environment", "bin-dir-missing", """
        M = nn.Linear(8, 4); X = (torch.randn(2, 8),)
        """, bin_dir="/nonexistent")
    # `report`: a results file to a table (and a chart)
    res = str(ROOT / "bench" / "results" / "2026-12-01-s21-h200-b8.json")
    cli("report", "report-ok", ["report", res, "--markdown"], expect="ok")
    cli("report", "report-stdout-closed", ["report", res], stdout="closed")
    cli("report", "report-stdout-dev-full", ["report", res], stdout="devfull", expect="error")
    cli("report", "report-missing", ["report", "nope.json"], expect="error")
    cli("report", "report-junk", ["report", "r.json"], files={"r.json": "{not json"}, expect="error")
    cli("report", "report-dev-zero", ["report", "/dev/zero"], expect="error", timeout=60)
    cli("report", "report-o-not-a-folder", ["report", res, "-o", "/dev/null/x.png"], expect="error")
    return C
