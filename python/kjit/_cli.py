"""The `kjit` command line, which the package ships next to its library: `python -m kjit` runs
it, and kjit.prebuild's parallel jobs are its worker processes."""

import os
import pathlib
import shutil

from . import _native


def cli_path():
    """KJIT_CLI, else the package's copy, else the source checkout's build, else PATH."""
    explicit = os.environ.get("KJIT_CLI")
    if explicit:
        return explicit
    package = pathlib.Path(__file__).resolve().parent
    for candidate in (package / "_lib" / "kjit",
                      package.parent.parent / "build" / "release" / "tools" / "kjit"):
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("kjit")
    if found:
        return found
    raise _native.LibraryNotFound("kjit: the kjit command was not found (set KJIT_CLI to it)")
