#include "device_library.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <system_error>
#include <xxhash.h>

namespace kjit::jit {
namespace {

// The .bc files directly in `directory`, sorted; empty when it cannot be read.
std::vector<std::string> bitcode_files(const std::string &directory) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto &item : std::filesystem::directory_iterator(directory, error))
    if (item.path().extension() == ".bc" && item.is_regular_file(error))
      files.push_back(item.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// XXH3-128 over each file's name, size and content, in order, as 32 hex digits. A file that
// cannot be read is hashed as absent, so that the digest still changes when it is fixed.
std::string digest_of(const std::vector<std::string> &files) {
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> state(XXH3_createState(),
                                                                 &XXH3_freeState);
  XXH3_128bits_reset(state.get());
  for (const std::string &file : files) {
    const std::string name = std::filesystem::path(file).filename().string() + '\n';
    XXH3_128bits_update(state.get(), name.data(), name.size());
    std::ifstream in(file, std::ios::binary);
    const std::string content{std::istreambuf_iterator<char>(in), {}};
    const std::string size = std::to_string(in.is_open() ? content.size() : SIZE_MAX) + '\n';
    XXH3_128bits_update(state.get(), size.data(), size.size());
    XXH3_128bits_update(state.get(), content.data(), content.size());
  }
  const XXH128_hash_t hash = XXH3_128bits_digest(state.get());
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return hex;
}

DeviceLibrary library_in(std::string directory, DeviceLibrary found) {
  found.files = bitcode_files(directory);
  found.digest = digest_of(found.files);
  found.directory = std::move(directory);
  return found;
}

} // namespace

std::optional<int> llvm_major_version(std::span<const std::string> needed) {
  static const std::regex llvm(R"(^libLLVM(?:-|\.so\.)(\d+))");
  for (const std::string &name : needed)
    if (std::smatch match; std::regex_search(name, match, llvm))
      return std::stoi(match[1].str());
  return std::nullopt;
}

DeviceLibrary find_device_library(std::optional<int> llvm_major) {
  DeviceLibrary found;
  if (llvm_major) {
    const std::string major = std::to_string(*llvm_major);
    found.package = "rocm-device-libs-" + major;
    found.package_directory = "/usr/lib/llvm-" + major + "/lib/clang/" + major + "/amdgcn/bitcode";
  }
  for (const char *variable : {"HIP_DEVICE_LIB_PATH", "KJIT_ROCM_DEVICE_LIB_PATH"}) {
    const char *value = std::getenv(variable);
    if (value == nullptr || *value == '\0')
      continue;
    DeviceLibrary named = library_in(value, found);
    if (named.files.empty())
      throw Error(Errc::compiler_unavailable,
                  std::string(variable) + "=" + value +
                      " names no folder of device-library bitcode (*.bc files)",
                  "point it at the folder of oclc_*.bc, ockl.bc and ocml.bc" +
                      (found.package.empty()
                           ? std::string()
                           : " (Debian's " + found.package + ": " + found.package_directory + ")") +
                      ", or unset it");
    return named;
  }
  if (!found.package_directory.empty() && !bitcode_files(found.package_directory).empty())
    return library_in(found.package_directory, found);
  return found;
}

Error device_library_missing(const DeviceLibrary &library, const Target &target,
                             std::string_view release) {
  const std::string install =
      library.package.empty()
          ? "its ROCm release's device library (rocm-device-libs)"
          : library.package + " (it installs " + library.package_directory + ")";
  return Error(Errc::unsupported_target, std::string(release) + " compiles " + target.id() +
                                             " only with the device library on disk: install " +
                                             install +
                                             ", or name its folder in HIP_DEVICE_LIB_PATH");
}

} // namespace kjit::jit
