"""Cases for `efir-translate`."""

from .cases_common import cases_common
from .checks import check_triton
from .model import Case
from .programs import HOSTILE_VALUE_NAMES, SIMPLE, SMALL, TILED, collision_program, hostile_func_program, hostile_values_program, many_funcs, one, unary_chain


def cases_translate(rng):
    C = cases_common("efir-translate", rng)

    def tr(cat, name, flags, text, expect="any", **kw):
        C.append(Case("efir-translate", cat, name, ["--to-triton", "in.efir"] + flags, files={"in.efir": text}, expect=expect, **kw))

    for v in ["0", "-1", "18446744073709551616", "nan", "1"]:
        tr("numeric-options", f"top-{v}", ["--top", v, "--output-dir", "py"], SMALL["rmsnorm_mlp"])
    for flags in (["--func", "nope"], ["--func", "@"], ["--func", ""], ["--func", 'a"b\n'], ["--output-dir", "/dev/full"],
                  ["--output-dir", "/proc"], ["--output-dir", "in.efir"], ["--skip-unsupported"], ["--print-plan"], ["--bogus"],
                  ["--to-triton"], ["--color", "rainbow"]):
        tr("options", " ".join(flags)[:40], flags, SMALL["rmsnorm_mlp"])
    C.append(Case("efir-translate", "options", "no-to-triton", ["in.efir"], files={"in.efir": SIMPLE}))
    C.append(Case("efir-translate", "options", "many-programs-o", ["--to-triton", "in.efir", "-o", "x.py"], files={"in.efir": many_funcs(3)}, expect="error"))
    # translated modules vs the interpreter (TRITON_INTERPRET=1)
    progs = dict(SMALL)
    progs.update({f"tiled-{k}": v for k, v in TILED.items()})
    progs["collisions"] = collision_program()
    for n, names in HOSTILE_VALUE_NAMES:
        if n != "long":
            progs[f"hostile-{n}"] = hostile_values_program(names)
    for fn in ["run", "def", "torch", "a.b", "kernel_0", "INPUTS"]:
        progs[f"func-{fn}"] = hostile_func_program(fn)
    progs["two-funcs-dot-underscore"] = hostile_func_program("a.b") + hostile_func_program("a_b") + hostile_func_program("a$b")
    progs["one-by-one"] = one("  %y = ew.exp %x : tensor<1x1xf32>\n  return %y : tensor<1x1xf32>\n", [("x", "tensor<1x1xf32>")], "tensor<1x1xf32>")
    progs["rank0"] = one("  %y = ew.exp %x : tensor<f32>\n  return %y : tensor<f32>\n", [("x", "tensor<f32>")], "tensor<f32>")
    progs["odd-extents"] = one("  %y = tensor.matmul %a, %b : tensor<3x5xf32>\n  %z = tensor.reduce<#red.max, 1> %y : tensor<3xf32>\n  return %z : tensor<3xf32>\n",
                               [("a", "tensor<3x7xf32>"), ("b", "tensor<7x5xf32>")], "tensor<3xf32>")
    progs["input-is-output"] = one("  return %x : tensor<4xf32>\n", [("x", "tensor<4xf32>")], "tensor<4xf32>")
    progs["two-outputs-same"] = one("  %y = ew.exp %x : tensor<4xf32>\n  %t = tensor.tuple %y, %y : tuple<tensor<4xf32>, tensor<4xf32>>\n  return %t : tuple<tensor<4xf32>, tensor<4xf32>>\n",
                                    [("x", "tensor<4xf32>")], "tuple<tensor<4xf32>, tensor<4xf32>>")
    progs["negative-inf-const"] = one("  %n = tensor.full<-inf> : tensor<f32>\n  %y = ew.max %x, %n : tensor<4xf32>\n  return %y : tensor<4xf32>\n", [("x", "tensor<4xf32>")], "tensor<4xf32>")
    progs["nan-const"] = one("  %n = tensor.full<nan> : tensor<f32>\n  %y = ew.add %x, %n : tensor<4xf32>\n  return %y : tensor<4xf32>\n", [("x", "tensor<4xf32>")], "tensor<4xf32>")
    progs["int-ops"] = one("  %y = ew.add %x, %x : tensor<4xi32>\n  %z = ew.mul %y, %x : tensor<4xi32>\n  return %z : tensor<4xi32>\n", [("x", "tensor<4xi32>")], "tensor<4xi32>")
    for n, t in progs.items():
        f16 = "f16" in t
        C.append(Case("efir-translate", "semantics", n, ["--to-triton", "in.efir", "--output-dir", "py", "--skip-unsupported"],
                      files={"in.efir": t}, check=check_triton(2e-2 if f16 else 1e-4), timeout=60))
    tr("depth", "chain-20000", [], unary_chain(20000), timeout=120)
    return C
