#!/usr/bin/env bash
# The test command (README): formatting, lints, unit and integration tests,
# the lit/FileCheck suite, the Python tests. `.ci/run` installs what this needs first.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test"
cargo test --workspace

step "FileCheck directives without a colon"
if grep -rnE '(//|#)\s*CHECK(-[A-Z]+)?\s' lit-tests | grep -vE 'CHECK(-[A-Z]+)?:'; then
  echo "error: the FileCheck directives above lack their colon and would be ignored" >&2
  exit 1
fi

step "lit"
cargo build --workspace --bins
export EFIR_BIN_DIR="$PWD/target/debug"
lit -sv lit-tests

step "Python tests"
# EFIR_PYTHON: a Python with numpy and pytest, torch and triton for the
# generated-kernel tests, and the native module efir._efir built into it by
# `maturin develop` (.ci/run sets it to its cached venv, builds the module and
# sets EFIR_REQUIRE_NATIVE=1; without the module the native tests are skipped).
PY="${EFIR_PYTHON:-python3}"
if [ "${EFIR_REQUIRE_NATIVE:-}" = 1 ]; then
  "$PY" -c 'import sys; sys.path.insert(0, "python"); import efir._efir' \
    || { echo "error: EFIR_REQUIRE_NATIVE=1 but efir._efir does not import with $PY (run maturin develop, docs/python.md)" >&2; exit 1; }
fi
"$PY" -m pytest -q python/tests

echo
echo "All tests passed."
