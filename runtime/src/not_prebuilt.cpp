#include "not_prebuilt.hpp"

#include "kjit/templates/sets.hpp"

namespace kjit {

namespace {

// The variant as a set file lists it: {"template": "NAME", "params": {...}}.
std::string set_file_variant(const Instance &instance) {
  std::string params;
  for (const auto &[name, value] : instance.values()) {
    // Appended piece by piece: GCC 12 warns wrongly (-Wrestrict) on the one-expression form.
    params += params.empty() ? "\"" : ", \"";
    params += name;
    params += "\": ";
    params += value.is_integer() ? value.to_string() : '"' + value.to_string() + '"';
  }
  return "{\"template\": \"" + instance.source_template().name() + "\", \"params\": {" + params +
         "}}";
}

} // namespace

Error not_prebuilt(const Instance &instance, const jit::Target &target,
                   const std::filesystem::path &prebuilt_dir) {
  const std::string destination =
      " --targets \"" + target.id() + "\" --out " +
      (prebuilt_dir.empty() ? std::string("DIR") : prebuilt_dir.string());
  const int level = templates::builtin_level_of(instance);
  const std::string command =
      level != 0 ? "kjit prebuild --level " + std::to_string(level) + destination
                 : "kjit prebuild --sets FILE" + destination +
                       " with FILE's \"variants\" listing " + set_file_variant(instance);
  return Error(Errc::not_prebuilt,
               instance.source_template().name() + " (" + instance.canonical_params() + ") for " +
                   target.id() +
                   " is in no prebuilt or cached tier and KJIT_MODE=prebuilt forbids compiling; "
                   "add it with: " +
                   command);
}

} // namespace kjit
