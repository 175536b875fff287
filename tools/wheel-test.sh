#!/usr/bin/env bash
# The wheel as a user installs it: build it (tools/build-wheel.sh: the native
# module and the three tools), pip-install it into a fresh venv (no torch, no
# repository on sys.path or PATH), and check that efir imports, that the
# native module parses and translates a program, that the console scripts
# `efir-opt`, `efir-translate` and `efir-run` are on the venv's PATH and run
# the wheel's binaries (a pipeline of the three, exit codes passed through,
# one clear error when a binary is missing), and that `python -m efir report`
# reads a committed results file. .ci/run calls it after `maturin develop`,
# whose compiled crates the dev-profile build reuses (as do the tools, built
# with tools/test-all.sh's own cargo command), so only the packaging is new
# work.
#
# Usage: tools/wheel-test.sh [PYTHON]  (PYTHON: the interpreter with maturin,
# default $EFIR_PYTHON or python3; the wheel is built for it.
# EFIR_WHEEL_RELEASE=1: test the release wheel, tools/build-wheel.sh --release.)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${1:-${EFIR_PYTHON:-python3}}"
T0=$SECONDS
OUT="$(mktemp -d "${TMPDIR:-/tmp}/efir-wheel.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

REL=()
[ "${EFIR_WHEEL_RELEASE:-}" = 1 ] && REL=(--release)
WHEEL="$(bash tools/build-wheel.sh "${REL[@]}" -o "$OUT/dist" "$PY" | tail -1)"
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
# The console scripts, from the venv's PATH alone (no repository binaries;
# EFIR_BIN_DIR unset): efir-opt | efir-translate, and efir-run on the source.
V="$OUT/venv/bin"
tools_env() { env -u EFIR_BIN_DIR PATH="$V:/usr/bin:/bin" "$@"; }
for t in efir-opt efir-translate efir-run; do
  [ "$(tools_env sh -c "command -v $t")" = "$V/$t" ] || { echo "error: $t is not on the venv's PATH" >&2; exit 1; }
  tools_env "$t" --help | grep -q "Usage: $t" || { echo "error: $t --help did not print its usage" >&2; exit 1; }
done
cp "$OLDPWD/examples/small/gated_mlp.efir" g.efir
tools_env efir-opt g.efir --saturate --compact=max-candidates=2 -o c.efir 2>/dev/null
tools_env efir-translate --to-triton c.efir --top 1 -o k.py
grep -q "^def run(" k.py || { echo "error: efir-translate (console script) wrote no module" >&2; exit 1; }
tools_env efir-opt g.efir --saturate --extract -o x.efir 2>/dev/null
tools_env efir-run g.efir --compare x.efir | grep -q equivalent \
  || { echo "error: efir-run --compare (console script) did not say equivalent" >&2; exit 1; }
# exit statuses are the binaries' own: 1 for a bad input, 2 for usage
printf 'func @f(' >bad.efir
set +e
tools_env efir-opt bad.efir 2>/dev/null; rc1=$?
tools_env efir-translate --no-such-flag 2>/dev/null; rc2=$?
EFIR_BIN_DIR="$OUT/nowhere" PATH="$V:/usr/bin:/bin" efir-run g.efir 2>"$OUT/missing.err"; rc3=$?
set -e
[ "$rc1" = 1 ] && [ "$rc2" = 2 ] || { echo "error: exit codes through the scripts: $rc1 (want 1), $rc2 (want 2)" >&2; exit 1; }
[ "$rc3" = 127 ] && grep -q "^error: \`efir-run\` not found" "$OUT/missing.err" \
  || { echo "error: a missing binary gave exit $rc3: $(cat "$OUT/missing.err")" >&2; exit 1; }
"$V/python" -c 'import efir.tools as t, sys, pathlib; p = pathlib.Path(t.find("efir-opt")); assert p.is_relative_to(sys.prefix), p'
echo "console scripts efir-opt, efir-translate, efir-run: on PATH, run the wheel's binaries"

"$OUT/venv/bin/python" -m efir report "$OLDPWD/bench/results/2026-12-01-s21-h200-b8.json" | grep -q "^rmsnorm_mlp " \
  || { echo "error: python -m efir report from the wheel did not print the table" >&2; exit 1; }
echo "wheel test passed in $((SECONDS - T0)) s"
