"""The `kjit` command line, which the package ships next to its library: `python -m kjit`, the
cache queries and tune/prebuild run it, so that they behave exactly as the command does."""

import json
import os
import pathlib
import shutil
import subprocess

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


def run(args, ok=(0,)):
    """Runs `kjit ARGS`; returns its standard output. A failing exit is kjit.Error carrying the
    command's message (its exit status 2, bad input, is kjit.BadUsage; 1 a failed check)."""
    result = subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True)
    if result.returncode not in ok:
        lines = (result.stderr or result.stdout).strip().splitlines()
        cls = _native.error_class("BadUsage") if result.returncode == 2 else _native.Error
        raise cls(lines[0] if lines else f"kjit {' '.join(args)}: exit {result.returncode}",
                  "\n".join(lines[1:]))
    return result.stdout


def run_json(args):
    return json.loads(run([*args, "--json"]))


def flags(**options):
    """["--max-size", "2G", ...] for each option given (not None); underscores become dashes."""
    return [item for name, value in options.items() if value is not None
            for item in ("--" + name.replace("_", "-"), str(value))]
