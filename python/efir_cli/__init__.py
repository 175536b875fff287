"""The command-line tools `efir-opt`, `efir-translate` and `efir-run` as the
`efir` wheel's console scripts (pyproject.toml `[project.scripts]`), and
where efir finds their binaries (`efir.tools` is this module). A package of
its own, beside `efir`: a script imports only this, not `efir` (whose import
loads torch and takes seconds).

A wheel built by `tools/wheel-test.sh` (or `tools/build-wheel.sh`) carries the
three binaries in `efir/bin/`; pip installs a console script for each, which
runs the binary with the same arguments (on POSIX by `exec`, so exit status,
signals and standard streams are the binary's own). In a checkout (`maturin
develop`), the scripts run the repository's `target/release` or
`target/debug` binaries. `EFIR_BIN_DIR` overrides both.

A script whose binary is nowhere prints one `error:` line naming the places
it looked and exits with status 127 (the shell's "command not found").
"""

import os
import pathlib
import subprocess
import sys

TOOLS = ("efir-opt", "efir-translate", "efir-run")
EXIT_NOT_FOUND = 127

# The binaries that a wheel carries, in the `efir` package beside this one.
PACKAGE_BIN = pathlib.Path(__file__).resolve().parents[1] / "efir" / "bin"
# The repository, when the package runs from a checkout.
ROOT = pathlib.Path(__file__).resolve().parents[2]


def _exe(name):
    return name + ".exe" if os.name == "nt" else name


def places():
    """The folders searched for the binaries, in order: `$EFIR_BIN_DIR`
    alone when set; else the wheel's `efir/bin`, then the repository's
    `target/release` and `target/debug` (a checkout)."""
    d = os.environ.get("EFIR_BIN_DIR")
    if d:
        return [pathlib.Path(d)]
    out = [PACKAGE_BIN]
    if (ROOT / "Cargo.toml").is_file():
        out += [ROOT / "target" / "release", ROOT / "target" / "debug"]
    return out


def find(name):
    """The path of tool `name`'s binary; FileNotFoundError (saying where it
    looked and how to get it) when none exists."""
    if name not in TOOLS:
        raise ValueError(f"unknown efir tool {name!r} (known: {', '.join(TOOLS)})")
    for d in places():
        p = d / _exe(name)
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    where = ", ".join(str(d) for d in places())
    raise FileNotFoundError(
        f"`{name}` not found (looked in {where}): install a wheel built with the tools "
        "(tools/build-wheel.sh), build them with `cargo build`, or set EFIR_BIN_DIR"
    )


def run(name, args=None):
    """Run tool `name` with `args` (default: this process's arguments);
    returns its exit status, or replaces this process by it on POSIX."""
    args = sys.argv[1:] if args is None else list(args)
    try:
        path = find(name)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if os.name == "posix":
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(path, [name, *args])
    return subprocess.call([path, *args])


def efir_opt():
    """Console script `efir-opt`."""
    sys.exit(run("efir-opt"))


def efir_translate():
    """Console script `efir-translate`."""
    sys.exit(run("efir-translate"))


def efir_run():
    """Console script `efir-run`."""
    sys.exit(run("efir-run"))
