"""The cache, as `kjit cache ... --json` reports it (the command's documents, parsed)."""

import json

from . import _cli


def stats():
    """Entries and bytes per tier and target, and the counters summed over every process."""
    return _cli.run_json(["cache", "stats"])


def ls(target=None, template=None):
    """The entries of both tiers: key, tier, target, bytes, template, parameters, path."""
    args = ["cache", "ls"]
    if target:
        args += ["--target", target]
    if template:
        args += ["--template", template]
    return _cli.run_json(args)


def verify():
    """{"checked": N, "bad": [...]}: every entry checked (checksum, format, key, target)."""
    # Exit 1 means some entry is bad, which the document lists.
    return json.loads(_cli.run(["cache", "verify", "--json"], ok=(0, 1)))


def prune(max_size=None, older_than=None):
    args = ["cache", "prune"]
    if max_size:
        args += ["--max-size", max_size]
    if older_than:
        args += ["--older-than", older_than]
    return _cli.run_json(args)


def clear():
    return _cli.run_json(["cache", "clear"])
