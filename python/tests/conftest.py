"""pytest setup shared by every test module: kernels run under Triton's CPU
interpreter. The modules that run kernels also set TRITON_INTERPRET=1 at
import, but pytest imports every module before running any test, and a module
that imports triton first (through efir's command line, for example) fixes
the mode for all the others; setting it here, before any test module is
imported, keeps the result independent of which files are selected."""

import os

os.environ["TRITON_INTERPRET"] = "1"
