# -*- Python -*-
# The lit configuration of efir's FileCheck tests. Run from the repository
# root, after `cargo build`:
#
#   lit -v lit-tests
#
# Environment:
#   EFIR_BIN_DIR  directory holding `efir-opt` (default: <repo>/target/debug)
#   FILECHECK     the FileCheck binary (default: /usr/lib/llvm-22/bin/FileCheck)

import os

import lit.formats

config.name = "efir"
config.suffixes = [".efir"]
# `RUN:` lines run in lit's internal shell, which provides `not`, pipes and
# redirections on every platform without a POSIX shell.
config.test_format = lit.formats.ShTest(execute_external=False)

config.test_source_root = os.path.dirname(os.path.abspath(__file__))
# Temporary files (`%t`) go to `Output/` directories next to the tests
# (ignored by git and by the corpus walk of `crates/driver/tests`).
config.test_exec_root = config.test_source_root

# Files that tests read but that are not tests themselves.
config.excludes = ["Inputs"]

repo_root = os.path.dirname(config.test_source_root)
bin_dir = os.environ.get("EFIR_BIN_DIR", os.path.join(repo_root, "target", "debug"))
efir_opt = os.path.join(bin_dir, "efir-opt")
efir_run = os.path.join(bin_dir, "efir-run")
# EFIR_TRANSLATE: an efir-translate of another build (the `mlir` feature's).
efir_translate = os.environ.get("EFIR_TRANSLATE", os.path.join(bin_dir, "efir-translate"))
filecheck = os.environ.get("FILECHECK", "/usr/lib/llvm-22/bin/FileCheck")

for tool, path in [
    ("efir-opt", efir_opt),
    ("efir-run", efir_run),
    ("efir-translate", efir_translate),
    ("FileCheck", filecheck),
]:
    if not os.path.exists(path):
        lit_config.fatal(f"{tool} not found at {path} (build first, or set the environment)")

# `REQUIRES: mlir` tests (lit-tests/TTIR) run where efir-translate has --to-ttir.
import subprocess

if "mlir" in subprocess.run([efir_translate, "--print-features"], capture_output=True, text=True).stdout.split():
    config.available_features.add("mlir")

# Replace the tool names only where they stand alone as a command word, so
# that paths such as `%s` for `Tools/efir-opt.efir` are left alone.
config.substitutions.append((r"(?<![-\w/.])efir-opt(?![-\w.])", efir_opt))
config.substitutions.append((r"(?<![-\w/.])efir-run(?![-\w.])", efir_run))
config.substitutions.append((r"(?<![-\w/.])efir-translate(?![-\w.])", efir_translate))
config.substitutions.append((r"(?<![-\w/.])FileCheck(?![-\w.])", filecheck))
# The repository's examples, for tests that derive from them.
config.substitutions.append(("%examples", os.path.join(repo_root, "examples")))
