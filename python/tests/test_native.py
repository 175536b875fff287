"""The native module `efir._efir` (crates/python, built by maturin): parse
and print, diagnostics as EfirError, run_passes, to_triton, and efir.compile
going through it. Skipped when the extension is not built, unless
EFIR_REQUIRE_NATIVE=1 (CI), where a missing extension fails."""

import importlib
import os
import pathlib
import random
import subprocess
import sys
import warnings

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

try:
    from efir import _efir
except ImportError:  # pragma: no cover
    if os.environ.get("EFIR_REQUIRE_NATIVE") == "1":
        raise
    pytest.skip("efir._efir is not built (maturin develop; docs/python.md)", allow_module_level=True)

import efir  # noqa: E402

SMALL = sorted((ROOT / "examples" / "small").glob("*.efir"))
GATED = (ROOT / "examples" / "small" / "gated_mlp.efir").read_text()

# One program that the Triton lowering refuses (E0801, pinned by
# lit-tests/Translate/errors.efir too) and one that it accepts.
MERGE = """func @merge(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<8xf32> {
  %xp = par.partition<1, @k> %x : tensor<2x8xf32, @k: part(1)>
  %wp = par.partition<0, @k> %w : tensor<8x4xf32, @k: part(0)>
  %m = tile.matmul %xp, %wp : tensor<2x4xf32, @k: partial(#red.sum)>
  %r = tensor.reshape %m : tensor<8xf32, @k: partial(#red.sum)>
  %s = par.reduce<#red.sum, @k> %r : tensor<8xf32>
  return %s : tensor<8xf32>
}
"""
OK = """func @ok(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = ew.exp %x : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}
"""


def _bin(name):
    d = pathlib.Path(os.environ.get("EFIR_BIN_DIR", ROOT / "target" / "debug"))
    return d / name if (d / name).exists() else None


def test_module_surface():
    assert efir.NATIVE is True
    assert efir.EfirError is _efir.EfirError
    assert issubclass(_efir.EfirError, Exception) and _efir.EfirError.__module__ == "efir._efir"
    assert issubclass(_efir.EfirWarning, UserWarning)
    assert {"canonicalize", "saturate", "compact"} <= {n for n, _ in _efir.passes()}


@pytest.mark.parametrize("path", SMALL, ids=[p.stem for p in SMALL])
def test_parse_print_round_trip(path):
    printed = _efir.parse(path.read_text(), filename=str(path))
    assert f"func @{path.stem}(" in printed
    assert _efir.parse(printed) == printed
    generic = _efir.parse(printed, generic=True)
    assert generic != printed and _efir.parse(generic) == printed


def test_parse_matches_efir_opt():
    opt = _bin("efir-opt")
    if opt is None:
        pytest.skip("efir-opt is not built")
    path = ROOT / "examples" / "small" / "attn_prefill.efir"
    out = subprocess.run([str(opt), str(path)], capture_output=True, text=True, check=True).stdout
    assert _efir.parse(path.read_text()) == out


def test_syntax_error_is_efir_error_with_code_line_and_caret():
    src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x %x : tensor<4xf32>\n}\n"
    with pytest.raises(_efir.EfirError) as ei:
        _efir.parse(src, filename="bad.efir")
    e = ei.value
    msg = str(e)
    assert msg.startswith("error[E0101]: "), msg
    assert e.code == "E0101" and e.codes == ["E0101"]
    assert "bad.efir:2:13" in msg
    assert "2 │   return %x %x : tensor<4xf32>" in msg
    lines = msg.splitlines()
    at = next(i for i, l in enumerate(lines) if "return %x %x" in l)
    assert lines[at + 1].index("^") == lines[at].index("%x %x") + 3  # the caret under the second %x
    assert (e.filename, e.line, e.column) == ("bad.efir", 2, 13)
    assert e.diagnostics[0][:2] == ("error", "E0101") and e.internal is False
    assert "\x1b[" not in msg  # no color


def test_verifier_error_is_efir_error():
    src = GATED.replace("%u = tensor.matmul %x, %w2", "%u = tensor.matmul %x, %nope")
    with pytest.raises(_efir.EfirError) as ei:
        _efir.parse(src, filename="gated_mlp.efir")
    e = ei.value
    line = next(i for i, l in enumerate(src.splitlines(), 1) if "%nope" in l)
    assert e.code == "E0201", str(e)
    assert e.line == line
    assert f"gated_mlp.efir:{line}:" in str(e)
    assert "%u = tensor.matmul %x, %nope" in str(e) and "^^^^^" in str(e)


def test_all_errors_of_a_file_are_reported():
    src = GATED.replace("%w1 :", "%nope1 :").replace("%w2 :", "%nope2 :").replace("ew.sigmoid", "ew.bogus")
    with pytest.raises(_efir.EfirError) as ei:
        _efir.parse(src)
    assert len(ei.value.codes) >= 2, ei.value.codes
    assert str(ei.value).count("error[") == len(ei.value.codes)


def test_run_passes_saturate_compact_gives_candidates():
    with pytest.warns(_efir.EfirWarning, match=r"E0706.*max-candidates"):
        cands = _efir.run_passes(GATED, ["--saturate", "--compact=max-candidates=3"], filename="gated_mlp.efir")
    funcs = [l.split("(")[0] for l in cands.splitlines() if l.startswith("func @gated_mlp.c")]
    assert funcs == ["func @gated_mlp.c0", "func @gated_mlp.c1", "func @gated_mlp.c2"]
    assert "source = @gated_mlp" in cands
    assert _efir.parse(cands) == cands  # the candidates are a valid module
    # canonicalize alone keeps the one program
    assert _efir.run_passes(GATED, ["--canonicalize"]).count("func @") == 1


def test_run_passes_bad_flags():
    with pytest.raises(_efir.EfirError, match=r"unknown pass `--bogus`") as ei:
        _efir.run_passes(GATED, ["--bogus"])
    assert ei.value.code is None and ei.value.line is None
    with pytest.raises(_efir.EfirError, match=r"^--compact: "):
        _efir.run_passes(GATED, ["--compact=no-such-option=1"])
    with pytest.raises(_efir.EfirError, match="expected a pass flag"):
        _efir.run_passes(GATED, ["saturate"])
    with pytest.raises(TypeError):
        _efir.run_passes(GATED, "--saturate")  # a str is not a list of flags


def test_to_triton_returns_python_modules():
    with pytest.warns(_efir.EfirWarning, match="E0706"):
        cands = _efir.run_passes(GATED, ["--saturate", "--compact=max-candidates=2"])
    progs = _efir.to_triton(cands, filename="cands.efir")
    assert [n for n, _ in progs] == ["gated_mlp.c0", "gated_mlp.c1"]
    for name, src in progs:
        compile(src, f"{name}.py", "exec")
        assert "@triton.jit" in src and "def run(" in src and "cands.efir" in src
    (best,) = _efir.to_triton(cands, top=1)
    assert best[0] in {n for n, _ in progs}
    assert [n for n, _ in _efir.to_triton(cands, func="@gated_mlp.c1")] == ["gated_mlp.c1"]
    with pytest.raises(_efir.EfirError, match=r"no program `@missing`"):
        _efir.to_triton(cands, func="missing")


def test_to_triton_unsupported_programs():
    with pytest.raises(_efir.EfirError) as ei:
        _efir.to_triton(MERGE + OK, filename="m.efir")
    assert ei.value.code == "E0801" and ei.value.line == 1
    assert "cannot lower `@merge` to Triton" in str(ei.value)
    with pytest.warns(_efir.EfirWarning, match="cannot lower `@merge`"):
        progs = _efir.to_triton(MERGE + OK, skip_unsupported=True)
    assert [n for n, _ in progs] == ["ok"]
    # Skipped under top=1 but nothing else lowers: an error naming the reason.
    with pytest.raises(_efir.EfirError, match=r"^error\[E0801\]: cannot lower `@merge` to Triton") as ei:
        _efir.to_triton(MERGE, filename="m.efir", top=1)
    assert ei.value.code == "E0801"


def test_mangled_inputs_never_panic():
    rng = random.Random(7)
    seen = 0
    for path in SMALL:
        text = path.read_text()
        for _ in range(25):
            i = rng.randrange(len(text))
            for bad in (
                text[:i],
                text[:i] + rng.choice(["}", "%", "@", "<", ":", "tensor<", "0x", "\x00", "é", "\n"]) + text[i + 1 :],
                text[:i] + text[i + rng.randrange(1, 30) :],
            ):
                for fn in (_efir.parse, lambda t: _efir.to_triton(t, skip_unsupported=True)):
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", _efir.EfirWarning)
                            fn(bad)
                    except _efir.EfirError as e:
                        assert not e.internal, str(e)
                        seen += 1
    assert seen > 100


# efir.compile needs torch and triton (TRITON_INTERPRET=1 runs the kernels
# on the CPU).
try:
    import torch
    import triton  # noqa: F401
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None and os.environ.get("EFIR_REQUIRE_TRITON") != "1", reason="torch and triton are not installed")


def _gated():
    class GatedMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Linear(32, 32, bias=False)
            self.w2 = torch.nn.Linear(32, 32, bias=False)

        def forward(self, x):
            return torch.nn.functional.silu(self.w1(x)) * self.w2(x)

    torch.manual_seed(0)
    return GatedMLP().half(), torch.randn(2, 32).half()


def _rel(out, ref):
    return ((out.double() - ref).norm() / ref.norm()).item()


def _compile_gated_and_check(tmp_path, native):
    m, x = _gated()
    f = efir.compile(m, (x,), quiet=True, workdir=tmp_path)
    assert f.native is native
    out = f(x)
    with torch.no_grad():
        ref = m.double()(x.double())  # converts m in place: after f ran
    assert _rel(out, ref) <= 1e-2


@needs_torch
def test_compile_goes_through_native(tmp_path):
    _compile_gated_and_check(tmp_path, native=True)
    # the intermediate files are written as with the binaries
    assert "func @program.c0" in (tmp_path / "cands.efir").read_text()
    assert "def run(" in (tmp_path / "kernels.py").read_text()


@needs_torch
def test_compile_falls_back_to_binaries(tmp_path, monkeypatch):
    if _bin("efir-opt") is None or _bin("efir-translate") is None:
        pytest.skip("the efir-opt and efir-translate binaries are not built")
    monkeypatch.setenv("EFIR_BIN_DIR", str(_bin("efir-opt").parent))
    monkeypatch.setenv("EFIR_NO_NATIVE", "1")
    _compile_gated_and_check(tmp_path, native=False)


@needs_torch
def test_pipeline_error_is_compile_error_with_diagnostic(tmp_path, monkeypatch):
    # An imported program that does not verify (as an importer bug would
    # produce) fails in the native saturate stage with E0202.
    cmod = importlib.import_module("efir.compile")
    real = cmod.import_program
    monkeypatch.setattr(cmod, "import_program", lambda ep, name: real(ep, name).replace("ew.sigmoid", "ew.bogus"))
    m, x = _gated()
    with pytest.raises(efir.CompileError) as ei:
        efir.compile(m, (x,), quiet=True, workdir=tmp_path)
    e = ei.value
    assert isinstance(e.__cause__, _efir.EfirError)
    assert e.code == "E0202"
    first = str(e).splitlines()[0]
    assert first.startswith(f"efir-opt --saturate --compact=max-candidates={cmod.CANDIDATES} failed: error[E0202]: "), first
    assert "program.efir:" in e.diagnostic and "ew.bogus" in e.diagnostic and "^" in e.diagnostic
    assert e.diagnostic in str(e)


@needs_torch
def test_unlowerable_program_is_compile_error(tmp_path):
    # Every candidate returns an input unchanged (a copy), which the Triton
    # lowering refuses (E0801).
    with pytest.raises(efir.CompileError) as ei:
        efir.compile(lambda x: (x.clone(), torch.exp(x)), (torch.randn(2, 8),), quiet=True, workdir=tmp_path)
    e = ei.value
    assert e.code == "E0801"
    assert "cannot lower `@program.c0` to Triton" in str(e).splitlines()[0]
    assert "cannot lower `@program.c0` to Triton" in e.diagnostic


def test_efir_log_shows_the_passes_debug_events_in_process():
    """The native module installs the tools' `tracing` setup (stderr,
    `EFIR_LOG` levels): `EFIR_LOG=debug` shows compaction's phases in a
    Python process as with efir-opt; by default nothing is printed."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from efir import _efir; "
        "_efir.run_passes(open(sys.argv[2]).read(), ['--saturate', '--compact=max-candidates=2'])"
    )
    args = [sys.executable, "-c", code, str(ROOT / "python"), str(SMALL[0])]
    env = {k: v for k, v in os.environ.items() if k not in ("EFIR_LOG", "EFIR_PROGRESS")}
    quiet = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "compact:" not in quiet.stderr
    loud = subprocess.run(args, capture_output=True, text=True, env={**env, "EFIR_LOG": "debug"}, timeout=300)
    assert loud.returncode == 0, loud.stderr
    assert "compact: candidate graph indexed" in loud.stderr and "compact: enumerated" in loud.stderr, loud.stderr
