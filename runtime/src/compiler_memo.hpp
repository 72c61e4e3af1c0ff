#pragma once
// A compiler's identity remembered on disk, so that a process whose variants are all cached never
// loads the compiler. Loading NVRTC or hiprtc is a dlopen of a library of about 100 MB just to
// read a version for the key (BENCHMARKS.md, "Evidence behind the code's choices"); ccache faces
// the same question for its compilers and by default answers it from the compiler file's size and
// mtime (compiler_check).
//
// One file per vendor and per way of finding the library:
//   <the tier's compilers directory (kjit/cache/layout.hpp)>/<vendor>-<16 hex>.json
// where the hex is a hash of what steers dlopen's search: the variables naming library
// directories (LD_LIBRARY_PATH, CUDA_HOME, ROCM_PATH...), /etc/ld.so.cache, and the executable
// (its RUNPATH), and the variables naming hiprtc's device library. It holds the identity, the
// names of the code-changing variables, and the path, device, inode, size and mtime of every
// library file the compiler was loaded from and of its data files (Compiler::data_files). It is
// used only while each file still matches and the memo is owned by this user and writable by no one
// else; anything else is a miss, and the compiler is loaded and the memo rewritten.
#include "kjit/cache/disk_store.hpp"
#include "kjit/jit/compiler.hpp"
#include "variant.hpp"

#include <filesystem>
#include <optional>

namespace kjit {

class CompilerMemo {
public:
  // `directory`: the user tier's compilers directory; created 0700 on the first write.
  explicit CompilerMemo(std::filesystem::path directory);

  // The identity the memo holds for `vendor`, with the environment read now; nullopt when there
  // is none or it no longer matches the library files. Never throws.
  std::optional<CompilerIdentity> read(Vendor vendor) const;

  // Remembers `compiler`. Published by rename; a failure is logged at debug level and otherwise
  // ignored (the memo only saves time). Never throws.
  void write(const jit::Compiler &compiler) const;

private:
  std::filesystem::path file(Vendor vendor) const;
  std::filesystem::path directory_;
};

// The identity a prebuilt tier was built with, shipped in it so that a machine with no compiler
// (KJIT_MODE=prebuilt in production) computes the keys of its entries:
//   <the tier's compilers_directory()>/<vendor>.json   {"identity": ..., "environment_variables":
//   [...]}
// Written by `kjit prebuild` (deterministic bytes); throws Error(cache_io) when it cannot be.
void write_tier_identity(const cache::DiskStore &tier, const jit::Compiler &compiler);
// nullopt when the tier holds none for `vendor` or it does not parse. Never throws.
std::optional<CompilerIdentity> read_tier_identity(const cache::DiskStore &tier, Vendor vendor);

} // namespace kjit
