"""loom_nb's test suite.

Compiled bytecode is kept during the suite (in each folder's ``__pycache__``, which git ignores)
even where ``PYTHONDONTWRITEBYTECODE`` asks for none: the suite starts hundreds of Python
processes (kernels, MCP servers, journal workers, the CLI) and its four pytest-xdist workers each
rewrite and compile every test module, so without a cache each of them compiles loom_nb and the
tests from source again. Measured on a 2-core machine: 444 CPU-s and 6 min 8 s for the test
command without the cache, 360 CPU-s and 5 min 36 s with it. Importing this package (which
pytest does before any test module, and so before loom_nb) turns writing back on, here and in
every process the suite starts.
"""

import os
import sys

if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
