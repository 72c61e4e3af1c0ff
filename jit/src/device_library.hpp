#pragma once
// The AMD device library: the bitcode (ockl, ocml, oclc_isa_version_*...) that hiprtc links into
// every kernel. comgr embeds a copy, but Debian's comgr 6.4 and 7.2 name the generic targets' files
// so that clang does not find them (docs/ARCHITECTURE.md, "Targets"); the same bitcode on disk,
// from the rocm-device-libs package of comgr's LLVM, works for every target. kjit finds that
// folder and gives it to hiprtc for every compile, so what it compiles does not depend on which
// copy clang would pick, and keys the folder's content.
#include "kjit/error.hpp"
#include "kjit/jit/target.hpp"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

struct DeviceLibrary {
  std::string directory;          // the folder found; empty: none, hiprtc uses comgr's own copy
  std::vector<std::string> files; // its .bc files, sorted
  std::string digest;             // 32 hex digits over the files' names and contents
  // The Debian package of comgr's LLVM ("rocm-device-libs-21") and the folder it installs, where
  // comgr's LLVM is known; what the error for a missing library names.
  std::string package;
  std::string package_directory;
};

// The major version of the LLVM a library links (comgr), from the names of its dependencies
// (DynamicLibrary::needed): 21 from "libLLVM.so.21.1", 15 from "libLLVM-15.so.1".
std::optional<int> llvm_major_version(std::span<const std::string> needed);

// The device library for a comgr built on LLVM `llvm_major`: the folder HIP_DEVICE_LIB_PATH
// names, else KJIT_ROCM_DEVICE_LIB_PATH's, else the rocm-device-libs-<major> package's
// (/usr/lib/llvm-<major>/lib/clang/<major>/amdgcn/bitcode) where it is installed. Throws
// Error(compiler_unavailable) when a variable names a folder that holds no bitcode: the user asked
// for that library.
DeviceLibrary find_device_library(std::optional<int> llvm_major);

// Error(unsupported_target) for compiling `target` (a generic one) without a device library on
// disk: one line naming the package to install.
Error device_library_missing(const DeviceLibrary &library, const Target &target,
                             std::string_view release);

} // namespace kjit::jit
