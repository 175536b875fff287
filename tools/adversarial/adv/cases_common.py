"""Cases every command-line tool gets (`cases_common`)."""

from .model import Case
from .programs import HOSTILE_FUNC_NAMES, HOSTILE_VALUE_NAMES, MALFORMED, SHAPES, SIMPLE, SMALL, TILED, TYPE_ERRORS, collision_program, deep_generic_attr, deep_prod, deep_tuple, hostile_func_program, hostile_values_program, launch_chain, many_axes, many_funcs, mutate, mutual_launch, self_repair, unary_chain, wide_program


def cases_common(tool, rng):
    """Categories every CLI tool gets: malformed, type errors, shapes,
    hostile names, depth, cycles, odd files, outputs, environment."""
    C = []
    if tool == "efir-opt":
        base = []
    elif tool == "efir-translate":
        base = ["--to-triton"]
    else:
        base = []

    def add(cat, name, text, extra=(), expect="any", **kw):
        files = {"in.efir": text}
        argv = (base + ["in.efir"] + list(extra)) if tool != "efir-translate" else (["--to-triton", "in.efir"] + list(extra))
        C.append(Case(tool, cat, name, argv, files=files, expect=expect, **kw))

    for n, t in MALFORMED.items():
        # An empty module, comments (expectations are comments without
        # --verify-diagnostics), `tuple<>` and `1e999999` (inf) are valid.
        ok_ish = n in ("bom", "crlf", "cr-only", "form-feed", "rtl-override", "nan-literal", "empty", "only-comment",
                       "sep-only", "expected-error-wrap", "expected-error-neg", "expected-error-noclose", "tuple-empty",
                       "float-junk", "symbolic-unbound")
        add("malformed", n, t, expect="any" if ok_ish else "error")
    for n, t in TYPE_ERRORS.items():
        add("type-error", n, t, expect="any" if n == "slice-step-huge" else "error")
    seed = SMALL["rmsnorm_mlp"]
    for i in range(40):
        add("mutated", f"mutant-{i}", mutate(seed if i % 2 else TILED["attn_decode"], rng, 1 + i % 5))
    for n, t in SHAPES.items():
        prog = f"func @f(%x: {t}) -> {t} {{\n  %y = ew.neg %x : {t}\n  return %y : {t}\n}}\n"
        add("shapes", n, prog)
        prog2 = f"func @f() -> {t} {{\n  %y = tensor.full<1.0> : {t}\n  return %y : {t}\n}}\n"
        add("shapes", n + "-full", prog2)
    add("shapes", "matmul-huge", "func @f(%a: tensor<1099511627776x2xf32>, %b: tensor<2x1099511627776xf32>) -> tensor<1099511627776x1099511627776xf32> {\n %y = tensor.matmul %a, %b : tensor<1099511627776x1099511627776xf32>\n return %y : tensor<1099511627776x1099511627776xf32>\n}\n")
    add("shapes", "reshape-overflow", "func @f(%a: tensor<1099511627776x1099511627776xf32>) -> tensor<1xf32> {\n %y = tensor.reshape %a : tensor<1xf32>\n return %y : tensor<1xf32>\n}\n", expect="error")
    add("shapes", "concat-overflow", "func @f(%a: tensor<1099511627776xf32>) -> tensor<2199023255552xf32> {\n %y = tensor.concat<0> %a, %a : tensor<2199023255552xf32>\n return %y : tensor<2199023255552xf32>\n}\n")
    add("shapes", "collect-symbolic", "func @f(%x: tensor<8xf32>) -> tensor<|@p|x2xf32> {\n %a = par.partition<0, @p> %x : tensor<8xf32, @p: part(0)>\n %b = par.collect<@p> %a : tensor<|@p|x2xf32>\n return %b : tensor<|@p|x2xf32>\n}\n")
    add("shapes", "partition-zero", "func @f(%x: tensor<0x4xf32>) -> tensor<0x4xf32> {\n %a = par.partition<0, @p> %x : tensor<0x4xf32, @p: part(0)>\n %b = par.combine<0, @p> %a : tensor<0x4xf32>\n return %b : tensor<0x4xf32>\n}\n")
    for n, names in HOSTILE_VALUE_NAMES:
        add("hostile-names", "values-" + n, hostile_values_program(names))
    for fn in HOSTILE_FUNC_NAMES:
        add("hostile-names", "func-" + fn[:20], hostile_func_program(fn))
    add("hostile-names", "collisions", collision_program())
    add("depth", "chain-5000", unary_chain(5000), timeout=60)
    add("depth", "chain-50000", unary_chain(50000), timeout=120)
    add("depth", "prod-nesting-5000", deep_prod(5000))
    add("depth", "prod-nesting-100000", deep_prod(100000))
    add("depth", "tuple-nesting-100000", deep_tuple(100000))
    add("depth", "generic-attr-nesting-100000", deep_generic_attr(100000))
    add("depth", "funcs-3000", many_funcs(3000), timeout=60)
    add("depth", "launch-chain-500", launch_chain(500))
    add("depth", "params-3000", wide_program(3000), timeout=60)
    add("depth", "axes-1000", many_axes(1000), timeout=60)
    add("depth", "long-line", "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {" + " " * 5_000_000 + "return %x : tensor<4xf32> }\n")
    add("depth", "many-separators", "// -----\n" * 20000 + SIMPLE)
    add("cycles", "self-launch", "func @k(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = kernel.launch<@k> %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n", expect="error")
    add("cycles", "mutual-launch", mutual_launch(), expect="error")
    add("cycles", "self-repair", self_repair(), expect="error")
    # odd files
    def addf(name, path, expect="error", **kw):
        argv = (["--to-triton", path] if tool == "efir-translate" else [path])
        C.append(Case(tool, "odd-files", name, argv, expect=expect, **kw))
    addf("dev-zero", "/dev/zero")
    addf("dev-urandom", "/dev/urandom")
    addf("dev-null", "/dev/null", expect="any")
    addf("directory", ".")
    addf("missing", "no-such-file.efir")
    addf("proc-self-mem", "/proc/self/mem")
    C.append(Case(tool, "odd-files", "binary", (["--to-triton"] if tool == "efir-translate" else []) + ["in.efir"],
                  files={"in.efir": bytes(rng.randrange(256) for _ in range(4096))}, expect="error"))
    C.append(Case(tool, "odd-files", "non-utf8", (["--to-triton"] if tool == "efir-translate" else []) + ["in.efir"],
                  files={"in.efir": SIMPLE.encode()[:20] + b"\xff\xfe\xc0" + SIMPLE.encode()[20:]}, expect="error"))
    C.append(Case(tool, "odd-files", "utf16", (["--to-triton"] if tool == "efir-translate" else []) + ["in.efir"],
                  files={"in.efir": SIMPLE.encode("utf-16")}, expect="error"))
    C.append(Case(tool, "odd-files", "sparse-300MiB", (["--to-triton"] if tool == "efir-translate" else []) + ["big.efir"],
                  files={"big.efir": ("sparse", 300 << 20)}, expect="error"))
    C.append(Case(tool, "odd-files", "stdin-binary", (["--to-triton"] if tool == "efir-translate" else []) + ["-"],
                  stdin=bytes(range(256)) * 16, expect="error"))
    C.append(Case(tool, "odd-files", "stdin-empty", (["--to-triton"] if tool == "efir-translate" else []) + ["-"]))
    C.append(Case(tool, "odd-files", "unreadable", (["--to-triton"] if tool == "efir-translate" else []) + ["locked.efir"],
                  files={"locked.efir": ("mode", SIMPLE, 0)}, expect="any"))
    # hostile file names (diagnostics and generated docstrings)
    for fname in ['a"""\nopen("PWNED","w")\n""".efir', "back\\slash.efir", "new\nline.efir", "-o", "--help", "é\u2028\u202e.efir", "\x1b[31mred.efir", "sp ace's.efir"]:
        prog = SIMPLE if tool != "efir-translate" else TILED["attn_decode"]
        argv = (["--to-triton"] if tool == "efir-translate" else []) + ["--", fname]
        C.append(Case(tool, "hostile-names", f"file-{fname[:12]!r}", argv, files={fname: prog}, expect="ok"))
        bad = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.neg %q : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n"
        C.append(Case(tool, "hostile-names", f"file-err-{fname[:12]!r}", argv, files={fname: bad}, expect="error"))
    # outputs
    okprog = SIMPLE if tool != "efir-translate" else SMALL["rmsnorm_mlp"]
    inarg = (["--to-triton"] if tool == "efir-translate" else []) + ["in.efir"]
    if tool == "efir-run":
        inarg = ["in.efir"]
    C.append(Case(tool, "outputs", "stdout-dev-full", inarg, files={"in.efir": okprog}, stdout="devfull", expect="error"))
    C.append(Case(tool, "outputs", "stdout-closed-pipe", inarg, files={"in.efir": many_funcs(2000) if tool == "efir-opt" else okprog}, stdout="closed"))
    if tool in ("efir-opt", "efir-translate"):
        for n, o in [("o-dev-full", "/dev/full"), ("o-dir", "."), ("o-missing-dir", "nodir/x"), ("o-empty", ""), ("o-proc", "/proc/version")]:
            C.append(Case(tool, "outputs", n, inarg + ["-o", o], files={"in.efir": okprog}, expect="error"))
    # environment
    for n, env in [("no-home", {"HOME": None}), ("lang-c", {"LANG": "C", "LC_ALL": "C"}), ("term-dumb", {"TERM": "dumb", "NO_COLOR": "1"}),
                   ("columns-huge", {"COLUMNS": "99999999999999999999"}), ("columns-neg", {"COLUMNS": "-5"}),
                   ("rust-backtrace", {"RUST_BACKTRACE": "full"}), ("tmpdir-missing", {"TMPDIR": "/nonexistent"}),
                   ("efir-progress", {"EFIR_PROGRESS": "1"}), ("rust-min-stack-1", {"RUST_MIN_STACK": "1"}),
                   ("rust-min-stack-junk", {"RUST_MIN_STACK": "junk"})]:
        extra = ["--color", "always"] if n == "term-dumb" and tool != "efir-run" else []
        C.append(Case(tool, "environment", n, inarg + extra, files={"in.efir": okprog}, env=env, expect="ok"))
    return C
