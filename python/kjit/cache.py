"""The cache, queried and managed in this process through kjit's C ABI (kjit_cache_*): each
returns the document `kjit cache ... --json` prints, parsed."""

from ._native import document, text


def stats():
    """Entries and bytes per tier and target, and the counters summed over every process."""
    return document("cache_stats")


def ls(target=None, template=None):
    """The entries of both tiers: key, tier, target, bytes, template, parameters, path."""
    return document("cache_ls", text(target), text(template))


def verify():
    """{"checked": N, "bad": [...], "manifests_checked": M}: every entry checked (checksum,
    format, key, target), and every header manifest."""
    return document("cache_verify")


def prune(max_size=None, older_than=None):
    """Removes least recently used entries of the user tier: down to `max_size` ("2G"), and those
    unused for `older_than` ("7d"). kjit.BadUsage when neither is given."""
    return document("cache_prune", text(max_size), text(older_than))


def clear():
    return document("cache_clear")
