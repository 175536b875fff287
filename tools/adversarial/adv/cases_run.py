"""Cases for `efir-run` (with crafted `.npy` inputs, `npy_bytes`)."""

from .cases_common import cases_common
from .checks import check_compare_says, check_numpy
from .model import Case
from .programs import SIMPLE, TILED, launch_chain, one


def npy_bytes(arr, fortran=False, header_override=None, descr=None, version=1):
    import numpy as np
    import io
    a = np.asarray(arr)
    d = descr or a.dtype.str
    hdr = header_override or "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (d, fortran, tuple(a.shape))
    if version == 1:
        pad = 64 - (10 + len(hdr) + 1) % 64
        hdr = hdr + " " * pad + "\n"
        head = b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode("latin1")
    else:
        pad = 64 - (12 + len(hdr) + 1) % 64
        hdr = hdr + " " * pad + "\n"
        head = bytes([0x93]) + b"NUMPY" + bytes([version, 0]) + len(hdr).to_bytes(4, "little") + hdr.encode("latin1")
    data = (a.T if fortran else a).tobytes(order="C")
    return head + data


def cases_run(rng):
    import json
    import numpy as np
    C = cases_common("efir-run", rng)

    def run(cat, name, flags, text=SIMPLE, expect="any", **kw):
        # --compare cases name both files themselves
        lead = [] if "--compare" in flags else ["in.efir"]
        C.append(Case("efir-run", cat, name, lead + flags, files={"in.efir": text, **kw.pop("more", {})}, expect=expect, **kw))

    for v in ["-1", "18446744073709551616", "nan", "0x10", ""]:
        run("numeric-options", f"seed-{v!r}", ["--seed", v])
    # (--trials 18446744073709551615 runs for ever, as asked: not a case)
    for v in ["0", "-1", "nan", "inf", "1e300", "1.5"]:
        run("numeric-options", f"trials-{v}", ["--compare", "in.efir", "in.efir", "--trials", v], timeout=30,
            expect="error" if v in ("0", "-1", "nan", "inf", "1e300") else "any")
    for v in ["nan", "-1", "inf", "-inf", "0", "1e300", "abc"]:
        run("numeric-options", f"tol-{v}", ["--compare", "in.efir", "in.efir", "--tol", v], expect="error" if v in ("nan", "-1", "-inf", "abc") else "any")
    for v in ["0", "-1", "1e300", "99999999T", "18446744073709551615", "18446744073709551616", "1.5G", "nan", "0x10", "1K"]:
        run("numeric-options", f"max-memory-{v}", ["--max-memory", v], expect="error" if v in ("-1", "nan", "0x10", "0") else "any")
    tiled = TILED["lora_splitk"]
    axes = sorted(set(w.split(">")[0].split(",")[-1].strip().lstrip("@") for w in tiled.split("par.partition<")[1:]))
    for v in ["0", "-1", "1", "99999999999999999999", "1099511627776", "nan", "", "k", "k=1,k=2", "zz=4", "=4"]:
        spec = v if "=" in v or v in ("k", "") else f"{axes[0]}={v}"
        run("numeric-options", f"tile-{spec!r}", ["--tile", spec], text=tiled)
    for flags in (["--func", "nope"], ["--func", ""], ["--dist", "cauchy"], ["--precision", "f8"], ["--compare", "in.efir"],
                  ["--compare", "in.efir", "in.efir", "in.efir"], ["--input", "x"], ["--input", "=x.npy"], ["--input", "x="],
                  ["--input", "nope=x.npy"], ["--output-dir", "/dev/full"], ["--output-dir", "/proc"], ["--output-dir", "in.efir"],
                  ["--dump-inputs"], ["--bogus"], ["in.efir"]):
        run("options", " ".join(flags)[:40], flags)
    run("options", "compare-other-func", ["--compare", "in.efir", "b.efir"], more={"b.efir": SIMPLE.replace("@f", "@g")}, expect="error")
    run("options", "compare-other-sig", ["--compare", "in.efir", "b.efir"],
        more={"b.efir": SIMPLE.replace("4x2", "2x4")}, expect="error")
    # --compare must tell programs apart
    diff = SIMPLE.replace("ew.neg", "ew.abs")
    run("semantics", "compare-different", ["--compare", "in.efir", "b.efir"], more={"b.efir": diff}, check=check_compare_says(1), check_rc=(0, 1))
    run("semantics", "compare-same", ["--compare", "in.efir", "in.efir"], check=check_compare_says(0), check_rc=(0, 1))
    near = one("  %e = tensor.full<1e-3> : tensor<f32>\n  %y = ew.add %x, %e : tensor<4x2xf32>\n  return %y : tensor<4x2xf32>\n", [("x", "tensor<4x2xf32>")], "tensor<4x2xf32>")
    run("semantics", "compare-off-by-1e-3-f32", ["--compare", "in.efir", "b.efir"], text=SIMPLE.replace("ew.neg", "ew.abs").replace("%y = ew.abs %x", "%y = ew.abs %x"),
        more={"b.efir": near}, check=check_compare_says(1), check_rc=(0, 1))
    nanp = one("  %n = tensor.full<nan> : tensor<f32>\n  %y = ew.add %x, %n : tensor<4x2xf32>\n  return %y : tensor<4x2xf32>\n", [("x", "tensor<4x2xf32>")], "tensor<4x2xf32>")
    run("semantics", "compare-nan-vs-nan", ["--compare", "in.efir", "in.efir"], text=nanp, check=check_compare_says(1), check_rc=(0, 1))
    # results against numpy on given inputs
    f32 = np.float32
    R = np.random.default_rng(7)

    def npcase(name, prog, inputs, expr, flags=(), tol=1e-6, fortran=(), descr=None):
        files = {"in.efir": prog}
        argv = ["in.efir", "--output-dir", "out", "--precision", "f64"] + list(flags)
        for k, a in inputs.items():
            files[f"in_{k}.npy"] = npy_bytes(a, fortran=k in fortran, descr=descr)
            argv += ["--input", f"{k}=in_{k}.npy"]
        files["spec.json"] = json.dumps({"inputs": list(inputs), "expr": expr, "tol": tol})
        if fortran or descr:
            # the reference reads the same files back with numpy
            pass
        C.append(Case("efir-run", "semantics", name, argv, files=files, check=check_numpy, expect="ok" if not (descr or "i64" in name) else "any"))

    x = R.standard_normal((4, 8)).astype(f32)
    w = R.standard_normal((8, 5)).astype(f32)
    v8 = R.standard_normal(8).astype(f32)
    T = lambda s: f"tensor<{s}xf32>"
    npcase("add-broadcast", one(f"  %y = ew.add %x, %v : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8")), ("v", T("8"))], T("4x8")), {"x": x, "v": v8}, "x + v")
    npcase("matmul", one(f"  %y = tensor.matmul %x, %w : {T('4x5')}\n  return %y : {T('4x5')}\n", [("x", T("4x8")), ("w", T("8x5"))], T("4x5")), {"x": x, "w": w}, "x @ w")
    b3 = R.standard_normal((2, 4, 8)).astype(f32)
    npcase("batched-matmul", one(f"  %y = tensor.matmul %b, %w : {T('2x4x5')}\n  return %y : {T('2x4x5')}\n", [("b", T("2x4x8")), ("w", T("8x5"))], T("2x4x5")), {"b": b3, "w": w}, "b @ w")
    npcase("reduce-sum-0", one(f"  %y = tensor.reduce<#red.sum, 0> %x : {T('8')}\n  return %y : {T('8')}\n", [("x", T("4x8"))], T("8")), {"x": x}, "x.sum(0)")
    npcase("reduce-max-1", one(f"  %y = tensor.reduce<#red.max, 1> %x : {T('4')}\n  return %y : {T('4')}\n", [("x", T("4x8"))], T("4")), {"x": x}, "x.max(1)")
    npcase("transpose", one(f"  %y = tensor.transpose<[1, 0]> %x : {T('8x4')}\n  return %y : {T('8x4')}\n", [("x", T("4x8"))], T("8x4")), {"x": x}, "x.T")
    npcase("slice-step", one(f"  %y = tensor.slice<[1, 0], [4, 8], [2, 3]> %x : {T('2x3')}\n  return %y : {T('2x3')}\n", [("x", T("4x8"))], T("2x3")), {"x": x}, "x[1:4:2, 0:8:3]")
    npcase("concat", one(f"  %y = tensor.concat<1> %x, %x : {T('4x16')}\n  return %y : {T('4x16')}\n", [("x", T("4x8"))], T("4x16")), {"x": x}, "np.concatenate([x, x], 1)")
    npcase("reshape", one(f"  %y = tensor.reshape %x : {T('2x16')}\n  return %y : {T('2x16')}\n", [("x", T("4x8"))], T("2x16")), {"x": x}, "x.reshape(2, 16)")
    npcase("softmax", one(f"  %m = tensor.reduce<#red.max, 1> %x : {T('4')}\n  %m1 = tensor.reshape %m : {T('4x1')}\n  %d = ew.sub %x, %m1 : {T('4x8')}\n  %e = ew.exp %d : {T('4x8')}\n"
                          f"  %s = tensor.reduce<#red.sum, 1> %e : {T('4')}\n  %s1 = tensor.reshape %s : {T('4x1')}\n  %y = ew.div %e, %s1 : {T('4x8')}\n  return %y : {T('4x8')}\n",
                          [("x", T("4x8"))], T("4x8")), {"x": x}, "np.exp(x - x.max(1, keepdims=True)) / np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)")
    npcase("select-cmp", one(f"  %c = ew.cmp<gt> %x, %v : tensor<4x8xi1>\n  %y = ew.select %c, %x, %v : {T('4x8')}\n  return %y : {T('4x8')}\n",
                             [("x", T("4x8")), ("v", T("8"))], T("4x8")), {"x": x, "v": v8}, "np.where(x > v, x, v)")
    npcase("unary-fns", one(f"  %a = ew.tanh %x : {T('4x8')}\n  %b = ew.sigmoid %a : {T('4x8')}\n  %c = ew.erf %b : {T('4x8')}\n  %d = ew.abs %x : {T('4x8')}\n  %e = ew.sqrt %d : {T('4x8')}\n  %f = ew.add %c, %e : {T('4x8')}\n  return %f : {T('4x8')}\n",
                            [("x", T("4x8"))], T("4x8")), {"x": x}, "np.vectorize(math.erf)(1/(1+np.exp(-np.tanh(x)))) + np.sqrt(np.abs(x))")
    npcase("log-negative", one(f"  %y = ew.log %x : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8"))], T("4x8")), {"x": x}, "np.log(x)")
    npcase("pow", one(f"  %y = ew.pow %x, %v : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8")), ("v", T("8"))], T("4x8")), {"x": np.abs(x) + 0.5, "v": v8}, "x ** v")
    npcase("iota-full", one(f"  %i = tensor.iota<1> : {T('4x8')}\n  %c = tensor.full<2.5> : tensor<f32>\n  %y = ew.mul %i, %c : {T('4x8')}\n  %z = ew.add %y, %x : {T('4x8')}\n  return %z : {T('4x8')}\n",
                            [("x", T("4x8"))], T("4x8")), {"x": x}, "np.broadcast_to(np.arange(8.0), (4, 8)) * 2.5 + x")
    npcase("fortran-order", one(f"  %y = ew.neg %x : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8"))], T("4x8")), {"x": x}, "-x", fortran=("x",))
    npcase("big-endian", one(f"  %y = ew.neg %x : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8"))], T("4x8")), {"x": x.astype(">f4")}, "-x", descr=">f4")
    # rounding to dtypes (native precision) against numpy's f16
    xh = (R.standard_normal((4, 8)) * 3).astype(np.float16)
    C.append(Case("efir-run", "semantics", "f16-add-rounding",
                  ["in.efir", "--output-dir", "out", "--input", "x=in_x.npy", "--input", "y=in_y.npy"],
                  files={"in.efir": one("  %z = ew.add %x, %y : tensor<4x8xf16>\n  return %z : tensor<4x8xf16>\n", [("x", "tensor<4x8xf16>"), ("y", "tensor<4x8xf16>")], "tensor<4x8xf16>"),
                         "in_x.npy": npy_bytes(xh), "in_y.npy": npy_bytes(xh * np.float16(0.3)),
                         "spec.json": json.dumps({"inputs": ["x", "y"], "expr": "(x.astype(np.float16) + y.astype(np.float16)).astype(np.float64)", "tol": 0.0})},
                  check=check_numpy, expect="ok"))
    i64 = np.array([2 ** 53 + 1, -(2 ** 62) - 1, 2 ** 63 - 1, 3], dtype=np.int64)
    npcase("i64-above-2^53", one("  %z = ew.add %x, %y : tensor<4xi64>\n  return %z : tensor<4xi64>\n", [("x", "tensor<4xi64>"), ("y", "tensor<4xi64>")], "tensor<4xi64>"),
           {"x": i64, "y": np.zeros(4, np.int64)}, "x + y")
    i32 = np.array([2 ** 31 - 1, 5, -7, 100], dtype=np.int32)
    npcase("i32-overflow", one("  %z = ew.add %x, %y : tensor<4xi32>\n  return %z : tensor<4xi32>\n", [("x", "tensor<4xi32>"), ("y", "tensor<4xi32>")], "tensor<4xi32>"),
           {"x": i32, "y": np.ones(4, np.int32)}, "(x + y).astype(np.int32)")
    npcase("cast-f32-i32", one("  %z = ew.cast %x : tensor<4x8xi32>\n  return %z : tensor<4x8xi32>\n", [("x", T("4x8"))], "tensor<4x8xi32>"), {"x": x * 10}, "np.trunc(x).astype(np.int32)")
    # tiled programs at odd tiles against the untiled result
    splitk = ("func @f(%a: tensor<5x7xf32>, %b: tensor<7x3xf32>) -> tensor<5x3xf32> {\n"
              "  %ak = par.partition<1, @k> %a : tensor<5x7xf32, @k: part(1)>\n"
              "  %bk = par.partition<0, @k> %b : tensor<7x3xf32, @k: part(0)>\n"
              "  %p = tile.matmul %ak, %bk : tensor<5x3xf32, @k: partial(#red.sum)>\n"
              "  %y = par.reduce<#red.sum, @k> %p : tensor<5x3xf32>\n"
              "  return %y : tensor<5x3xf32>\n}\n")
    a57, b73 = R.standard_normal((5, 7)).astype(f32), R.standard_normal((7, 3)).astype(f32)
    for tile in ["1", "2", "3", "6", "7", "8", "1000"]:
        npcase(f"splitk-tile-{tile}", splitk, {"a": a57, "b": b73}, "a @ b", flags=["--tile", f"k={tile}"])
    rows = ("func @f(%x: tensor<7x4xf32>) -> tensor<7xf32> {\n"
            "  %p = par.partition<0, @m> %x : tensor<7x4xf32, @m: part(0)>\n"
            "  %s = tensor.reduce<#red.max, 1> %p : tensor<7xf32, @m: part(0)>\n"
            "  %c = par.combine<0, @m> %s : tensor<7xf32>\n"
            "  return %c : tensor<7xf32>\n}\n")
    x74 = R.standard_normal((7, 4)).astype(f32)
    for tile in ["1", "3", "7", "9"]:
        npcase(f"rows-tile-{tile}", rows, {"x": x74}, "x.max(1)", flags=["--tile", f"m={tile}"])
    # malformed .npy inputs
    good = one(f"  %y = ew.neg %x : {T('4x8')}\n  return %y : {T('4x8')}\n", [("x", T("4x8"))], T("4x8"))
    npys = {
        "wrong-shape": npy_bytes(np.zeros((8, 4), f32)),
        "wrong-dtype": npy_bytes(np.zeros((4, 8), np.float64)),
        "truncated-data": npy_bytes(x)[:-5],
        "extra-data": npy_bytes(x) + b"junk",
        "not-npy": b"hello",
        "empty": b"",
        "huge-shape": npy_bytes(x, header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999, 99999999999), }"),
        "neg-shape": npy_bytes(x, header_override="{'descr': '<f4', 'fortran_order': False, 'shape': (-4, -8), }"),
        "object-dtype": npy_bytes(x, header_override="{'descr': '|O', 'fortran_order': False, 'shape': (4, 8), }"),
        "header-len-huge": b"\x93NUMPY\x02\x00\xff\xff\xff\x7f{",
        "header-junk": npy_bytes(x, header_override="__import__('os').system('touch PWNED')"),
        "v2-header": npy_bytes(x, version=2),
        "v3-header": npy_bytes(x, version=3),
        "structured": npy_bytes(x, header_override="{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4, 8), }"),
        "f2-for-f32": npy_bytes(x.astype(np.float16)),
        "nan-inf": npy_bytes(np.array([[np.nan, np.inf, -np.inf, 0] * 2] * 4, f32)),
        "fortran-1d-mismatch": npy_bytes(x, fortran=True),
    }
    for n, b in npys.items():
        run("npy-inputs", n, ["--input", "x=x.npy"], text=good, more={"x.npy": b},
            expect="any" if n in ("v2-header", "v3-header", "nan-inf", "fortran-1d-mismatch") else "error")
    run("npy-inputs", "dev-zero", ["--input", "x=/dev/zero"], text=good, expect="error")
    run("npy-inputs", "directory", ["--input", "x=."], text=good, expect="error")
    run("npy-inputs", "twice", ["--input", "x=x.npy", "--input", "x=x.npy"], text=good, more={"x.npy": npy_bytes(x)}, expect="error")
    # memory
    run("memory", "huge-intermediate", [], text=one("  %b = tensor.broadcast %x : tensor<100000x100000x4xf32>\n  %s = tensor.reduce<#red.sum, 0> %b : tensor<100000x4xf32>\n  %t = tensor.reduce<#red.sum, 0> %s : tensor<4xf32>\n  return %t : tensor<4xf32>\n",
                                                     [("x", "tensor<4xf32>")], "tensor<4xf32>"), expect="error")
    run("memory", "iota-huge", [], text=one("  %b = tensor.iota<0> : tensor<1099511627776xf32>\n  %t = tensor.reduce<#red.max, 0> %b : tensor<f32>\n  return %t : tensor<f32>\n", [], "tensor<f32>"), expect="error")
    run("memory", "collect-many-tiles", ["--tile", "p=1"], text="func @f(%x: tensor<100000000xf32>) -> tensor<|@p|x1xf32> {\n %a = par.partition<0, @p> %x : tensor<100000000xf32, @p: part(0)>\n %b = par.collect<@p> %a : tensor<|@p|x1xf32>\n return %b : tensor<|@p|x1xf32>\n}\n", timeout=60)
    run("memory", "partition-1-tile-per-elem", ["--tile", "p=1", "--max-memory", "200M"], text="func @f(%x: tensor<1000000xf32>) -> tensor<1000000xf32> {\n %a = par.partition<0, @p> %x : tensor<1000000xf32, @p: part(0)>\n %e = ew.exp %a : tensor<1000000xf32, @p: part(0)>\n %b = par.combine<0, @p> %e : tensor<1000000xf32>\n return %b : tensor<1000000xf32>\n}\n", timeout=60)
    run("depth", "launch-chain-100", [], text=launch_chain(100))
    return C
