// The AMD compiler: hiprtc (inside libamdhip64 up to ROCm 5.2, libhiprtc later), with comgr, the
// code object manager hiprtc compiles through, asked which processors and features exist.
#include "compile_log.hpp"
#include "compiler_releases.hpp"
#include "device_library.hpp"
#include "dynamic_library.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/jit/options.hpp"
#include "vendor_compilers.hpp"
#include "vendor_program.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cxxabi.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string_view>

using namespace std::string_view_literals;

namespace kjit::jit {
namespace {

// hiprtc 5.2 is not thread safe for concurrent programs, its own internal lock notwithstanding:
// programs compiled from several threads at once crash or come back built with other options
// (BENCHMARKS.md, "Evidence behind the code's choices"). Every call into hiprtc and comgr, which
// hiprtc shares, holds this process-wide lock.
std::mutex hiprtc_calls;

// The declarations kjit uses from hiprtc.h and amd_comgr.h, repeated here so that kjit builds
// where the ROCm headers are not installed.
using hiprtcResult = int;
using hiprtcProgram = struct hiprtc_program *;

using amd_comgr_status_t = int;
constexpr amd_comgr_status_t comgr_success = 0;
struct amd_comgr_metadata_node_t {
  std::uint64_t handle;
};

struct HiprtcFunctions {
  using Program = hiprtcProgram;

  explicit HiprtcFunctions(const DynamicLibrary &library)
      : get_error_string(library.function<decltype(get_error_string)>("hiprtcGetErrorString")),
        version(library.function<decltype(version)>("hiprtcVersion")),
        create_program(library.function<decltype(create_program)>("hiprtcCreateProgram")),
        destroy_program(library.function<decltype(destroy_program)>("hiprtcDestroyProgram")),
        add_name_expression(
            library.function<decltype(add_name_expression)>("hiprtcAddNameExpression")),
        compile_program(library.function<decltype(compile_program)>("hiprtcCompileProgram")),
        get_program_log_size(
            library.function<decltype(get_program_log_size)>("hiprtcGetProgramLogSize")),
        get_program_log(library.function<decltype(get_program_log)>("hiprtcGetProgramLog")),
        get_code_size(library.function<decltype(get_code_size)>("hiprtcGetCodeSize")),
        get_code(library.function<decltype(get_code)>("hiprtcGetCode")),
        get_lowered_name(library.function<decltype(get_lowered_name)>("hiprtcGetLoweredName")) {}

  const char *(*get_error_string)(hiprtcResult);
  hiprtcResult (*version)(int *, int *);
  hiprtcResult (*create_program)(hiprtcProgram *, const char *, const char *, int, const char **,
                                 const char **);
  hiprtcResult (*destroy_program)(hiprtcProgram *);
  hiprtcResult (*add_name_expression)(hiprtcProgram, const char *);
  hiprtcResult (*compile_program)(hiprtcProgram, int, const char **);
  hiprtcResult (*get_program_log_size)(hiprtcProgram, std::size_t *);
  hiprtcResult (*get_program_log)(hiprtcProgram, char *);
  hiprtcResult (*get_code_size)(hiprtcProgram, std::size_t *);
  hiprtcResult (*get_code)(hiprtcProgram, char *);
  hiprtcResult (*get_lowered_name)(hiprtcProgram, const char *, const char **);
};

struct ComgrFunctions {
  using MapCallback = amd_comgr_status_t (*)(amd_comgr_metadata_node_t key,
                                             amd_comgr_metadata_node_t value, void *user_data);

  explicit ComgrFunctions(const DynamicLibrary &library)
      : get_version(library.function<decltype(get_version)>("amd_comgr_get_version")),
        get_isa_count(library.function<decltype(get_isa_count)>("amd_comgr_get_isa_count")),
        get_isa_name(library.function<decltype(get_isa_name)>("amd_comgr_get_isa_name")),
        get_isa_metadata(
            library.function<decltype(get_isa_metadata)>("amd_comgr_get_isa_metadata")),
        metadata_lookup(library.function<decltype(metadata_lookup)>("amd_comgr_metadata_lookup")),
        iterate_map_metadata(
            library.function<decltype(iterate_map_metadata)>("amd_comgr_iterate_map_metadata")),
        get_metadata_string(
            library.function<decltype(get_metadata_string)>("amd_comgr_get_metadata_string")),
        destroy_metadata(
            library.function<decltype(destroy_metadata)>("amd_comgr_destroy_metadata")) {}

  void (*get_version)(std::size_t *, std::size_t *);
  amd_comgr_status_t (*get_isa_count)(std::size_t *);
  amd_comgr_status_t (*get_isa_name)(std::size_t, const char **);
  amd_comgr_status_t (*get_isa_metadata)(const char *, amd_comgr_metadata_node_t *);
  amd_comgr_status_t (*metadata_lookup)(amd_comgr_metadata_node_t, const char *,
                                        amd_comgr_metadata_node_t *);
  amd_comgr_status_t (*iterate_map_metadata)(amd_comgr_metadata_node_t, MapCallback, void *);
  amd_comgr_status_t (*get_metadata_string)(amd_comgr_metadata_node_t, std::size_t *, char *);
  amd_comgr_status_t (*destroy_metadata)(amd_comgr_metadata_node_t);
};

// Environment variables that change the code hiprtc emits.
constexpr const char *code_changing_variables[] = {
    // Options that later hiprtc releases append to every compile (link); 5.2 does not read them.
    "HIPRTC_COMPILE_OPTIONS_APPEND",
    "HIPRTC_LINK_OPTIONS_APPEND",
    // Read by hiprtc 5.2 once the HIP runtime is initialised in the process (hipInit, even one
    // that finds no GPU): they select wave64 (-mwavefrontsize64) and CU mode (-mcumode) on gfx10.
    "GPU_ENABLE_WAVE32_MODE",
    "GPU_ENABLE_WGP_MODE",
};

// Include paths that the clang driver inside comgr adds from the environment (CPATH for every
// language, the other two by language). A header found there is in no key, and keying the value
// alone would hand back old code after the header changed, so kjit does not compile while one is
// set. Stripping it is no option: hiprtc runs in this process, and changing the environment of a
// running process races every thread that reads it. An empty one adds no path (clang's
// addDirectoryList skips it), so it counts as unset.
constexpr const char *include_path_variables[] = {"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"};

void refuse_include_path_variables() {
  for (const char *variable : include_path_variables)
    if (const char *value = std::getenv(variable); value != nullptr && *value != '\0')
      throw Error(Errc::bad_config,
                  std::string(variable) + "='" + value +
                      "' is set: hiprtc would search it for headers that the cache key does not "
                      "hash, so kjit compiles nothing while it is; unset it for this process "
                      "(kernels take their headers as Headers)");
}

// The names comgr gives its ISAs: "amdgcn-amd-amdhsa--gfx90a".
constexpr std::string_view isa_prefix = "amdgcn-amd-amdhsa--";

class ComgrMetadata {
public:
  ComgrMetadata(const ComgrFunctions &comgr, amd_comgr_metadata_node_t node)
      : comgr_(comgr), node_(node) {}
  ComgrMetadata(const ComgrMetadata &) = delete;
  ComgrMetadata &operator=(const ComgrMetadata &) = delete;
  ~ComgrMetadata() { comgr_.destroy_metadata(node_); }
  amd_comgr_metadata_node_t node() const { return node_; }

private:
  const ComgrFunctions &comgr_;
  amd_comgr_metadata_node_t node_;
};

void check_comgr(amd_comgr_status_t status, const char *call) {
  if (status != comgr_success)
    throw Error(Errc::compiler_unavailable,
                std::string("comgr: ") + call + " failed with status " + std::to_string(status));
}

std::string metadata_string(const ComgrFunctions &comgr, amd_comgr_metadata_node_t node) {
  std::size_t size = 0;
  check_comgr(comgr.get_metadata_string(node, &size, nullptr), "amd_comgr_get_metadata_string");
  std::string text(size, '\0'); // size counts the terminating NUL
  check_comgr(comgr.get_metadata_string(node, &size, text.data()), "amd_comgr_get_metadata_string");
  text.resize(size > 0 ? size - 1 : 0);
  return text;
}

// The keys of the ISA's "Features" map ("sramecc", "xnack"): the features a target id may set.
std::vector<std::string> isa_features(const ComgrFunctions &comgr, const char *isa) {
  amd_comgr_metadata_node_t node{};
  check_comgr(comgr.get_isa_metadata(isa, &node), "amd_comgr_get_isa_metadata");
  ComgrMetadata metadata(comgr, node);
  amd_comgr_metadata_node_t features_node{};
  if (comgr.metadata_lookup(metadata.node(), "Features", &features_node) != comgr_success)
    return {}; // no "Features" entry: the processor has none
  ComgrMetadata features_map(comgr, features_node);

  struct Collected {
    const ComgrFunctions &comgr;
    std::vector<std::string> names;
  } collected{comgr, {}};
  auto collect = [](amd_comgr_metadata_node_t key, amd_comgr_metadata_node_t,
                    void *user_data) -> amd_comgr_status_t {
    auto &into = *static_cast<Collected *>(user_data);
    try { // an exception must not unwind through comgr's C frames
      into.names.push_back(metadata_string(into.comgr, key));
      return comgr_success;
    } catch (const Error &) {
      return 1; // stops the iteration, which then reports AMD_COMGR_STATUS_ERROR
    }
  };
  check_comgr(comgr.iterate_map_metadata(features_map.node(), collect, &collected),
              "amd_comgr_iterate_map_metadata");
  std::sort(collected.names.begin(), collected.names.end());
  return std::move(collected.names);
}

std::vector<TargetSupport> comgr_targets(const ComgrFunctions &comgr) {
  std::size_t count = 0;
  check_comgr(comgr.get_isa_count(&count), "amd_comgr_get_isa_count");
  std::vector<TargetSupport> targets;
  for (std::size_t i = 0; i < count; ++i) {
    const char *isa = nullptr;
    check_comgr(comgr.get_isa_name(i, &isa), "amd_comgr_get_isa_name");
    std::string_view name(isa);
    if (!name.starts_with(isa_prefix))
      continue; // not an AMDHSA GPU ISA (none in comgr 2.4, but the list is comgr's to extend)
    targets.push_back({std::string(name.substr(isa_prefix.size())), isa_features(comgr, isa)});
  }
  return targets;
}

// "5.2.21153" from "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5.2.21153": the HIP release, which
// hiprtcVersion (9.0 in every 5.x release) does not tell. A library without a version in its file
// name is identified by its path instead.
std::string library_version(const std::string &real_path) {
  std::size_t suffix = real_path.rfind(".so.");
  return suffix == std::string::npos ? real_path : real_path.substr(suffix + 4);
}

// The comgr sonames a hiprtc of this release dlopens: libamd_comgr.so.2 up to ROCm 5,
// libamd_comgr.so.3 from ROCm 6 on. A release that the file name does not tell tries both.
std::vector<std::string_view> comgr_sonames(const std::string &hiprtc_release) {
  int major = std::atoi(hiprtc_release.c_str());
  if (major >= 6)
    return {"libamd_comgr.so.3"};
  if (major >= 1)
    return {"libamd_comgr.so.2"};
  return {"libamd_comgr.so.3", "libamd_comgr.so.2"};
}

// "hiprtc, ROCm 5.2" from the HIP release ("5.2.21153"): its major and minor numbers are the
// ROCm release's. hiprtcVersion's own "major.minor" where the file name tells no release.
std::string release_of(const std::string &hip_release, int major, int minor) {
  const std::size_t dot = hip_release.find('.');
  if (std::atoi(hip_release.c_str()) < 1 || dot == std::string::npos)
    return "hiprtc " + std::to_string(major) + "." + std::to_string(minor);
  return release_name(Vendor::amd,
                      hip_release.substr(0, hip_release.find_first_not_of("0123456789", dot + 1)));
}

std::string directory_of(const std::string &path) { return path.substr(0, path.rfind('/')); }

std::string demangle(const std::string &symbol) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> readable(
      abi::__cxa_demangle(symbol.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 ? readable.get() : symbol;
}

// The kernels of an AMDGPU code object, as a C++ programmer writes them: each kernel has a
// "<mangled name>.kd" descriptor symbol.
std::vector<std::string> kernel_names(std::span<const std::byte> code) {
  std::vector<std::string> kernels;
  std::optional<ElfSummary> elf = read_elf(code);
  if (!elf)
    return kernels;
  constexpr std::string_view descriptor = ".kd";
  for (const std::string &symbol : elf->symbols)
    if (symbol.ends_with(descriptor))
      kernels.push_back(demangle(symbol.substr(0, symbol.size() - descriptor.size())));
  return kernels;
}

// comgr compiles in a temporary directory and the log names headers by their path there,
// "/tmp/comgr-1a2b3c/include/kjit/util.h". The log names them as the request does instead, which
// also keeps it the same from one compile to the next. (The source is named by translation_unit's
// #line directive.)
std::string readable_log(const std::string &log) {
  static const std::regex header_directory(R"([^\s:]*/comgr-[^/\s]+/include/)");
  return std::regex_replace(log, header_directory, "");
}

// The device library as the compiler identity names it: its content, not its folder, decides the
// code.
std::string device_library_text(const DeviceLibrary &library) {
  return library.directory.empty() ? "device library: comgr's own"
                                   : "device library " + library.digest;
}

// What decides which device library a compile links, for the compiler memo: the folder found
// and its files, or the package's folder while it is absent, so that installing it is noticed.
std::vector<std::string> device_library_files(const DeviceLibrary &library) {
  if (library.directory.empty())
    return library.package_directory.empty() ? std::vector<std::string>{}
                                             : std::vector{library.package_directory};
  std::vector<std::string> files{library.directory};
  files.insert(files.end(), library.files.begin(), library.files.end());
  return files;
}

// Every compile links the device library found, generic target or not, so that its code does not
// depend on comgr's embedded copy. Without one, a generic target cannot compile (comgr's copy
// names its files as clang does not look for them): Error(unsupported_target) before hiprtc runs.
//
// comgr 7.2 keeps its own cache of compile steps (~/.cache/comgr), keyed without the device
// library: a step that a compile without the library ran is found again by the compile with it,
// whose link then fails ("undefined hidden symbol: __ockl_get_group_id"), for good. The library's
// digest, defined in every program, puts it in comgr's key too (BENCHMARKS.md, "Generic targets
// with Debian's device library").
void add_device_library_options(const DeviceLibrary &library, const Target &target,
                                std::string_view release, std::vector<std::string> &options) {
  if (library.directory.empty() && target.is_generic())
    throw device_library_missing(library, target, release);
  if (!library.directory.empty())
    options.push_back("--rocm-device-lib-path=" + library.directory);
  options.push_back("-DKJIT_DEVICE_LIBRARY=" +
                    (library.directory.empty() ? std::string("comgr") : library.digest));
}

class HiprtcCompiler final : public Compiler {
public:
  HiprtcCompiler(DynamicLibrary hiprtc_library, DynamicLibrary comgr_library)
      : hiprtc_library_(std::move(hiprtc_library)), comgr_library_(std::move(comgr_library)),
        hiprtc_(hiprtc_library_), comgr_(comgr_library_),
        device_library_(find_device_library(llvm_major_version(comgr_library_.needed()))) {
    std::lock_guard lock(hiprtc_calls);
    int major = 0, minor = 0;
    check_status(hiprtc_, hiprtc_.version(&major, &minor), "hiprtc", "hiprtcVersion",
                 Errc::compiler_unavailable);
    std::size_t comgr_major = 0, comgr_minor = 0;
    comgr_.get_version(&comgr_major, &comgr_minor);
    identity_ = "hiprtc " + std::to_string(major) + "." + std::to_string(minor) + " (HIP " +
                library_version(hiprtc_library_.real_path()) + ", comgr " +
                std::to_string(comgr_major) + "." + std::to_string(comgr_minor) + "; " +
                build_id_text(hiprtc_library_) + ", " + build_id_text(comgr_library_) + "; " +
                device_library_text(device_library_) + ")";
    release_ = release_of(library_version(hiprtc_library_.real_path()), major, minor);
    targets_ = comgr_targets(comgr_);
  }

  Vendor vendor() const override { return Vendor::amd; }
  std::string_view name() const override { return "hiprtc"; }
  const std::string &identity() const override { return identity_; }
  std::string release() const override { return release_; }
  const std::vector<TargetSupport> &supported_targets() const override { return targets_; }

  std::vector<std::pair<std::string, std::string>> environment() const override {
    std::vector<std::pair<std::string, std::string>> set;
    for (const char *variable : code_changing_variables)
      if (const char *value = std::getenv(variable))
        set.emplace_back(variable, value);
    return set;
  }

  std::vector<std::string> environment_variables() const override {
    return {std::begin(code_changing_variables), std::end(code_changing_variables)};
  }

  std::vector<std::string> library_files() const override {
    return {hiprtc_library_.real_path(), comgr_library_.real_path()};
  }

  std::vector<std::string> data_files() const override {
    return device_library_files(device_library_);
  }

  CompileResult compile(const CompileRequest &request) const override;

private:
  DynamicLibrary hiprtc_library_;
  DynamicLibrary comgr_library_;
  HiprtcFunctions hiprtc_;
  ComgrFunctions comgr_;
  DeviceLibrary device_library_;
  std::string identity_;
  std::string release_;
  std::vector<TargetSupport> targets_;
  // Targets whose compiles failed for want of their device library, with that error; guarded by
  // hiprtc_calls.
  mutable std::map<std::string, Error> lacking_device_library_;
};

CompileResult HiprtcCompiler::compile(const CompileRequest &request) const {
  check_supported(request.target);
  refuse_include_path_variables();
  std::vector<std::string> options = canonicalize_options(request.options);
  options.push_back("--offload-arch=" + request.target.id());
  for (const std::string &directory : request.include_dirs)
    options.push_back("-I" + directory);
  add_device_library_options(device_library_, request.target, release_, options);

  std::lock_guard lock(hiprtc_calls);
  // A target whose device library this hiprtc lacks fails every program alike, each after a
  // whole compile, so the first failure is the answer for the process (BENCHMARKS.md, "Evidence
  // behind the code's choices").
  if (auto known = lacking_device_library_.find(request.target.id());
      known != lacking_device_library_.end())
    throw known->second;
  VendorProgram program(hiprtc_, request);
  int status = program.compile(options);
  CompileResult result{.code = {}, .lowered_names = {}, .log = readable_log(program.log())};
  if (status != 0) {
    // clang's diagnostics: "scale.hip:3:10: error: ...", "kjit/util.h:2:1: fatal error: ...".
    static const std::regex error_location(R"(^([^:]+):(\d+):\d+: (?:fatal )?error:)");
    if (std::optional<Error> lacking =
            missing_device_library(result.log, request.target, release_)) {
      lacking_device_library_.emplace(request.target.id(), *lacking);
      throw *lacking;
    }
    throw compile_failure(request, result.log, error_location, status_name(hiprtc_, status));
  }
  result.code = program.code();
  for (const std::string &expression : request.name_expressions) {
    std::optional<std::string> lowered = program.lowered_name(expression, status);
    if (!lowered) {
      std::string kernels;
      for (const std::string &kernel : kernel_names(result.code))
        kernels += "\n  " + kernel;
      throw Error(Errc::compile_error,
                  request.program_name + ": name expression '" + expression +
                      "' could not be lowered to a kernel name (" + status_name(hiprtc_, status) +
                      ")",
                  "hiprtc finds a name expression by comparing its text with the demangled "
                  "kernel names, so spell each type by its underlying name as the compiler prints "
                  "it (__half, not a typedef or alias such as half) and each integer argument as "
                  "a plain literal (4096, not 4096u or a constant's name).\nKernels in the "
                  "program:" +
                      (kernels.empty() ? std::string("\n  none") : kernels));
    }
    result.lowered_names.push_back(std::move(*lowered));
  }
  return result;
}

// hiprtc from the places docs/ARCHITECTURE.md lists ("Which hiprtc and comgr are loaded").
DynamicLibrary open_hiprtc() {
  // hiprtc later moved from libamdhip64 to its own libhiprtc, and a libamdhip64 that no longer
  // exports it is passed over by the required-symbol check.
  const auto names = {"libhiprtc.so.7"sv,   "libhiprtc.so.6"sv, "libhiprtc.so.5"sv,
                      "libamdhip64.so.5"sv, "libhiprtc.so"sv,   "libamdhip64.so"sv};
  constexpr const char *symbol = "hiprtcCreateProgram";
  const std::string rocm_lib = directory_from_environment("ROCM_PATH", "lib");
  if (rocm_lib.empty()) {
    std::vector<std::string> directories{directory_from_environment("HIP_PATH", "lib"),
                                         "/opt/rocm/lib"};
    for (std::string &directory : versioned_directories("/opt", "rocm-", "lib"))
      directories.push_back(std::move(directory));
    return DynamicLibrary::open_first("hiprtc", library_candidates(names, directories), symbol);
  }
  // A ROCM_PATH names the release the user wants: compiling with another one found elsewhere
  // would give code, and a compiler identity, that they did not ask for.
  try {
    return DynamicLibrary::open_first("hiprtc", files_in(names, {rocm_lib}), symbol);
  } catch (const Error &error) {
    throw Error(Errc::compiler_unavailable, "ROCM_PATH is set but " + rocm_lib + " holds no hiprtc",
                "point ROCM_PATH at a ROCm installation, or unset it to search the system's "
                "libraries and /opt/rocm*\n" +
                    error.summary() + "\n" + error.detail());
  }
}

} // namespace

std::unique_ptr<Compiler> load_hiprtc() {
  DynamicLibrary hiprtc = open_hiprtc();
  // hiprtc dlopens its comgr by soname when it first compiles. The comgr beside hiprtc, from the
  // same installation, comes first; once kjit has it loaded, hiprtc's dlopen of that soname gets
  // the same library, so kjit names the comgr that compiles.
  std::vector<std::string_view> sonames = comgr_sonames(library_version(hiprtc.real_path()));
  std::vector<std::string> comgr_candidates;
  for (std::string_view soname : sonames)
    comgr_candidates.push_back(directory_of(hiprtc.real_path()) + "/" + std::string(soname));
  for (std::string_view soname : sonames)
    comgr_candidates.emplace_back(soname);
  try {
    DynamicLibrary comgr =
        DynamicLibrary::open_first("comgr", comgr_candidates, "amd_comgr_get_isa_metadata");
    return std::make_unique<HiprtcCompiler>(std::move(hiprtc), std::move(comgr));
  } catch (const Error &error) {
    // Both places in the one line, which `kjit targets` shows without the detail.
    std::string searched;
    for (const std::string &candidate : comgr_candidates)
      searched += (searched.empty() ? "" : ", then ") + candidate;
    throw Error(Errc::compiler_unavailable,
                "hiprtc " + hiprtc.real_path() + " was found without its comgr (searched " +
                    searched + ")",
                "install the comgr of the same ROCm release (Debian: libamd-comgr2 for ROCm 5, "
                "libamd-comgr3 for ROCm 6 and 7)\n" +
                    error.summary() + "\n" + error.detail());
  }
}

} // namespace kjit::jit
