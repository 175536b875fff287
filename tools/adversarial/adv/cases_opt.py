"""Cases for `efir-opt`."""

from .cases_common import cases_common
from .checks import check_same_meaning
from .model import Case
from .programs import SIMPLE, SMALL, TILED, collision_program, many_funcs, unary_chain


def cases_opt(rng):
    C = cases_common("efir-opt", rng)
    prog = SMALL["rmsnorm_mlp"].replace("@rmsnorm_mlp", "@f")
    long_chain = unary_chain(20000, op="ew.exp")

    def opt(cat, name, flags, text=prog, expect="any", **kw):
        C.append(Case("efir-opt", cat, name, ["in.efir"] + flags, files={"in.efir": text}, expect=expect, **kw))

    bad_nums = ["nan", "NaN", "inf", "-inf", "-1", "0", "-0", "1e300", "1e-300", "18446744073709551616", "0x10", "", " ", "1_000", "١"]
    for v in bad_nums:
        opt("numeric-options", f"sat-time-{v!r}", [f"--saturate=time-limit={v}", "--extract"], timeout=60)
        opt("numeric-options", f"compact-time-{v!r}", ["--saturate=time-limit=2", f"--compact=time-limit={v}"], timeout=60)
    for v in ["0", "-1", "1", "100000", "18446744073709551615", "nan", "1.5"]:
        opt("numeric-options", f"threads-{v}", ["--saturate=time-limit=2", f"--compact=threads={v},time-limit=2"], timeout=60)
    for v in ["0", "-1", "18446744073709551615", "18446744073709551616", "1e9"]:
        opt("numeric-options", f"max-candidates-{v}", ["--saturate=time-limit=2", f"--compact=max-candidates={v},time-limit=2"], timeout=60)
        opt("numeric-options", f"max-states-{v}", ["--saturate=time-limit=2", f"--compact=max-states={v},time-limit=2"], timeout=60)
        opt("numeric-options", f"iter-limit-{v}", [f"--saturate=iter-limit={v},time-limit=2", "--extract"], timeout=60)
        opt("numeric-options", f"node-limit-{v}", [f"--saturate=node-limit={v},time-limit=2", "--extract"], timeout=60)
        opt("numeric-options", f"launch-bytes-{v}", ["--saturate=time-limit=2", f"--extract=launch-bytes={v}"], timeout=60)
    for v in ["nan", "-1", "inf", "1e300"]:
        opt("numeric-options", f"sketch-{v}", ["--saturate=time-limit=2", f"--compact=sketch={v},time-limit=2"], timeout=60)
    for flags in (["--saturate=families="], ["--saturate=families=nope"], ["--saturate=bogus=1"], ["--saturate=time-limit=1,time-limit=2"],
                  ["--extract=mode=target"], ["--extract=mode=target,file=/dev/zero"], ["--extract=mode=target,file=nofile"],
                  ["--extract=mode=target,file=."], ["--compact"], ["--extract"], ["--compact=mode=bogus"], ["--canonicalize=fold=maybe"],
                  ["--lower-to-kernels"], ["--nosuchpass"], ["--stats=yaml"], ["--color=sometimes"], ["-o"], ["--canonicalize=,,,,"],
                  ["--canonicalize==="], ["--saturate=time-limit=2", "--compact=replicas=bogus,time-limit=2"],
                  ["--saturate=time-limit=2", "--compact=partitions=compute,replicas=compute,time-limit=2"],
                  ["--saturate=time-limit=2", "--compact=mode=after,time-limit=2"], ["--saturate=time-limit=2", "--compact=mode=none,time-limit=2"],
                  ["--saturate=time-limit=2", "--saturate=time-limit=2"], ["--lower-to-kernels", "--lower-to-kernels"],
                  ["--saturate=time-limit=2", "--extract", "--lower-to-kernels", "--saturate=time-limit=2"]):
        opt("options", " ".join(flags)[:50], flags, timeout=60)
    C.append(Case("efir-opt", "options", "no-args-stdin-empty", []))
    C.append(Case("efir-opt", "options", "two-inputs", ["a.efir", "b.efir"], files={"a.efir": SIMPLE, "b.efir": SIMPLE}, expect="error"))
    # passes must keep the program's meaning and print parseable text
    for n, t in list(SMALL.items()) + [("collisions", collision_program().replace("@coll", "@f"))]:
        t = t.replace(f"@{n}(", "@f(")
        C.append(Case("efir-opt", "semantics", f"canonicalize-{n}", ["in.efir", "--canonicalize"], files={"in.efir": t}, expect="ok",
                      check=check_same_meaning, timeout=60))
        C.append(Case("efir-opt", "semantics", f"extract-{n}", ["in.efir", "--saturate=time-limit=3", "--extract"], files={"in.efir": t},
                      expect="ok", check=check_same_meaning, timeout=90))
        C.append(Case("efir-opt", "semantics", f"kernels-{n}", ["in.efir", "--saturate=time-limit=3", "--extract", "--lower-to-kernels"],
                      files={"in.efir": t}, check=check_same_meaning, timeout=90))
    for n, t in TILED.items():
        fname = t.split("func @", 1)[1].split("(", 1)[0]
        C.append(Case("efir-opt", "semantics", f"canonicalize-tiled-{n}", ["in.efir", "--canonicalize"], files={"in.efir": t},
                      expect="ok", check=lambda c, r, d, x, f=fname: check_same_meaning(c, r, d, x, func=f), timeout=60))
    specials = {
        "u64-max-int": "func @f() -> tensor<4xi64> {\n %y = tensor.full<9223372036854775807> : tensor<4xi64>\n return %y : tensor<4xi64>\n}\n",
        "i64-min-int": "func @f() -> tensor<4xi64> {\n %y = tensor.full<-9223372036854775808> : tensor<4xi64>\n return %y : tensor<4xi64>\n}\n",
        "neg-zero": "func @f() -> tensor<4xf32> {\n %y = tensor.full<-0.0> : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
        "tiny-float": "func @f() -> tensor<4xf64> {\n %y = tensor.full<5e-324> : tensor<4xf64>\n return %y : tensor<4xf64>\n}\n",
        "fold-overflow": "func @f() -> tensor<4xi32> {\n %a = tensor.full<2147483647> : tensor<4xi32>\n %b = tensor.full<1> : tensor<4xi32>\n %y = ew.add %a, %b : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
        "fold-f16-overflow": "func @f() -> tensor<4xf16> {\n %a = tensor.full<60000.0> : tensor<4xf16>\n %y = ew.add %a, %a : tensor<4xf16>\n return %y : tensor<4xf16>\n}\n",
        "fold-nan-cmp": "func @f() -> tensor<4xi1> {\n %a = tensor.full<nan> : tensor<4xf32>\n %y = ew.cmp<ne> %a, %a : tensor<4xi1>\n return %y : tensor<4xi1>\n}\n",
        "fold-cast": "func @f() -> tensor<4xi32> {\n %a = tensor.full<-2.7> : tensor<4xf32>\n %y = ew.cast %a : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
        "fold-cast-huge": "func @f() -> tensor<4xi32> {\n %a = tensor.full<1e20> : tensor<4xf32>\n %y = ew.cast %a : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
        "fold-div-zero": "func @f() -> tensor<4xf32> {\n %a = tensor.full<1.0> : tensor<4xf32>\n %b = tensor.full<0.0> : tensor<4xf32>\n %y = ew.div %a, %b : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
        "fold-f16-round": "func @f() -> tensor<4xf16> {\n %a = tensor.full<0.1> : tensor<4xf16>\n %b = tensor.full<0.2> : tensor<4xf16>\n %y = ew.add %a, %b : tensor<4xf16>\n return %y : tensor<4xf16>\n}\n",
        "i64-2^53+1": "func @f() -> tensor<4xi64> {\n %y = tensor.full<9007199254740993> : tensor<4xi64>\n return %y : tensor<4xi64>\n}\n",
    }
    for n, t in specials.items():
        C.append(Case("efir-opt", "semantics", f"canonicalize-{n}", ["in.efir", "--canonicalize"], files={"in.efir": t}, expect="ok",
                      check=check_same_meaning, timeout=60))
    # time limits honoured on long inputs
    opt("limits", "saturate-20000-chain-1s", ["--saturate=time-limit=1"], text=long_chain, timeout=20)
    opt("limits", "compact-20000-chain-1s", ["--saturate=time-limit=1", "--compact=time-limit=1"], text=long_chain, timeout=30)
    opt("limits", "compact-2000-funcs-0.01s", ["--saturate=time-limit=0.01", "--compact=time-limit=0.01"], text=many_funcs(2000), timeout=60)
    # --verify-diagnostics and --split-input-file on odd inputs
    for n, t in [("wrap", "// expected-error @+9223372036854775807 {{E0100}}\n" + SIMPLE),
                 ("neg-wrap", "// expected-error @-9223372036854775807 {{x}}\n" + SIMPLE),
                 ("huge-at", "// expected-error @+99999999999999999999999 {{x}}\n" + SIMPLE),
                 ("at-junk", "// expected-error @x {{x}}\n" + SIMPLE), ("empty-text", "// expected-error {{}}\n" + SIMPLE),
                 ("nested-braces", "// expected-error {{{{{{}}}}}}\n" + SIMPLE),
                 ("many", "// expected-error {{E}}\n" * 5000 + SIMPLE)]:
        opt("verify-diagnostics", n, ["--verify-diagnostics", "--split-input-file"], text=t, expect="error")
    return C
