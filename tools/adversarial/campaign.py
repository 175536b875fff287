#!/usr/bin/env python3
"""The counted adversarial campaign of issue 30.

Runs a few hundred crafted inputs and command lines against `efir-opt`,
`efir-translate`, `efir-run` (release binaries by default) and the Python
package (`python -m efir ...` and `efir.compile`, through the binaries), each
under a timeout, and classifies every outcome:

- `clean`: exit 1 with an `error` diagnostic, or exit 2 with a usage message
  (for Python: a documented exception such as CompileError, or argparse's
  usage error);
- `success`: exit 0 (and the result checked where the case has a check);
- `panic`: exit 101 / "panicked" (Python: an uncaught traceback, or an
  undocumented exception type from `efir.compile`);
- `crash`: killed by a signal (a closed pipe's SIGPIPE excepted);
- `hang`: the timeout passed;
- `wrong`: a wrong answer or a misleading exit: efir-run's result differs
  from numpy's, a translated module differs from the interpreter under
  TRITON_INTERPRET=1, a pass changes a program's meaning or prints text its
  own parser rejects, exit 0 where the input or the output was bad, an exit
  1 without a message, an undocumented exit code;
- `injection`: a hostile name made generated code run something (a
  sentinel file appeared).

Usage (from the repository root):

    cargo build --release -q -p efir-opt -p efir-translate -p efir-run
    ~/.cache/efir-venv/bin/python tools/adversarial/campaign.py \
        [--bin-dir target/release] [--jobs 2] [--only TOOL] [--out FILE.md]

It prints the table of counts per tool per outcome and every case that is
not `clean` or `success`, and writes both to `--out` (default
bench/results/<date>-adversarial.md).
"""

import argparse
import concurrent.futures as cf
import dataclasses
import datetime
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUTCOMES = ["clean", "success", "panic", "crash", "hang", "wrong", "injection"]
TOOLS = ["efir-opt", "efir-translate", "efir-run", "python"]
PY = sys.executable


@dataclasses.dataclass
class Case:
    tool: str  # efir-opt, efir-translate, efir-run, python
    cat: str
    name: str
    argv: list  # after the tool's path; for python: after the interpreter
    files: dict = dataclasses.field(default_factory=dict)  # name -> bytes|str, written in the case dir
    stdin: bytes = b""
    env: dict = dataclasses.field(default_factory=dict)  # None value: unset
    timeout: float = 30.0
    expect: str = "any"  # ok, error, any
    stdout: str = "pipe"  # pipe, closed, devfull
    check: object = None  # f(case, res, dir) -> None | (outcome, note)
    check_rc: tuple = (0,)  # the exit codes at which `check` runs


@dataclasses.dataclass
class Res:
    rc: int
    out: bytes
    err: bytes
    secs: float
    timed_out: bool


# ---------------------------------------------------------------- programs

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


# ---------------------------------------------------------------- checks

def first_line(b):
    for line in b.decode("utf-8", "replace").splitlines():
        if line.strip():
            return line.strip()[:160]
    return ""


def run_tool(bin_dir, argv, cwd, timeout, env=None, stdin=b"", stdout="pipe"):
    e = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    t0 = time.monotonic()
    out_f = subprocess.PIPE
    if stdout == "devfull":
        out_f = open("/dev/full", "wb")
    elif stdout == "closed":
        r, w = os.pipe()
        os.close(r)
        out_f = w
    try:
        p = subprocess.Popen(argv, cwd=cwd, env=e, stdin=subprocess.PIPE, stdout=out_f, stderr=subprocess.PIPE,
                             start_new_session=True)
    finally:
        if stdout == "devfull":
            out_f.close()
        elif stdout == "closed":
            os.close(out_f)
    try:
        o, er = p.communicate(stdin, timeout=timeout)
        return Res(p.returncode, o or b"", er or b"", time.monotonic() - t0, False)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        o, er = p.communicate()
        return Res(-9, o or b"", er or b"", time.monotonic() - t0, True)


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
        return "clean", text.split("RESULT clean", 1)[1].strip().splitlines()[0][:160]
    if "RESULT setup" in text:
        return "campaign-error", text.split("RESULT setup", 1)[1].strip().splitlines()[0][:160]
    if "RESULT injection" in text:
        return "injection", "the sentinel file was created"
    if "RESULT panic" in text:
        return "panic", text.split("RESULT panic", 1)[1].strip().splitlines()[0][:160]
    return None


# ---------------------------------------------------------------- cases

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
    return C


# ---------------------------------------------------------------- driver

class Ctx:
    def __init__(self, bin_dir):
        self.bin_dir = bin_dir

    def tool(self, name):
        return str(self.bin_dir / name)


def prepare(case, d, ctx):
    for name, content in case.files.items():
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple) and content[0] == "sparse":
            with open(p, "wb") as f:
                f.truncate(content[1])
        elif isinstance(content, tuple) and content[0] == "mode":
            p.write_text(content[1])
            os.chmod(p, content[2])
        else:
            p.write_bytes(content if isinstance(content, bytes) else content.encode())
    if case.tool == "python":
        argv = [PY] + case.argv
        env = dict(case.env)
        if env.get("EFIR_BIN_DIR") == "BIN":
            env["EFIR_BIN_DIR"] = str(ctx.bin_dir)
        return argv, env
    return [ctx.tool(case.tool)] + case.argv, case.env


def run_case(case, ctx, base):
    d = pathlib.Path(tempfile.mkdtemp(prefix="case-", dir=base))
    try:
        argv, env = prepare(case, d, ctx)
        res = run_tool(ctx.bin_dir, argv, d, case.timeout, env=env, stdin=case.stdin, stdout=case.stdout)
        outcome, note = classify(case, res, d, ctx)
        return case, outcome, note, res.secs
    except Exception as e:  # a bug of the campaign itself
        return case, "campaign-error", f"{type(e).__name__}: {e}", 0.0
    finally:
        for p in d.rglob("*"):
            try:
                os.chmod(p, 0o700)
            except OSError:
                pass
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default=str(ROOT / "target" / "release"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", choices=TOOLS)
    ap.add_argument("--cat", action="append", help="only these categories")
    ap.add_argument("--grep", help="only cases whose name contains this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"{datetime.date.today()}-adversarial.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--json", help="also write every case's outcome here")
    ap.add_argument("--combine", nargs="+", help="render the table of these --json files (no run)")
    ap.add_argument("--verbose", action="store_true", help="print every case's outcome as it ends")
    ap.add_argument("--label", default="", help="a title suffix for the results file (e.g. 'before fixes')")
    args = ap.parse_args()
    ctx = Ctx(pathlib.Path(args.bin_dir).resolve())
    rng = random.Random(30)
    cases = []
    makers = {"efir-opt": cases_opt, "efir-translate": cases_translate, "efir-run": cases_run, "python": cases_python}
    for t in TOOLS:
        cs = makers[t](rng)
        if not args.only or t in args.only:
            cases += cs
    if args.cat:
        cases = [c for c in cases if c.cat in args.cat]
    if args.grep:
        cases = [c for c in cases if args.grep in c.name]
    if args.combine:
        import json
        recs = [r for f in args.combine for r in json.loads(pathlib.Path(f).read_text())]
        report = render(recs, args, 0.0)
        print(report)
        if not args.no_write:
            pathlib.Path(args.out).write_text(report)
        return 0
    base = tempfile.mkdtemp(prefix="efir-adversarial-")
    results = []
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(args.jobs) as ex:
        futs = [ex.submit(run_case, c, ctx, base) for c in cases]
        for i, f in enumerate(cf.as_completed(futs)):
            case, outcome, note, secs = f.result()
            results.append((case, outcome, note, secs))
            if outcome not in ("clean", "success") or args.verbose:
                print(f"[{i + 1}/{len(cases)}] {case.tool} {case.cat}/{case.name}: {outcome}: {note}", flush=True)
    shutil.rmtree(base, ignore_errors=True)
    elapsed = time.monotonic() - t0
    recs = [dict(tool=c.tool, cat=c.cat, name=c.name, outcome=o, note=n, secs=t) for c, o, n, t in results]
    if args.json:
        import json
        pathlib.Path(args.json).write_text(json.dumps(recs, indent=0))
    report = render(recs, args, elapsed)
    print(report)
    if not args.no_write:
        pathlib.Path(args.out).write_text(report)
        print(f"written to {args.out}")
    bad = [r for r in results if r[1] not in ("clean", "success")]
    return 1 if bad else 0


def render(recs, args, elapsed):
    outs = OUTCOMES + (["campaign-error"] if any(r["outcome"] == "campaign-error" for r in recs) else [])
    how = f"{elapsed:.0f} s with {args.jobs} jobs" if elapsed else "combined runs: " + ", ".join(args.combine or [])
    lines = [f"# Adversarial campaign (issue 30){' — ' + args.label if args.label else ''}", "",
             f"`tools/adversarial/campaign.py --bin-dir {args.bin_dir}`, {len(recs)} cases, {how}.", "",
             "| tool | cases | " + " | ".join(outs) + " |", "|---|---:|" + "---:|" * len(outs)]
    for t in TOOLS + ["all"]:
        rs = [r for r in recs if r["tool"] == t or t == "all"]
        if rs:
            lines.append(f"| {t} | {len(rs)} | " + " | ".join(str(sum(1 for r in rs if r["outcome"] == o)) for o in outs) + " |")
    cats = sorted({r["cat"] for r in recs})
    lines += ["", "Cases per category:", "", "| tool | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
    for t in TOOLS:
        rs = [r for r in recs if r["tool"] == t]
        if rs:
            lines.append(f"| {t} | " + " | ".join(str(sum(1 for r in rs if r["cat"] == c)) for c in cats) + " |")
    bad = sorted([r for r in recs if r["outcome"] not in ("clean", "success")], key=lambda r: (r["tool"], r["outcome"], r["cat"], r["name"]))
    lines += ["", f"## Findings ({len(bad)})", ""]
    for r in bad:
        name = r["name"].replace("\n", "\\n")
        lines.append(f"- {r['tool']} · {r['outcome']} · {r['cat']}/{name}: {r['note']}")
    slow = sorted(recs, key=lambda r: -r["secs"])[:8]
    lines += ["", "Slowest cases: " + ", ".join(f"{r['tool']} {r['name'][:40]} {r['secs']:.1f} s" for r in slow), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
