# require_mmdebstrap NAME: installs mmdebstrap when missing. tools/fresh-root-check and
# tools/rocm-root both need it and .ci/run starts them at the same time on a new machine, so the
# install holds a lock: two apt-gets at once would fail on dpkg's own lock.
require_mmdebstrap() {
  command -v mmdebstrap >/dev/null && return 0
  (
    flock 9
    command -v mmdebstrap >/dev/null && exit 0
    echo "$1: installing mmdebstrap" >&2
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2
  ) 9>/var/lock/kjit-mmdebstrap.lock
}
