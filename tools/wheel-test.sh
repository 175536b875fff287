#!/usr/bin/env bash
# The wheel as a user installs it: build it with maturin, pip-install it into
# a fresh venv (no torch, no repository on sys.path), and check that efir
# imports, that the native module parses and translates a program, and that
# `python -m efir report` reads a committed results file. .ci/run calls it
# after `maturin develop`, whose compiled crates `maturin build` reuses (same
# profile and features), so only the packaging is new work.
#
# Usage: tools/wheel-test.sh [PYTHON]  (PYTHON: the interpreter with maturin,
# default $EFIR_PYTHON or python3; the wheel is built for it.)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-${EFIR_PYTHON:-python3}}"
MATURIN="$(dirname "$PY")/maturin"
[ -x "$MATURIN" ] || MATURIN=maturin
T0=$SECONDS
OUT="$(mktemp -d "${TMPDIR:-/tmp}/efir-wheel.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

PYO3_PYTHON="$PY" "$MATURIN" build -q --strip --interpreter "$PY" -o "$OUT/dist"
WHEEL="$(ls "$OUT"/dist/efir-*.whl)"
echo "built $(basename "$WHEEL") ($(du -h "$WHEEL" | cut -f1)) in $((SECONDS - T0)) s"

# A venv of the same interpreter, without the build venv's packages.
"$PY" -m venv --without-pip "$OUT/venv" 2>/dev/null || "$PY" -m venv "$OUT/venv"
# pip from the build interpreter installs into the new venv (--prefix would
# not set the venv's paths; --python does, pip >= 22.3).
"$PY" -m pip --python "$OUT/venv/bin/python" install -q --no-index --no-deps "$WHEEL"

cd "$OUT"   # not the repository: efir must come from the wheel
"$OUT/venv/bin/python" - "$OLDPWD" <<'PYEOF'
import pathlib, sys
repo = pathlib.Path(sys.argv[1])
import warnings
import efir, efir._efir as n
warnings.simplefilter("ignore", n.EfirWarning)  # E0706: the candidate limit below is reached, as intended
assert pathlib.Path(efir.__file__).is_relative_to(pathlib.Path(sys.prefix)), efir.__file__
assert efir.NATIVE, "the wheel's efir has no native module"
text = (repo / "examples/small/gated_mlp.efir").read_text()
out = n.run_passes(text, ["--saturate", "--compact=max-candidates=2"], filename="gated_mlp.efir")
(name, source), = n.to_triton(out, top=1)
assert "def run(" in source and name.startswith("gated_mlp"), name
try:
    n.parse("func @f(", filename="bad.efir")
except n.EfirError as e:
    assert e.code and "bad.efir" in str(e), str(e)
else:
    raise AssertionError("a syntax error was not an EfirError")
try:
    efir.compile
except ImportError as e:
    assert "needs torch" in str(e), str(e)
print(f"efir {n.__version__} from the wheel: parse, passes and to_triton work ({name})")
PYEOF
"$OUT/venv/bin/python" -m efir report "$OLDPWD/bench/results/2026-12-01-s21-h200-b8.json" | grep -q "^rmsnorm_mlp " \
  || { echo "error: python -m efir report from the wheel did not print the table" >&2; exit 1; }
echo "wheel test passed in $((SECONDS - T0)) s"
