"""Classifying an outcome (`classify`) and the per-case checks of a
successful run: round trips, same meaning under efir-run, numpy and
Triton references, the Python sentinel."""

import signal

from .model import PY
from .proc import first_line, run_tool


def classify(case, res, d, ctx):
    err = res.err.decode("utf-8", "replace")
    if res.timed_out:
        return "hang", f"no exit after {case.timeout:.0f} s"
    if (d / "PWNED").exists():
        return "injection", "the sentinel file was created"
    if res.rc < 0:
        if res.rc == -signal.SIGPIPE and case.stdout == "closed":
            return "success", "SIGPIPE on a closed pipe"
        return "crash", f"signal {-res.rc} ({signal.Signals(-res.rc).name}); {first_line(res.err)}"
    if res.rc == 101 or "panicked" in err:
        return "panic", first_line(res.err[res.err.find(b"panicked"):] if b"panicked" in res.err else res.err)
    if case.tool == "python" and "Traceback (most recent call last)" in err and res.rc != 0:
        last = [l for l in err.strip().splitlines() if l.strip()][-1][:160]
        return "panic", f"uncaught: {last}"
    if case.check is not None and res.rc in case.check_rc:
        got = case.check(case, res, d, ctx)
        if got is not None:
            return got
    if res.rc == 0:
        if case.expect == "error":
            return "wrong", "exit 0 on an input or output that is an error"
        return "success", ""
    if res.rc in (1, 2):
        if not err.strip():
            return "wrong", f"exit {res.rc} without a message"
        if case.expect == "ok":
            return "wrong", f"rejected: {first_line(res.err)}"
        if res.rc == 2 and not ("usage" in err.lower() or "error" in err.lower()):
            return "wrong", f"exit 2 without a usage message: {first_line(res.err)}"
        if res.rc == 1 and "error" not in err.lower():
            return "wrong", f"exit 1 without an error diagnostic: {first_line(res.err)}"
        return "clean", first_line(res.err)
    return "wrong", f"undocumented exit code {res.rc}: {first_line(res.err)}"


def check_roundtrip(case, res, d, ctx):
    """efir-opt's output must parse and print back unchanged (when it went to stdout)."""
    if not res.out.strip():
        return None
    r = run_tool(ctx.bin_dir, [ctx.tool("efir-opt"), "-"], d, 60, stdin=res.out)
    if r.rc != 0:
        return "wrong", f"its output does not parse back: {first_line(r.err)}"
    if r.out != res.out:
        return "wrong", "its output does not print back unchanged"
    return None


def check_same_meaning(case, res, d, ctx, func="f"):
    """The pass's output computes what its input does (efir-run --compare)."""
    bad = check_roundtrip(case, res, d, ctx)
    if bad:
        return bad
    (d / "out.efir").write_bytes(res.out)
    r = run_tool(ctx.bin_dir, [ctx.tool("efir-run"), "--compare", "in.efir", "out.efir", "--func", func, "--trials", "2"], d, 120)
    if r.timed_out:
        return "hang", "efir-run --compare of the pass's input and output timed out"
    if r.rc != 0 and b"NOT equivalent" in r.out:
        return "wrong", f"the pass changed the program's meaning: {first_line(r.out.splitlines()[-1])}"
    if r.rc != 0:
        # The interpreter cannot judge (e.g. it refuses i64 values of 2^53
        # or more): the pass's own outcome stands.
        return "success", f"not compared: {first_line(r.err)}"
    return None


def check_compare_says(expected_rc):
    """--compare's verdict: exit 0 "equivalent", exit 1 "NOT equivalent"."""
    def chk(case, res, d, ctx):
        said = b"NOT equivalent" in res.out
        if res.rc != expected_rc or said != (expected_rc == 1):
            return "wrong", f"exit {res.rc} ({first_line(res.out[-200:])}), expected {expected_rc}"
        return "success", "the verdict is right"
    return chk


NUMPY_CHECK = r'''
import json, sys, numpy as np, math
d = sys.argv[1]
spec = json.load(open(d + "/spec.json"))
ins = {n: np.load(f"{d}/in_{n}.npy") for n in spec["inputs"]}
env = dict(np=np, math=math, **{k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in ins.items()})
ref = eval(spec["expr"], env)
ref = ref if isinstance(ref, tuple) else (ref,)
worst = 0.0
for i, r in enumerate(ref):
    o = np.load(f"{d}/out/out{i}.npy")
    r = np.asarray(r)
    if o.shape != r.shape:
        print(f"out{i}: shape {o.shape} != {r.shape}"); sys.exit(3)
    if r.dtype.kind in "iub":
        if not np.array_equal(o.astype(np.int64), r.astype(np.int64)):
            print(f"out{i}: integers differ: {o.ravel()[:6]} vs {r.ravel()[:6]}"); sys.exit(3)
        continue
    o = o.astype(np.float64); r = r.astype(np.float64)
    if not np.array_equal(np.isnan(o), np.isnan(r)):
        print(f"out{i}: NaN positions differ"); sys.exit(3)
    m = ~np.isnan(r)
    den = np.linalg.norm(r[m]) or 1.0
    worst = max(worst, float(np.linalg.norm((o[m] - r[m])) / den))
print(worst)
sys.exit(3 if worst > spec["tol"] else 0)
'''

TRITON_CHECK = r'''
import ast, importlib.util, os, pathlib, subprocess, sys
os.environ["TRITON_INTERPRET"] = "1"
import numpy as np, torch
d = pathlib.Path(sys.argv[1]); src = sys.argv[2]; run = sys.argv[3]; tol = float(sys.argv[4])
worst = 0.0
for py in sorted((d / "py").glob("*.py")):
    text = py.read_text()
    tree = ast.parse(text)
    tops = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    if len(tops) != len(set(tops)):
        print(f"{py.name}: duplicate definitions"); sys.exit(3)
    spec = importlib.util.spec_from_file_location("gen_" + str(abs(hash(py.name))), py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if (d / "PWNED").exists():
        print("injection on import"); sys.exit(4)
    func = mod.__doc__.split("`@")[1].split("`")[0]
    ref = d / ("ref_" + str(abs(hash(py.name))))
    r = subprocess.run([run, src, "--func", func, "--dump-inputs", "--output-dir", str(ref), "--precision", "f64"], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"efir-run failed on @{func}: {r.stderr.strip()[:200]}"); sys.exit(3)
    inputs = [torch.from_numpy(np.load(ref / f"in_{n}.npy").copy(order="C")).to(dtype=dt) for n, s, dt in mod.INPUTS]
    configs = [None]
    space = getattr(mod, "CONFIG_SPACE", {})
    if space:
        configs.append({k: min(v) for k, v in space.items() if k.startswith("BLOCK_")})
    for cfg in configs:
        outs = mod.run(*inputs, config=cfg)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for i, o in enumerate(outs):
            want = np.load(ref / f"out{i}.npy").astype(np.float64)
            got = o.detach().to("cpu", torch.float64).numpy()
            if got.shape != want.shape:
                print(f"@{func} out{i}: shape {got.shape} != {want.shape}"); sys.exit(3)
            den = np.linalg.norm(want.ravel()) or 1.0
            e = float(np.linalg.norm((got - want).ravel()) / den)
            if not np.isfinite(e):
                e = 0.0 if np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(got)], want[~np.isnan(want)]) else float("inf")
            worst = max(worst, e)
            if e > tol:
                print(f"@{func} out{i} config {cfg}: rel_l2 {e:.3g} > {tol}"); sys.exit(3)
print(worst)
'''


def check_triton(tol):
    def chk(case, res, d, ctx):
        if (d / "PWNED").exists():
            return "injection", "the sentinel file was created by efir-translate"
        src = case.argv[case.argv.index("--to-triton") + 1]
        r = run_tool(ctx.bin_dir, [PY, "-c", TRITON_CHECK, str(d), src, ctx.tool("efir-run"), str(tol)], d, 300)
        if (d / "PWNED").exists() or r.rc == 4:
            return "injection", "importing the generated module ran the payload"
        if r.timed_out:
            return "hang", "running the generated module timed out"
        if r.rc != 0:
            return "wrong", f"generated module: {first_line(r.out) or first_line(r.err.splitlines()[-1] if r.err else b'')}"
        return None
    return chk


def check_numpy(case, res, d, ctx):
    r = run_tool(ctx.bin_dir, [PY, "-c", NUMPY_CHECK, str(d)], d, 60)
    if r.rc != 0:
        return "wrong", f"differs from numpy: {first_line(r.out) or first_line(r.err)}"
    return None


def check_python_ok(case, res, d, ctx):
    text = res.out.decode("utf-8", "replace")
    if "RESULT wrong" in text:
        return "wrong", text.split("RESULT wrong", 1)[1].strip().splitlines()[0][:160]
    if "RESULT clean" in text:
        why = text.split("RESULT clean", 1)[1].strip().splitlines()[0][:160]
        # A case meant to compile that fails, cleanly or not, is a wrong
        # answer (a relative work folder `-w` counted as clean).
        if case.expect == "ok":
            return "wrong", f"rejected: {why}"
        return "clean", why
    if "RESULT setup" in text:
        return "campaign-error", text.split("RESULT setup", 1)[1].strip().splitlines()[0][:160]
    if "RESULT injection" in text:
        return "injection", "the sentinel file was created"
    if "RESULT panic" in text:
        return "panic", text.split("RESULT panic", 1)[1].strip().splitlines()[0][:160]
    return None
