"""efir's Python side: the PyTorch importer (`import_program`) and the
end-to-end `compile` (import, saturate, compact, Triton), also registered as
`torch.compile(..., backend="efir")`."""

from .compile import CompileError, compile, register_backend
from .importer import ImportError_, import_program

register_backend()

__all__ = ["import_program", "ImportError_", "compile", "CompileError", "register_backend"]
