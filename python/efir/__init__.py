"""efir's Python side. Today: the PyTorch importer (`import_program`)."""

from .importer import ImportError_, import_program

__all__ = ["import_program", "ImportError_"]
