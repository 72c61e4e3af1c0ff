# user_tier_totals KJIT: "ENTRIES BYTES" of the user tier (KJIT_CACHE_DIR), as `KJIT cache stats
# --json` counts them. Scripts ask kjit instead of counting files, so that none of them names the
# cache directory's layout (its format version among it).
user_tier_totals() {
  "$1" cache stats --json | python3 -c '
import json, sys
rows = [row for row in json.load(sys.stdin)["tiers"] if row["tier"] == "user"]
print(sum(row["entries"] for row in rows), sum(row["bytes"] for row in rows))'
}
