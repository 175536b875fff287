"""`python -m efir` on bad arguments (issue 30's adversarial findings): each
ends with exit status 1 (an error in the input) or 2 (usage) and one
`error: ...` line on stderr, never a traceback, and an output that cannot be
written is an error. Also `efir.compile`'s up-front argument checks.

Starting Python and importing torch takes seconds, so the command lines run
in one helper process that imports efir once and forks a child per command
line; the child runs `efir/__main__.py` as `python -m efir` does (runpy),
with its own working folder, environment, argv and stdout (a file, a closed
pipe or /dev/full), and ends as the interpreter would (a failed flush of
stdout at exit prints a traceback, exit status 120). One command line also
runs as a real `python -m efir` process.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT / "python"), EFIR_NO_NATIVE="1")

USER = textwrap.dedent(
    """
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
    """
)

HARNESS = r"""
import json, os, runpy, sys, traceback
import efir, efir.tune  # imported once, before the forks
cases = json.load(open(sys.argv[1]))
results = []
for c in cases:
    d = c["dir"]
    sys.stdout.flush(); sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.chdir(d)
        for k, v in c["env"].items():
            os.environ[k] = v
        err = os.open(os.path.join(d, "stderr"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(err, 2)
        if c["stdout"] == "closed":
            r, w = os.pipe(); os.close(r); os.dup2(w, 1)
        elif c["stdout"] == "full":
            os.dup2(os.open("/dev/full", os.O_WRONLY), 1)
        else:
            os.dup2(os.open(os.path.join(d, "stdout"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        sys.argv = ["efir"] + c["argv"]
        code = 0
        try:
            runpy.run_module("efir", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            traceback.print_exc(); code = 1
        try:  # as the interpreter does at exit
            sys.stdout.flush()
        except BaseException:
            traceback.print_exc(); code = 120
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    results.append(os.waitstatus_to_exitcode(status))
json.dump(results, open(sys.argv[2], "w"))
"""

# (name, argv, environment, stdout, exit status, a fragment of the message)
CASES = [
    ("missing-file", ["import", "nope.py:M"], {}, "file", 1, "`nope.py`: it does not exist"),
    ("directory", ["import", ".:M"], {}, "file", 1, "is not a file"),
    ("no-name", ["import", "m.py"], {}, "file", 2, "expected FILE.py:NAME"),
    ("not-python", ["import", "m.efir:M"], {}, "file", 2, "not a .py file"),
    ("missing-name", ["import", "m.py:Nope"], {}, "file", 1, "has no `Nope`"),
    ("not-callable", ["import", "m.py:value", "--example-shapes", "2"], {}, "file", 1, "`value` (int) is not"),
    ("raises-on-import", ["import", "raises.py:M"], {}, "file", 1, "RuntimeError: at import"),
    ("syntax-error", ["import", "bad.py:M", "--example-shapes", "2x8"], {}, "file", 1, "bad.py:1: invalid syntax"),
    ("needs-args", ["import", "m.py:Needs"], {}, "file", 1, "cannot construct `Needs` without arguments"),
    ("shape-junk", ["import", "m.py:M", "--example-shapes", "axb:f32"], {}, "file", 2, "expected dimensions"),
    ("shape-negative", ["import", "m.py:M", "--example-shapes=-1x8"], {}, "file", 2, "expected dimensions"),
    ("dtype", ["import", "m.py:M", "--example-shapes", "2x8:f64"], {}, "file", 2, "unknown dtype `f64`"),
    ("shape-huge", ["import", "m.py:M", "--example-shapes", "99999999999x99999999999"], {}, "file", 1, "more than the 4 GiB"),
    ("too-few-shapes", ["import", "m.py:fn", "--example-shapes", "2x8"], {}, "file", 1, "missing a required argument: 'y'"),
    ("wrong-shape", ["import", "m.py:M", "--example-shapes", "2x7"], {}, "file", 1, "export failed"),
    ("user-raises", ["import", "m.py:boom", "--example-shapes", "2x8"], {}, "file", 1, "user code fails"),
    ("o-dir", ["import", "m.py:M", "--example-shapes", "2x8", "-o", "."], {}, "file", 1, "cannot write `.`"),
    ("o-dev-full", ["import", "m.py:M", "--example-shapes", "2x8", "-o", "/dev/full"], {}, "file", 1, "cannot write `/dev/full`"),
    ("stdout-closed", ["import", "m.py:M", "--example-shapes", "2x8"], {}, "closed", 1, "cannot write to stdout"),
    ("stdout-full", ["cache", "list"], {"EFIR_CACHE_DIR": "cache"}, "full", 1, "cannot write to stdout"),
    ("budget-env-junk", ["tune", "c.efir", "-o", "t.efir"], {"EFIR_TUNE_BUDGET": "abc"}, "file", 2, "EFIR_TUNE_BUDGET must be a number"),
    ("budget-env-nan", ["tune", "c.efir", "-o", "t.efir"], {"EFIR_TUNE_BUDGET": "nan"}, "file", 2, "EFIR_TUNE_BUDGET must be a positive"),
    ("budget-nan", ["tune", "c.efir", "-o", "t.efir", "--budget", "nan"], {}, "file", 2, "--budget must be a positive"),
    ("top-0", ["tune", "c.efir", "-o", "t.efir", "--top", "0"], {}, "file", 2, "--top must be at least 1"),
    ("tune-dev-zero", ["tune", "/dev/zero", "-o", "t.efir"], {}, "file", 1, "larger than 256 MiB"),
    ("tune-binary", ["tune", "bin.efir", "-o", "t.efir"], {}, "file", 1, "not UTF-8 text"),
    ("cache-list-dir-file", ["cache", "list"], {"EFIR_CACHE_DIR": "/dev/null"}, "file", 1, "`/dev/null` is not a folder"),
    ("cache-clear-dir-file", ["cache", "clear"], {"EFIR_CACHE_DIR": "/dev/null"}, "file", 1, "`/dev/null` is not a folder"),
    ("report-stdout-closed", ["report", str(ROOT / "bench/results/2026-12-01-s21-h200-b8.json")], {}, "closed", 1, "cannot write to stdout: Broken pipe"),
    ("report-dev-zero", ["report", "/dev/zero"], {}, "file", 1, "larger than 256 MiB"),
    ("report-stdout-full", ["report", str(ROOT / "bench/results/2026-12-01-s21-h200-b8.json")], {}, "full", 1, "cannot write to stdout: No space left"),
]
try:
    import matplotlib  # noqa: F401 (the chart needs it; without it `-o` is another error)
except ImportError:
    pass
else:
    CASES.append(("report-o-not-a-dir", ["report", str(ROOT / "bench/results/2026-12-01-s21-h200-b8.json"), "-o", "/dev/null/x.png"], {}, "file", 1, "cannot write `/dev/null/x.png`"))


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    base = tmp_path_factory.mktemp("cli")
    cases = []
    for name, argv, env, stdout, _, _ in CASES:
        d = base / name
        d.mkdir()
        (d / "m.py").write_text(USER)
        (d / "m.efir").write_text("func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x : tensor<4xf32>\n}\n")
        (d / "bad.py").write_text("def (:\n")
        (d / "raises.py").write_text("raise RuntimeError('at import')\n")
        (d / "bin.efir").write_bytes(b"\xff\xfe\x00func")
        cases.append({"dir": str(d), "argv": argv, "env": env, "stdout": stdout})
    (base / "cases.json").write_text(json.dumps(cases))
    r = subprocess.run([sys.executable, "-c", HARNESS, str(base / "cases.json"), str(base / "rc.json")], env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rcs = json.loads((base / "rc.json").read_text())
    return {c[0]: (rc, (base / c[0] / "stderr").read_text()) for c, rc in zip(CASES, rcs)}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_command_line(outcomes, case):
    name, _, _, _, want_rc, fragment = case
    rc, err = outcomes[name]
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == want_rc, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], err


def test_output_to_full_disk_fails(tmp_path):
    """A real `python -m efir` process: stdout on /dev/full is an error."""
    (tmp_path / "m.py").write_text(USER)
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "efir", "import", "m.py:M", "--example-shapes", "2x8"], cwd=tmp_path, env=ENV, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip() == "error: cannot write to stdout: No space left on device"


def test_compile_checks_arguments_up_front(tmp_path):
    """Refused before the export, not when the compiled function is called."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python"))
    import efir

    m, x = torch.nn.Linear(8, 4), torch.randn(2, 8)
    with pytest.raises(efir.CompileError, match="`/dev/null` as the work folder: it is not a folder"):
        efir.compile(m, (x,), quiet=True, workdir="/dev/null")
    (tmp_path / "f").write_text("")
    with pytest.raises(efir.CompileError, match="as the work folder: Not a directory"):
        efir.compile(m, (x,), quiet=True, workdir=tmp_path / "f" / "x")
    with pytest.raises(TypeError, match="config must be a dict"):
        efir.compile(m, (x,), quiet=True, config="fast")
    with pytest.raises(ValueError, match=r"config\['BLOCK_x'\] must be a positive integer"):
        efir.compile(m, (x,), quiet=True, config={"BLOCK_x": -1})
    with pytest.raises(efir.CompileError, match=r"example input 1 \(int\) is not a torch.Tensor"):
        efir.compile(lambda a, k: a * k, (x, 3), quiet=True)


def _tool(name):
    d = os.environ.get("EFIR_BIN_DIR", str(ROOT / "target" / "debug"))
    path = pathlib.Path(d) / name
    if not path.exists():
        pytest.skip(f"{path} is not built")
    return str(path)


GOOD = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  %y = ew.exp %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n"
BAD = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %nope : tensor<4xf32>\n}\n"

# (tool, argv with g.efir valid and b.efir invalid, exit status): 0 ok, 1
# an error in the input (or an output that cannot be written), 2 usage
# (docs/passes.md "Exit status"; issue 30: option values the tools refused
# themselves exited 1, and `efir-translate` without a target 1).
EXIT_CASES = [
    ("efir-opt", ["g.efir"], 0),
    ("efir-opt", ["b.efir"], 1),
    ("efir-opt", ["missing.efir"], 1),
    ("efir-opt", ["g.efir", "-o", "/dev/full"], 1),
    ("efir-opt", ["g.efir", "--bogus"], 2),
    ("efir-opt", ["g.efir", "--compact=threads=100000"], 2),
    ("efir-opt", ["g.efir", "--saturate=time-limit=1e300"], 2),
    ("efir-translate", ["--to-triton", "g.efir"], 0),
    ("efir-translate", ["--to-triton", "b.efir"], 1),
    ("efir-translate", ["--to-triton", "/dev/null"], 1),
    ("efir-translate", ["--to-triton", "g.efir", "-o", "/dev/full"], 1),
    ("efir-translate", ["g.efir"], 2),
    ("efir-translate", ["--to-triton", "g.efir", "--top", "0"], 2),
    ("efir-translate", ["--to-triton", "g.efir", "--top", "-1"], 2),
    ("efir-translate", ["--to-triton", "g.efir", "--bogus"], 2),
    ("efir-run", ["g.efir"], 0),
    ("efir-run", ["--compare", "g.efir", "g.efir"], 0),
    ("efir-run", ["b.efir"], 1),
    ("efir-run", ["g.efir", "--func", "nope"], 1),
    ("efir-run", ["g.efir", "--output-dir", "/dev/null/x"], 1),
    ("efir-run", ["--compare", "g.efir", "g.efir", "--tol", "nan"], 2),
    ("efir-run", ["--compare", "g.efir", "g.efir", "--tol", "-1"], 2),
    ("efir-run", ["--compare", "g.efir", "g.efir", "--trials", "0"], 2),
    ("efir-run", ["--compare", "g.efir"], 2),
    ("efir-run", ["g.efir", "g.efir"], 2),
    ("efir-run", ["g.efir", "--tile", "m"], 2),
    ("efir-run", ["g.efir", "--dim", "n=0"], 2),
    ("efir-run", ["g.efir", "--max-memory", "1X"], 2),
]


def test_tool_exit_codes(tmp_path):
    """Every tool exits 0 on success, 1 on an error in the input or an
    unwritable output, 2 on a usage error, each with an `error:` line."""
    (tmp_path / "g.efir").write_text(GOOD)
    (tmp_path / "b.efir").write_text(BAD)
    wrong = []
    for tool, argv, want in EXIT_CASES:
        r = subprocess.run([_tool(tool), *argv], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        if r.returncode != want or (want and "error" not in r.stderr):
            wrong.append(f"{tool} {' '.join(argv)}: exit {r.returncode}, want {want}: {r.stderr.strip()[-300:]}")
    assert not wrong, "\n".join(wrong)


def test_closed_stdout_is_quiet_for_every_tool(tmp_path):
    """A closed pipe (`efir-opt f | head`) is no error message and no panic
    (a full disk is: test_tool_exit_codes)."""
    (tmp_path / "g.efir").write_text(GOOD)
    for tool, argv in [("efir-opt", ["g.efir"]), ("efir-translate", ["--to-triton", "g.efir"]), ("efir-run", ["g.efir"])]:
        r_fd, w_fd = os.pipe()
        os.close(r_fd)
        r = subprocess.run([_tool(tool), *argv], cwd=tmp_path, stdout=w_fd, stderr=subprocess.PIPE, text=True, timeout=60)
        os.close(w_fd)
        assert "panicked" not in r.stderr and "error" not in r.stderr, (tool, r.returncode, r.stderr)
        assert r.returncode in (0, 1, -13), (tool, r.returncode)


def test_compile_error_code_through_the_binaries(tmp_path, monkeypatch):
    """`CompileError.code` is the first error's code with the binaries too
    (EFIR_NO_NATIVE=1; it was None there)."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python"))
    import importlib

    import efir

    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    monkeypatch.setenv("EFIR_BIN_DIR", str(pathlib.Path(_tool("efir-opt")).parent))
    cmod = importlib.import_module("efir.compile")
    real = cmod.import_program
    monkeypatch.setattr(cmod, "import_program", lambda ep, name: real(ep, name).replace("tensor.matmul", "tensor.bogus"))
    with pytest.raises(efir.CompileError) as ei:
        efir.compile(torch.nn.Linear(8, 4), (torch.randn(2, 8),), quiet=True, workdir=tmp_path)
    assert ei.value.code == "E0202", (ei.value.code, str(ei.value)[:500])


@pytest.mark.parametrize("native", [False, True])
def test_hostile_workdir_and_colliding_parameter_names(tmp_path, monkeypatch, native):
    """A work folder whose name closes the docstring and starts a statement
    stays text in the generated module, and a submodule `l`'s `weight`
    beside a parameter `l_weight` (`%l.weight`, `%l_weight`) are two kernel
    arguments: the compiled function equals PyTorch's (issue 30: the path
    ran as code, the names were one Python identifier)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "python"))
    import ast

    import efir
    from efir import stages

    if native and stages._efir is None:
        pytest.skip("the native module efir._efir is not built")
    if not native:
        monkeypatch.setenv("EFIR_NO_NATIVE", "1")
        monkeypatch.setenv("EFIR_BIN_DIR", str(pathlib.Path(_tool("efir-opt")).parent))
    else:
        monkeypatch.delenv("EFIR_NO_NATIVE", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(8, 8, bias=False)
            self.l_weight = torch.nn.Parameter(torch.randn(8, 8))

        def forward(self, x):
            return self.l(x) @ self.l_weight

    torch.manual_seed(0)
    m, x = M(), torch.randn(4, 8)
    work = tmp_path / 'w"""\nraise SystemExit("injected")\n"""\\x'
    f = efir.compile(m, (x,), quiet=True, workdir=work)
    assert "%l.weight" in (work / "program.efir").read_text() and "%l_weight" in (work / "program.efir").read_text()
    src = (work / "kernels.py").read_text()
    tree = ast.parse(src)
    assert not any(isinstance(n, ast.Raise) and "injected" in ast.unparse(n) for n in ast.walk(tree))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            names = [a.arg for a in node.args.args]
            assert len(names) == len(set(names)), (node.name, names)
    with torch.no_grad():
        want, got = m(x), f(x)
    assert float((got - want).norm() / want.norm()) < 1e-3


def test_parameter_names_the_ir_cannot_spell_and_a_flag_like_workdir(tmp_path, monkeypatch):
    """Parameters registered as `a b`, `é` or `a$b` compile (their names are
    escaped into IR names: the program did not parse, a CompileError), and a
    relative work folder named `-w` is not taken for a flag by the binaries
    (found by the adversarial campaign's hostile-names cases; issue 30)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "python"))
    import efir
    from efir.importer import ir_name

    assert [ir_name(n) for n in ["x", "l.weight", "a b", "é", "a$b", "a$20b", ""]] == ["x", "l.weight", "a$20b", "$c3$a9", "a$24b", "a$2420b", "$"]
    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    monkeypatch.setenv("EFIR_BIN_DIR", str(pathlib.Path(_tool("efir-opt")).parent))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for n in ["a b", "é", "a$b"]:
                self.register_parameter(n, torch.nn.Parameter(torch.randn(8)))

        def forward(self, x):
            return x * getattr(self, "a b") + getattr(self, "é") * getattr(self, "a$b")

    m, x = M(), torch.randn(2, 8)
    f = efir.compile(m, (x,), quiet=True, workdir="-w")
    assert "%a$20b" in (tmp_path / "-w" / "program.efir").read_text()
    with torch.no_grad():
        want, got = m(x), f(x)
    assert float((got - want).norm() / want.norm()) < 1e-3


def test_an_f16_overflowing_reformulation_is_rejected_by_compile(tmp_path, monkeypatch):
    """alg.sum-of-scaled moves a per-row scale out of a sum: sum(s * X) =
    s * sum(X). With X near 30000 the unscaled sum overflows f16 (inf) where
    PyTorch's is 480, and that candidate has the best static estimate
    (`efir-translate --top 1` emits it). `efir.compile` checks the choice
    against PyTorch, rejects it and takes the next (docs/hardening.md 4.2;
    lit Hardening/f16-overflow-candidates.efir is the same with --compare)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "python"))
    import efir

    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    monkeypatch.setenv("EFIR_BIN_DIR", str(pathlib.Path(_tool("efir-opt")).parent))
    monkeypatch.setenv("TRITON_INTERPRET", "1")

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("s", torch.full((4, 1), 0.001, dtype=torch.float16))

        def forward(self, x):
            return (self.s * (x + 30000.0)).sum(-1)

    torch.manual_seed(0)
    m, x = M(), torch.randn(4, 16, dtype=torch.float16)
    f = efir.compile(m, (x,), quiet=True, workdir=tmp_path, candidates=8)
    rejected = f.stats["rejected"]
    assert len(rejected) == 1 and "non-finite values" in rejected[0][1], rejected
    got, want = f(x), m(x)
    assert torch.isfinite(got).all() and float((got.float() - want.float()).norm() / want.float().norm()) < 1e-3
