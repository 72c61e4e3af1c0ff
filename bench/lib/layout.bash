# Sourced by the benchmark scripts that look inside a tier: where its files are, as `kjit cache
# stats --json` reports the layout (cache/internal/kjit/cache/layout.hpp), never spelled here.

# kjit_layout KJIT ROOT FIELD: prints FIELD of the layout of the tier at ROOT
# ("version_directory", "compilers_directory", ...).
kjit_layout() {
  KJIT_CACHE_DIR=$2 "$1" cache stats --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['layout']['user']['$3'])"
}

# kjit_remote_entry_prefix KJIT ROOT: what every entry's name on a remote starts with
# ("kjit/entry/v2/"), asked with the tier at ROOT.
kjit_remote_entry_prefix() {
  KJIT_CACHE_DIR=$2 "$1" cache stats --json |
    python3 -c "import json, sys; print(json.load(sys.stdin)['layout']['remote_entry_prefix'])"
}
