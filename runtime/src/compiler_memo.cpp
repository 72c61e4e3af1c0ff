#include "compiler_memo.hpp"

#include "kjit/cache/private_file.hpp"
#include "kjit/log.hpp"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <xxhash.h>

namespace kjit {

namespace {

using nlohmann::json;

// What identifies one file's content without reading it, as ccache's compiler_check=mtime does.
json file_identity(const std::string &path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0)
    return nullptr;
  return {
      {"device", status.st_dev},
      {"inode", status.st_ino},
      {"size", status.st_size},
      {"mtime_ns", cache::unix_ns(status.st_mtim)},
  };
}

// What decides which file dlopen finds for a soname, as text: the variables the compilers' search
// reads, the loader's cache, and the executable whose RUNPATH applies; and the variables naming
// hiprtc's device library, which joins its identity.
std::string library_search_inputs() {
  std::string inputs;
  for (const char *variable : {"LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH",
                               "HIP_DEVICE_LIB_PATH", "KJIT_ROCM_DEVICE_LIB_PATH"}) {
    const char *value = std::getenv(variable);
    inputs.append(variable).append("=").append(value != nullptr ? value : "").push_back('\n');
  }
  inputs += file_identity("/etc/ld.so.cache").dump() + '\n';
  inputs += file_identity("/proc/self/exe").dump() + '\n';
  return inputs;
}

// The identity in `content`, with the current values of its code-changing variables.
std::optional<CompilerIdentity> identity_with_environment(const json &content) {
  CompilerIdentity identity{content.at("identity").get<std::string>(), {}};
  for (const json &variable : content.at("environment_variables"))
    if (const char *value = std::getenv(variable.get<std::string>().c_str()))
      identity.environment.emplace_back(variable.get<std::string>(), value);
  return identity;
}

json identity_json(const jit::Compiler &compiler) {
  return {{"identity", compiler.identity()},
          {"environment_variables", compiler.environment_variables()}};
}

std::filesystem::path tier_identity_file(const cache::DiskStore &tier, Vendor vendor) {
  return tier.layout().compilers_directory() / (std::string(to_string(vendor)) + ".json");
}

} // namespace

void write_tier_identity(const cache::DiskStore &tier, const jit::Compiler &compiler) {
  const std::filesystem::path path = tier_identity_file(tier, compiler.vendor());
  const std::string text = identity_json(compiler).dump(2) + '\n';
  cache::publish_private_file(path, std::as_bytes(std::span(text)), path.stem().string(),
                              "prebuilt compiler identity");
}

std::optional<CompilerIdentity> read_tier_identity(const cache::DiskStore &tier, Vendor vendor) {
  std::ifstream in(tier_identity_file(tier, vendor));
  if (!in)
    return std::nullopt;
  const json content = json::parse(in, nullptr, false);
  try {
    return identity_with_environment(content);
  } catch (const json::exception &error) { // a discarded (unparsable) value lands here too
    log().warn("prebuilt compiler identity in {}: {}", tier.layout().version_directory().string(),
               error.what());
    return std::nullopt;
  }
}

CompilerMemo::CompilerMemo(std::filesystem::path directory) : directory_(std::move(directory)) {}

std::filesystem::path CompilerMemo::file(Vendor vendor) const {
  static const std::uint64_t search = [] {
    const std::string inputs = library_search_inputs();
    return XXH3_64bits(inputs.data(), inputs.size());
  }();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(search));
  return directory_ / (std::string(to_string(vendor)) + "-" + hex + ".json");
}

std::optional<CompilerIdentity> CompilerMemo::read(Vendor vendor) const {
  const std::filesystem::path path = file(vendor);
  cache::PrivateFile memo = cache::read_private_file(path);
  if (memo.missing || !memo.problem.empty()) {
    if (!memo.problem.empty())
      log().debug("compiler memo {}: {}", path.string(), memo.problem);
    return std::nullopt;
  }
  const json content = json::parse(memo.bytes.begin(), memo.bytes.end(), nullptr, false);
  try {
    const json &libraries = content.at("libraries");
    if (!libraries.is_array() || libraries.empty())
      return std::nullopt;
    for (const json &library : libraries)
      if (file_identity(library.at("path").get<std::string>()) != library.at("file"))
        return std::nullopt; // the compiler was replaced: load it and remember the new one
    return identity_with_environment(content);
  } catch (const json::exception &error) { // a discarded (unparsable) value lands here too
    log().debug("compiler memo {}: {}", path.string(), error.what());
    return std::nullopt;
  }
}

void CompilerMemo::write(const jit::Compiler &compiler) const {
  const std::filesystem::path path = file(compiler.vendor());
  json libraries = json::array();
  for (const std::string &library : compiler.library_files())
    libraries.push_back({{"path", library}, {"file", file_identity(library)}});
  if (libraries.empty())
    return;
  for (const std::string &data : compiler.data_files())
    libraries.push_back({{"path", data}, {"file", file_identity(data)}});
  json memo = identity_json(compiler);
  memo["libraries"] = libraries;
  const std::string text = memo.dump(2);
  try {
    cache::publish_private_file(path, std::as_bytes(std::span(text)), path.stem().string(),
                                "compiler memo");
  } catch (const std::exception &error) {
    log().debug("{}", error.what());
  }
}

} // namespace kjit
