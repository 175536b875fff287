"""What a case is (`Case`), what running it gave (`Res`), and the names
every module shares: the outcomes, the tools, the repository."""

import dataclasses
import pathlib
import sys


ROOT = pathlib.Path(__file__).resolve().parents[3]
OUTCOMES = ["clean", "success", "panic", "crash", "hang", "wrong", "injection"]
TOOLS = ["efir-opt", "efir-translate", "efir-run", "python"]
PY = sys.executable


@dataclasses.dataclass
class Case:
    tool: str  # efir-opt, efir-translate, efir-run, python
    cat: str
    name: str
    argv: list  # after the tool's path; for python: after the interpreter
    files: dict = dataclasses.field(default_factory=dict)  # name -> bytes|str, written in the case dir
    stdin: bytes = b""
    env: dict = dataclasses.field(default_factory=dict)  # None value: unset
    timeout: float = 30.0
    expect: str = "any"  # ok, error, any
    stdout: str = "pipe"  # pipe, closed, devfull
    check: object = None  # f(case, res, dir) -> None | (outcome, note)
    check_rc: tuple = (0,)  # the exit codes at which `check` runs


@dataclasses.dataclass
class Res:
    rc: int
    out: bytes
    err: bytes
    secs: float
    timed_out: bool
