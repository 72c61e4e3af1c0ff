"""`python -m kjit ARGS` runs the `kjit` command line with ARGS."""

import os
import sys

from . import _cli

if __name__ == "__main__":
    try:
        path = _cli.cli_path()
    except _cli._native.Error as error:
        print(error, file=sys.stderr)
        sys.exit(2)
    os.execv(path, [path, *sys.argv[1:]])
