"""pytest setup shared by every test module: kernels run under Triton's CPU
interpreter. The modules that run kernels also set TRITON_INTERPRET=1 at
import, but pytest imports every module before running any test, and a module
that imports triton first (through efir's command line, for example) fixes
the mode for all the others; setting it here, before any test module is
imported, keeps the result independent of which files are selected.

Fixture `backend_calls`: what the torch.compile backend compiles and runs
(test_backend_partial.py, test_backend_shapes.py)."""

import collections
import os
import pathlib
import sys

import pytest

os.environ["TRITON_INTERPRET"] = "1"

ROOT = pathlib.Path(__file__).resolve().parents[2]

# One `efir.compile` that the backend made: the module or graph compiled, the
# shapes of its example inputs, its keyword arguments, whether it succeeded.
Compile = collections.namedtuple("Compile", "module shapes kwargs ok")


class BackendCalls:
    """`compiles`: every `efir.compile` made (`Compile`), in order; `runs`:
    how often the callables they returned ran."""

    def __init__(self):
        self.compiles = []
        self.runs = 0

    def __repr__(self):
        return f"BackendCalls(runs={self.runs}, compiles={[(c.shapes, c.ok) for c in self.compiles]})"


@pytest.fixture
def backend_calls(monkeypatch):
    """Spy on `efir.compile` as the torch.compile backend calls it (a
    `BackendCalls`), with nothing built before (a fresh `efir.Reuse` for the
    backend's programs) and torch._dynamo reset before and after."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "python"))
    import efir  # noqa: F401 (registers the backend)

    C = sys.modules["efir.compile"]
    calls = BackendCalls()
    real = C.compile

    def spy(m, inputs, **kw):
        shapes = tuple(tuple(x.shape) for x in inputs)
        try:
            fn = real(m, inputs, **kw)
        except Exception:
            calls.compiles.append(Compile(m, shapes, kw, False))
            raise
        calls.compiles.append(Compile(m, shapes, kw, True))

        def counted(*a):
            calls.runs += 1
            return fn(*a)

        for k, v in vars(fn).items():  # report(), stats, module, ...
            setattr(counted, k, v)
        return counted

    monkeypatch.setattr(C, "compile", spy)
    monkeypatch.setattr(C, "_BUILT", C.Reuse())
    torch._dynamo.reset()
    yield calls
    torch._dynamo.reset()
