"""Where efir finds the binaries of `efir-opt`, `efir-translate` and
`efir-run`, and the console scripts that run them: the package `efir_cli`
(beside `efir`, so that a script does not import torch), under this name."""

from efir_cli import EXIT_NOT_FOUND, PACKAGE_BIN, TOOLS, efir_opt, efir_run, efir_translate, find, places, run  # noqa: F401
