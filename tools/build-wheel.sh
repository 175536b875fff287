#!/usr/bin/env bash
# Build the `efir` wheel with the command-line tools inside: cargo builds
# efir-opt, efir-translate and efir-run, their binaries are staged in
# python/efir/bin (ignored by git; pyproject.toml includes it in the wheel)
# for `maturin build` and removed afterwards. pip then installs the console
# scripts `efir-opt`, `efir-translate`, `efir-run` (efir/tools.py), which run
# those binaries.
#
# Usage: tools/build-wheel.sh [--release] [-o DIR] [PYTHON]
#   --release  optimized tools and extension (what to give users); default:
#              the dev profile, which reuses the crates that `maturin
#              develop` and `cargo build --workspace --bins` compiled (CI)
#   -o DIR     where the wheel goes (default target/wheels)
#   PYTHON     the interpreter the wheel is for, with maturin beside it
#              (default $EFIR_PYTHON or python3)
# Prints the wheel's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
RELEASE=() OUTDIR=target/wheels PY="${EFIR_PYTHON:-python3}"
while [ $# -gt 0 ]; do
  case "$1" in
    --release) RELEASE=(--release); shift ;;
    -o) OUTDIR="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) PY="$1"; shift ;;
  esac
done
MATURIN="$(dirname "$PY")/maturin"
[ -x "$MATURIN" ] || MATURIN=maturin
TOOLS=(efir-opt efir-translate efir-run)

if [ ${#RELEASE[@]} -gt 0 ]; then
  cargo build -q --release -p efir-opt -p efir-translate -p efir-run
  BIN=target/release
else
  # the same command as tools/test-all.sh, so that CI builds the tools once
  cargo build -q --workspace --bins
  BIN=target/debug
fi

STAGE=python/efir/bin
[ -e "$STAGE" ] && { echo "error: $STAGE exists (another build-wheel.sh running, or one that was killed? remove it)" >&2; exit 1; }
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"
for t in "${TOOLS[@]}"; do
  cp "$BIN/$t" "$STAGE/$t"
  # debug info is most of a binary's size; the wheel does not need it
  if command -v strip >/dev/null; then strip "$STAGE/$t"; fi
done

mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
LOG="$(mktemp)"
if ! PYO3_PYTHON="$PY" "$MATURIN" build -q "${RELEASE[@]}" --strip --interpreter "$PY" -o "$OUTDIR" >"$LOG" 2>&1; then
  cat "$LOG" >&2; rm -f "$LOG"; exit 1
fi
WHEEL="$(sed -n 's/.*Built wheel .* to \(.*\.whl\).*/\1/p' "$LOG" | tail -1)"
rm -f "$LOG"
[ -n "$WHEEL" ] && [ -f "$WHEEL" ] || { echo "error: maturin did not say where it wrote the wheel" >&2; exit 1; }
for t in "${TOOLS[@]}"; do
  "$PY" -c 'import sys, zipfile; n = set(zipfile.ZipFile(sys.argv[1]).namelist()); sys.exit(f"efir/bin/{sys.argv[2]}" not in n)' "$WHEEL" "$t" \
    || { echo "error: $WHEEL lacks efir/bin/$t" >&2; exit 1; }
done
echo "$WHEEL"
