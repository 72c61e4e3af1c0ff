"""The cache, as `kjit cache ... --json` reports it (the command's documents, parsed)."""

import json

from . import _cli


def stats():
    """Entries and bytes per tier and target, and the counters summed over every process."""
    return _cli.run_json(["cache", "stats"])


def ls(target=None, template=None):
    """The entries of both tiers: key, tier, target, bytes, template, parameters, path."""
    return _cli.run_json(["cache", "ls", *_cli.flags(target=target, template=template)])


def verify():
    """{"checked": N, "bad": [...]}: every entry checked (checksum, format, key, target)."""
    # Exit 1 means some entry is bad, which the document lists.
    return json.loads(_cli.run(["cache", "verify", "--json"], ok=(0, 1)))


def prune(max_size=None, older_than=None):
    return _cli.run_json(["cache", "prune", *_cli.flags(max_size=max_size, older_than=older_than)])


def clear():
    return _cli.run_json(["cache", "clear"])
