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
# EFIR_PYTHON: a Python with numpy and pytest, and torch and triton for the
# generated-kernel tests (.ci/run sets it to its cached venv).
"${EFIR_PYTHON:-python3}" -m pytest -q python/tests

echo
echo "All tests passed."
