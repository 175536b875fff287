"""efir's Python side: the PyTorch importer (`import_program`) and the
end-to-end `compile` (import, saturate, compact, Triton), also registered as
`torch.compile(..., backend="efir")`.

When the package was built with maturin (docs/python.md), the native module
`efir._efir` runs the Rust pipeline in-process (`efir._efir.parse`,
`run_passes`, `to_triton`), `NATIVE` is true and its `EfirError` and
`EfirWarning` are exported here; otherwise `efir.compile` runs the
`efir-opt` and `efir-translate` binaries. The importer and `compile` need
torch; the native module alone does not. `EFIR_LOG=debug|info|warn|error`
prints the `efir` logger's records of that level and above on stderr.
"""

from . import log as _log

_log.configure()  # EFIR_LOG=debug|info|warn|error (efir/log.py)

try:
    from ._efir import EfirError, EfirWarning
except ImportError:  # pure-Python checkout: the Rust stages run as binaries
    NATIVE = False
else:
    NATIVE = True

try:
    from .compile import CompileError, Reuse, compile, register_backend
    from .importer import ImportError_, import_program
except ModuleNotFoundError as _e:
    if _e.name != "torch":
        raise
    _NO_TORCH = str(_e)

    def __getattr__(name):
        if name in ("compile", "CompileError", "Reuse", "register_backend", "import_program", "ImportError_"):
            raise ImportError(f"efir.{name} needs torch ({_NO_TORCH})")
        raise AttributeError(f"module 'efir' has no attribute {name!r}")

else:
    register_backend()

__all__ = ["import_program", "ImportError_", "compile", "CompileError", "Reuse", "register_backend", "NATIVE"]
if NATIVE:
    __all__ += ["EfirError", "EfirWarning"]
