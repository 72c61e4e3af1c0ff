# Sourced by tools/gpu-check and tools/test: copies the shared libraries that kjit's binaries link
# and that another machine or root filesystem lacks.

# Libraries every Linux image has (glibc's parts and the dynamic loader), never bundled.
is_system_library() {
  case "$1" in
  linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
    librt.so.* | libresolv.so.* | libutil.so.*) return 0 ;;
  *) return 1 ;;
  esac
}

# bundle_shared_libraries LIB FALLBACK ROOT BINARY...: copies each library that a BINARY links
# (as this machine's loader resolves it) into LIB, libstdc++ and libgcc_s into FALLBACK. Skipped:
# the system libraries, those already in LIB or FALLBACK, and, when ROOT is not empty, those that
# the root filesystem ROOT has under the same soname.
bundle_shared_libraries() {
  local lib=$1 fallback=$2 root=$3
  shift 3
  local binary line name path
  for binary in "$@"; do
    [[ -f $binary ]] || continue
    while read -r line; do
      # "libfmt.so.9 => /lib/x86_64-linux-gnu/libfmt.so.9 (0x...)"
      [[ $line == *" => /"* ]] || continue
      name=${line%% *}
      path=${line#*=> }
      path=${path%% (*}
      is_system_library "$name" && continue
      [[ -e $lib/$name || -e $fallback/$name ]] && continue
      if [[ -n $root ]] && [[ -e $root/usr/lib/x86_64-linux-gnu/$name || -e $root/lib/x86_64-linux-gnu/$name ]]; then
        continue
      fi
      case "$name" in
      libstdc++.so.* | libgcc_s.so.*) cp -L "$path" "$fallback/$name" ;;
      *) cp -L "$path" "$lib/$name" ;;
      esac
    done < <(ldd "$binary")
  done
}
