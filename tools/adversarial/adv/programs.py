"""The .efir texts the cases feed the tools: small valid programs, malformed
and ill-typed ones, hostile names, deep and wide generated programs,
mutations of the examples."""

from .model import ROOT


def unary_chain(n, op="ew.neg", shape="4xf32", name="f"):
    t = f"tensor<{shape}>"
    lines = [f"func @{name}(%x: {t}) -> {t} {{"]
    prev = "%x"
    for i in range(n):
        lines.append(f"  %v{i} = {op} {prev} : {t}")
        prev = f"%v{i}"
    lines.append(f"  return {prev} : {t}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def one(body, params, ret, name="f"):
    ps = ", ".join(f"%{n}: {t}" for n, t in params)
    return f"func @{name}({ps}) -> {ret} {{\n{body}}}\n"


SIMPLE = one("  %y = ew.neg %x : tensor<4x2xf32>\n  return %y : tensor<4x2xf32>\n", [("x", "tensor<4x2xf32>")], "tensor<4x2xf32>")
SMALL = {p.stem: p.read_text() for p in sorted((ROOT / "examples" / "small").glob("*.efir"))}
TILED = {p.stem: p.read_text() for p in sorted((ROOT / "examples" / "tiled").glob("*.efir"))}

MALFORMED = {
    "empty": "",
    "only-comment": "// nothing\n",
    "truncated-func": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = ew.neg %x",
    "no-close-brace": SIMPLE[:-2],
    "unclosed-tensor": "func @f(%x: tensor<4xf32) -> tensor<4xf32> {\n return %x : tensor<4xf32>\n}\n",
    "bad-char": "func @f() {\n  return ~\n}\n",
    "unterminated-string": 'func @f() {\n  %0 = "ew.neg"(%x\n}\n',
    "bad-escape": 'func @f() {\n  %0 = "ew\\q"() : () -> tensor<f32>\n  return\n}\n',
    "int-overflow": "func @f() -> tensor<f32> {\n  %0 = tensor.full<99999999999999999999999> : tensor<f32>\n  return %0 : tensor<f32>\n}\n",
    "dim-overflow": "func @f(%x: tensor<99999999999999999999xf32>) -> tensor<99999999999999999999xf32> {\n return %x : tensor<99999999999999999999xf32>\n}\n",
    "space-dim": "func @f(%x: tensor<4 x f32>) -> tensor<4xf32> {\n return %x : tensor<4xf32>\n}\n",
    "double-arrow": "func @f() -> -> tensor<f32> {\n}\n",
    "nul-bytes": "func @f\0() {\n return\n}\n",
    "bom": "\ufeff" + SIMPLE,
    "crlf": SIMPLE.replace("\n", "\r\n"),
    "cr-only": SIMPLE.replace("\n", "\r"),
    "form-feed": SIMPLE.replace("\n", "\f"),
    "unicode-name": "func @f(%é: tensor<4xf32>) -> tensor<4xf32> {\n return %é : tensor<4xf32>\n}\n",
    "rtl-override": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n return %x : tensor<4xf32> // \u202e }\n}\n",
    "expected-error-wrap": "// expected-error @+9223372036854775807 {{E0100}}\n" + SIMPLE,
    "expected-error-neg": "// expected-error @-9223372036854775808 {{E0100}}\n" + SIMPLE,
    "expected-error-noclose": "// expected-error @+1 {{E0100\n" + SIMPLE,
    "generic-garbage": 'func @f() {\n  %0 = "a.b"() {x = [[[[[1]]]]], y = #red.prod<>} : () -> tuple<>\n  return\n}\n',
    "tuple-empty": "func @f(%x: tuple<>) {\n return\n}\n",
    "func-no-name": "func @(%x: tensor<4xf32>) {\n return\n}\n",
    "sep-only": "// -----\n// -----\n",
    "float-junk": "func @f() -> tensor<f32> {\n %0 = tensor.full<1e999999> : tensor<f32>\n return %0 : tensor<f32>\n}\n",
    "nan-literal": "func @f() -> tensor<f32> {\n %0 = tensor.full<nan> : tensor<f32>\n return %0 : tensor<f32>\n}\n",
    "hex-literal": "func @f() -> tensor<f32> {\n %0 = tensor.full<0x10> : tensor<f32>\n return %0 : tensor<f32>\n}\n",
    "symbolic-unbound": "func @f(%x: tensor<|@p|x4xf32>) -> tensor<|@p|x4xf32> {\n return %x : tensor<|@p|x4xf32>\n}\n",
}

TYPE_ERRORS = {
    "wrong-result-type": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.neg %x : tensor<5xf32>\n return %y : tensor<4xf32>\n}\n",
    "undefined-value": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.neg %z : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "use-before-def": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.neg %w : tensor<4xf32>\n %w = ew.neg %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "self-use": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.add %y, %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "redefinition": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %x = ew.neg %x : tensor<4xf32>\n return %x : tensor<4xf32>\n}\n",
    "dup-param": "func @f(%x: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {\n return %x : tensor<4xf32>\n}\n",
    "dup-func": SIMPLE + SIMPLE,
    "missing-return": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.neg %x : tensor<4xf32>\n}\n",
    "return-count": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n return %x, %x : tensor<4xf32>, tensor<4xf32>\n}\n",
    "int-exp": "func @f(%x: tensor<4xi32>) -> tensor<4xi32> {\n %y = ew.exp %x : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
    "unknown-op": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = ew.frobnicate %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "unknown-dtype": "func @f(%x: tensor<4xf7>) -> tensor<4xf7> {\n return %x : tensor<4xf7>\n}\n",
    "matmul-k": "func @f(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> tensor<2x5xf32> {\n %y = tensor.matmul %a, %b : tensor<2x5xf32>\n return %y : tensor<2x5xf32>\n}\n",
    "reduce-dim-oob": "func @f(%x: tensor<4xf32>) -> tensor<f32> {\n %y = tensor.reduce<#red.sum, 9223372036854775807> %x : tensor<f32>\n return %y : tensor<f32>\n}\n",
    "reduce-dim-neg": "func @f(%x: tensor<4xf32>) -> tensor<f32> {\n %y = tensor.reduce<#red.sum, -1> %x : tensor<f32>\n return %y : tensor<f32>\n}\n",
    "transpose-bad": "func @f(%x: tensor<4x2xf32>) -> tensor<2x4xf32> {\n %y = tensor.transpose<[1, 1]> %x : tensor<2x4xf32>\n return %y : tensor<2x4xf32>\n}\n",
    "slice-bad": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = tensor.slice<[0], [9223372036854775807], [-1]> %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "slice-step-huge": "func @f(%x: tensor<4xf32>) -> tensor<1xf32> {\n %y = tensor.slice<[0], [4], [9223372036854775807]> %x : tensor<1xf32>\n return %y : tensor<1xf32>\n}\n",
    "get-oob": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %t = tensor.tuple %x : tuple<tensor<4xf32>>\n %y = tensor.get<18446744073709551615> %t : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "cast-to-tuple": "func @f(%x: tensor<4xf32>) -> tuple<tensor<4xf32>> {\n %y = ew.cast %x : tuple<tensor<4xf32>>\n return %y : tuple<tensor<4xf32>>\n}\n",
    "full-i1-2": "func @f() -> tensor<4xi1> {\n %y = tensor.full<2> : tensor<4xi1>\n return %y : tensor<4xi1>\n}\n",
    "full-i32-huge": "func @f() -> tensor<4xi32> {\n %y = tensor.full<1e300> : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
    "full-i32-nan": "func @f() -> tensor<4xi32> {\n %y = tensor.full<nan> : tensor<4xi32>\n return %y : tensor<4xi32>\n}\n",
    "combine-unknown-axis": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = par.combine<0, @q> %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "partition-twice": "func @f(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {\n %a = par.partition<0, @p> %x : tensor<4x4xf32, @p: part(0)>\n %b = par.partition<1, @p> %a : tensor<4x4xf32, @p: part(1)>\n %c = par.combine<1, @p> %b : tensor<4x4xf32>\n return %c : tensor<4x4xf32>\n}\n",
    "launch-unknown": "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n %y = kernel.launch<@nope> %x : tensor<4xf32>\n return %y : tensor<4xf32>\n}\n",
    "repair-wrong-sig": "func @h(%c: tensor<f32>) -> tensor<f32> {\n return %c : tensor<f32>\n}\nfunc @f(%a: tensor<4x8xf32>) -> tuple<tensor<4xf32>, tensor<4xf32>> {\n %0 = tensor.reduce<#red.repair<#red.max, #red.sum, f = @h, h = @h>, 1> %a : tuple<tensor<4xf32>, tensor<4xf32>>\n return %0 : tuple<tensor<4xf32>, tensor<4xf32>>\n}\n",
}

SHAPES = {
    "zero-dim": "tensor<0x4xf32>",
    "zero-only": "tensor<0xf32>",
    "one-by-one": "tensor<1x1xf32>",
    "rank0": "tensor<f32>",
    "rank-64": "tensor<" + "1x" * 64 + "f32>",
    "rank-300": "tensor<" + "1x" * 300 + "f32>",
    "max-dim": "tensor<1099511627776xf32>",
    "max-dim+1": "tensor<1099511627777xf32>",
    "max-dims-2": "tensor<1099511627776x1099511627776xf32>",
    "max-dims-8": "tensor<" + "1099511627776x" * 8 + "f32>",
    "huge-i1": "tensor<100000x100000x100xi1>",
    "negative": "tensor<-1x4xf32>",
    "neg-zero": "tensor<-0x4xf32>",
}

HOSTILE_VALUE_NAMES = [
    ("dots-vs-underscore", ["a.b", "a_b", "a$b"]),
    ("dollar-digits", ["a$1", "a_1", "a__1"]),
    ("keywords", ["def", "class", "return", "lambda", "None", "import"]),
    ("builtins", ["__import__", "print", "exec", "open", "__builtins__"]),
    ("module-globals", ["torch", "tl", "triton", "run", "INPUTS", "CONFIG_SPACE"]),
    ("digits", ["0", "1", "00", "0.1"]),
    ("dunder-dots", ["__", "_", ".", "$", "._", "_."]),
    ("long", ["x" * 5000, "x" * 4999 + "y"]),
    ("kernel-like", ["k0", "kernel_0", "BLOCK_m", "pid", "offs", "mask"]),
]

HOSTILE_FUNC_NAMES = ["run", "def", "torch", "_", "a.b", "a$b", "a_b", "__init__", "kernel_0", "INPUTS", "x" * 3000]


def hostile_values_program(names):
    """A function whose parameters and values carry `names`: sums them all."""
    t = "tensor<4x8xf32>"
    params = ", ".join(f"%{n}: {t}" for n in names[:2])
    lines = [f"func @f({params}) -> {t} {{"]
    prev = f"%{names[0]}"
    other = f"%{names[1 % len(names)]}" if len(names) > 1 else prev
    lines.append(f"  %{names[0]}0 = ew.mul {prev}, {other} : {t}")
    prev = f"%{names[0]}0"
    for n in names[2:]:
        lines.append(f"  %{n} = ew.add {prev}, {other} : {t}")
        prev = f"%{n}"
    lines.append(f"  return {prev} : {t}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def hostile_func_program(fname):
    t = "tensor<4x8xf32>"
    return f"func @{fname}(%x: {t}) -> {t} {{\n  %y = ew.exp %x : {t}\n  return %y : {t}\n}}\n"


def collision_program():
    """Values and axes whose names differ only in `.`, `$`, `_`."""
    return (
        "func @coll(%l.weight: tensor<8x8xf32>, %l_weight: tensor<8x8xf32>, %l$weight: tensor<8x8xf32>) -> tensor<8x8xf32> {\n"
        "  %a.1 = ew.add %l.weight, %l_weight : tensor<8x8xf32>\n"
        "  %a_1 = ew.mul %a.1, %l$weight : tensor<8x8xf32>\n"
        "  %a$1 = ew.sub %a_1, %l_weight : tensor<8x8xf32>\n"
        "  %p = par.partition<0, @m.x> %a$1 : tensor<8x8xf32, @m.x: part(0)>\n"
        "  %q = par.partition<1, @m_x> %p : tensor<8x8xf32, @m.x: part(0), @m_x: part(1)>\n"
        "  %r = ew.exp %q : tensor<8x8xf32, @m.x: part(0), @m_x: part(1)>\n"
        "  %s = par.combine<1, @m_x> %r : tensor<8x8xf32, @m.x: part(0)>\n"
        "  %t = par.combine<0, @m.x> %s : tensor<8x8xf32>\n"
        "  return %t : tensor<8x8xf32>\n"
        "}\n"
    )


def deep_prod(n):
    r = "#red.sum"
    for _ in range(n):
        r = f"#red.prod<{r}, #red.sum>"
    return "func @f(%x: tensor<4xf32>) -> tensor<f32> {\n %y = tensor.reduce<" + r + ", 0> %x : tensor<f32>\n return %y : tensor<f32>\n}\n"


def deep_tuple(n):
    t = "tensor<f32>"
    for _ in range(n):
        t = f"tuple<{t}>"
    return f"func @f(%x: {t}) -> {t} {{\n return %x : {t}\n}}\n"


def deep_generic_attr(n):
    a = "1"
    for _ in range(n):
        a = f"[{a}]"
    return 'func @f() {\n %0 = "a.b"() {x = ' + a + "} : () -> tensor<f32>\n return\n}\n"


def many_funcs(n):
    return "".join(one("  %y = ew.neg %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n", [("x", "tensor<4xf32>")], "tensor<4xf32>", name=f"f{i}") for i in range(n))


def launch_chain(n):
    t = "tensor<4xf32>"
    out = [f"func @k0(%x: {t}) -> {t} {{\n  %y = ew.neg %x : {t}\n  return %y : {t}\n}}\n"]
    for i in range(1, n):
        out.append(f"func @k{i}(%x: {t}) -> {t} {{\n  %y = kernel.launch<@k{i-1}> %x : {t}\n  return %y : {t}\n}}\n")
    return "".join(reversed(out))


def wide_program(n):
    """n parameters, all summed."""
    t = "tensor<4xf32>"
    params = ", ".join(f"%x{i}: {t}" for i in range(n))
    lines = [f"func @f({params}) -> {t} {{"]
    prev = "%x0"
    for i in range(1, n):
        lines.append(f"  %s{i} = ew.add {prev}, %x{i} : {t}")
        prev = f"%s{i}"
    lines.append(f"  return {prev} : {t}\n}}")
    return "\n".join(lines) + "\n"


def many_axes(n):
    t = "tensor<4xf32>"
    lines = [f"func @f(%x: {t}) -> {t} {{"]
    prev = "%x"
    for i in range(n):
        lines.append(f"  %r{i} = par.replicate<@a{i}> {prev} : tensor<4xf32, @a{i}: repl>")
        lines.append(f"  %c{i} = par.reduce<#red.max, @a{i}> %r{i} : {t}")
        prev = f"%c{i}"
    lines.append(f"  return {prev} : {t}\n}}")
    return "\n".join(lines) + "\n"


def self_repair():
    return (
        "func @h(%c: tensor<f32>, %s: tensor<f32>, %s1: tensor<f32>) -> tensor<f32> {\n"
        "  %i = tensor.iota<0> : tensor<2xf32>\n"
        "  %r = tensor.reduce<#red.repair<#red.max, #red.sum, f = @f, h = @h>, 0> %i : tuple<tensor<f32>, tensor<f32>>\n"
        "  %y = tensor.get<1> %r : tensor<f32>\n"
        "  return %y : tensor<f32>\n}\n"
        "func @f(%x: tensor<f32>, %s1: tensor<f32>) -> tensor<f32> {\n  return %x : tensor<f32>\n}\n"
        "func @main(%a: tensor<4x8xf32>) -> tuple<tensor<4xf32>, tensor<4xf32>> {\n"
        "  %0 = tensor.reduce<#red.repair<#red.max, #red.sum, f = @f, h = @h>, 1> %a : tuple<tensor<4xf32>, tensor<4xf32>>\n"
        "  return %0 : tuple<tensor<4xf32>, tensor<4xf32>>\n}\n"
    )


def mutual_launch():
    t = "tensor<4xf32>"
    return (f"func @a(%x: {t}) -> {t} {{\n  %y = kernel.launch<@b> %x : {t}\n  return %y : {t}\n}}\n"
            f"func @b(%x: {t}) -> {t} {{\n  %y = kernel.launch<@a> %x : {t}\n  return %y : {t}\n}}\n")


def mutate(text, rng, n):
    frags = ["%0", "@m", "#red.sum", "tensor<", ">", "(", ")", "{", "}", ",", ":", "=", "->", "func", "return",
             "8x", "|@p|x", "f16", "i1", "ew.add", "par.partition<0, @m>", "\n", "// -----\n", "\"", "\\", "é",
             "\0", "99999999999999999999", "1099511627777x", "0x", "-1", "nan", "inf"]
    s = text
    for _ in range(n):
        k = rng.randrange(4)
        a = rng.randrange(len(s) + 1)
        if k == 0:
            s = s[:a] + s[a + rng.randrange(40):]
        elif k == 1:
            s = s[:a] + rng.choice(frags) + s[a:]
        elif k == 2:
            piece = s[a:a + rng.randrange(80)]
            b = rng.randrange(len(s) + 1)
            s = s[:b] + piece + s[b:]
        else:
            s = s[:a] + chr(rng.randrange(1, 0x250)) + s[a + 1:]
    return s
