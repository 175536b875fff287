"""The console scripts `efir-opt`, `efir-translate`, `efir-run`
(`efir_cli`, also `efir.tools`): where they find the binaries, that arguments, exit status
and output are the binary's own, and the one error line when a binary is
missing. (tools/wheel-test.sh checks the installed scripts of a real wheel.)"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import efir_cli as tools  # noqa: E402

pytestmark = pytest.mark.skipif(os.name != "posix", reason="fake tools are shell scripts")


def _fake(d, name, body):
    p = d / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(0o755)
    return p


def _script(name, args, env):
    """Run console script `name` as pip's wrapper does: import and call."""
    fn = name.replace("-", "_")
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'python')!r}); from efir_cli import {fn}; {fn}()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=60)


def test_scripts_pass_arguments_output_and_exit_status(tmp_path):
    for name in tools.TOOLS:
        _fake(tmp_path, name, f'echo "{name} got: $*"; echo to-stderr >&2; exit 3\n')
    env = dict(os.environ, EFIR_BIN_DIR=str(tmp_path))
    for name in tools.TOOLS:
        r = _script(name, ["a b", "--flag", "-o", "x.efir"], env)
        assert r.returncode == 3, (name, r)
        assert r.stdout == f"{name} got: a b --flag -o x.efir\n"
        assert r.stderr == "to-stderr\n"


def test_a_script_does_not_import_efir_or_torch():
    code = f"import sys; sys.path.insert(0, {str(ROOT / 'python')!r}); import efir_cli; print(sorted(m for m in ('efir', 'torch') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "[]", r


def test_missing_binary_is_one_error_line_and_127(tmp_path):
    env = dict(os.environ, EFIR_BIN_DIR=str(tmp_path / "nowhere"))
    r = _script("efir-run", ["x.efir"], env)
    assert r.returncode == tools.EXIT_NOT_FOUND == 127
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: `efir-run` not found (looked in "), r.stderr
    assert str(tmp_path / "nowhere") in lines[0]


def test_find_order(tmp_path, monkeypatch):
    # EFIR_BIN_DIR alone when set (a non-executable file there does not count)
    (tmp_path / "efir-opt").write_text("not executable")
    monkeypatch.setenv("EFIR_BIN_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError):
        tools.find("efir-opt")
    _fake(tmp_path, "efir-opt", "exit 0\n")
    assert tools.find("efir-opt") == str(tmp_path / "efir-opt")
    # else the wheel's efir/bin before the checkout's target folders
    monkeypatch.delenv("EFIR_BIN_DIR")
    pkg = tmp_path / "pkg-bin"
    pkg.mkdir()
    monkeypatch.setattr(tools, "PACKAGE_BIN", pkg)
    assert tools.places()[0] == pkg
    assert tools.places()[1:] == [ROOT / "target" / "release", ROOT / "target" / "debug"]
    _fake(pkg, "efir-translate", "exit 0\n")
    assert tools.find("efir-translate") == str(pkg / "efir-translate")
    with pytest.raises(ValueError, match="unknown efir tool"):
        tools.find("efir-nope")


def test_compile_uses_the_same_lookup(tmp_path, monkeypatch):
    pytest.importorskip("torch")  # efir.compile imports torch
    from efir.compile import CompileError, _bin
    from efir.tools import find

    assert find is tools.find

    monkeypatch.setenv("EFIR_BIN_DIR", str(tmp_path))
    with pytest.raises(CompileError, match="`efir-opt` not found"):
        _bin("efir-opt")
    _fake(tmp_path, "efir-opt", "exit 0\n")
    assert _bin("efir-opt") == str(tmp_path / "efir-opt")
