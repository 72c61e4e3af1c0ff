// The NVIDIA compiler: NVRTC, emitting cubin for one sm_ target per program. NVRTC is documented
// thread safe for distinct programs, so compiles run concurrently with no lock.
#include "compile_log.hpp"
#include "compiler_releases.hpp"
#include "dynamic_library.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/options.hpp"
#include "kjit/log.hpp"
#include "vendor_compilers.hpp"
#include "vendor_program.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <regex>

namespace kjit::jit {
namespace {

// The declarations kjit uses from nvrtc.h, repeated here so that kjit builds where the CUDA
// headers are not installed.
using nvrtcResult = int;
using nvrtcProgram = struct nvrtc_program *;

struct NvrtcFunctions {
  using Program = nvrtcProgram;

  explicit NvrtcFunctions(const DynamicLibrary &library)
      : get_error_string(library.function<decltype(get_error_string)>("nvrtcGetErrorString")),
        version(library.function<decltype(version)>("nvrtcVersion")),
        get_num_supported_archs(
            library.function<decltype(get_num_supported_archs)>("nvrtcGetNumSupportedArchs")),
        get_supported_archs(
            library.function<decltype(get_supported_archs)>("nvrtcGetSupportedArchs")),
        create_program(library.function<decltype(create_program)>("nvrtcCreateProgram")),
        destroy_program(library.function<decltype(destroy_program)>("nvrtcDestroyProgram")),
        add_name_expression(
            library.function<decltype(add_name_expression)>("nvrtcAddNameExpression")),
        compile_program(library.function<decltype(compile_program)>("nvrtcCompileProgram")),
        get_program_log_size(
            library.function<decltype(get_program_log_size)>("nvrtcGetProgramLogSize")),
        get_program_log(library.function<decltype(get_program_log)>("nvrtcGetProgramLog")),
        get_code_size(library.function<decltype(get_code_size)>("nvrtcGetCUBINSize")),
        get_code(library.function<decltype(get_code)>("nvrtcGetCUBIN")),
        get_lowered_name(library.function<decltype(get_lowered_name)>("nvrtcGetLoweredName")) {}

  const char *(*get_error_string)(nvrtcResult);
  nvrtcResult (*version)(int *, int *);
  nvrtcResult (*get_num_supported_archs)(int *);
  nvrtcResult (*get_supported_archs)(int *);
  nvrtcResult (*create_program)(nvrtcProgram *, const char *, const char *, int,
                                const char *const *, const char *const *);
  nvrtcResult (*destroy_program)(nvrtcProgram *);
  nvrtcResult (*add_name_expression)(nvrtcProgram, const char *);
  nvrtcResult (*compile_program)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*get_program_log_size)(nvrtcProgram, std::size_t *);
  nvrtcResult (*get_program_log)(nvrtcProgram, char *);
  nvrtcResult (*get_code_size)(nvrtcProgram, std::size_t *); // the cubin's
  nvrtcResult (*get_code)(nvrtcProgram, char *);
  nvrtcResult (*get_lowered_name)(nvrtcProgram, const char *, const char **);
};

// NVRTC's supported list names base processors only. Arch-specific variants ("a": sm_90a, with
// features like wgmma that later processors lack) exist from sm_90, family variants ("f":
// sm_100f) from sm_100 and NVRTC 12.9; NVRTC 13 rejects sm_89a and sm_90f.
std::vector<TargetSupport> nvrtc_targets(const std::vector<int> &archs, int major, int minor) {
  bool has_family_variants = major > 12 || (major == 12 && minor >= 9);
  std::vector<TargetSupport> targets;
  for (int arch : archs) {
    std::string name = "sm_" + std::to_string(arch);
    targets.push_back({name, {}});
    if (arch >= 90)
      targets.push_back({name + "a", {}});
    if (arch >= 100 && has_family_variants)
      targets.push_back({name + "f", {}});
  }
  return targets;
}

// NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> by soname, which the loader looks for on its
// own path, not beside libnvrtc. Loading it first from libnvrtc's directory makes that lookup find
// it even where only a full path ($CUDA_HOME/lib64/...) reached libnvrtc.
std::optional<DynamicLibrary> preload_builtins(const std::filesystem::path &directory, int major,
                                               int minor) {
  std::filesystem::path builtins =
      directory / ("libnvrtc-builtins.so." + std::to_string(major) + "." + std::to_string(minor));
  std::error_code ignored;
  if (!std::filesystem::exists(builtins, ignored))
    return std::nullopt; // not beside libnvrtc: NVRTC's own lookup is all there is
  std::vector<std::string> path{builtins.string()};
  return DynamicLibrary::open_first("nvrtc builtins", path, nullptr, DynamicLibrary::Scope::global);
}

// NVRTC 13 has no built-in cuda_fp16.h or cuda_bf16.h: they are in the toolkit's include
// directory beside the library's ("/usr/local/cuda-13.0/lib/../include"). "" when absent.
std::string cuda_include_directory(const std::filesystem::path &library_directory) {
  std::filesystem::path include = library_directory.parent_path() / "include";
  std::error_code ignored;
  if (std::filesystem::exists(include / "cuda_fp16.h", ignored))
    return include.string();
  log().debug("nvrtc: no cuda_fp16.h in {}; <cuda_fp16.h> and <cuda_bf16.h> will not be found",
              include.string());
  return {};
}

class NvrtcCompiler final : public Compiler {
public:
  explicit NvrtcCompiler(DynamicLibrary library) : library_(std::move(library)), nvrtc_(library_) {
    int major = 0, minor = 0, count = 0;
    auto check = [&](nvrtcResult status, const char *call) {
      check_status(nvrtc_, status, "nvrtc", call, Errc::compiler_unavailable);
    };
    check(nvrtc_.version(&major, &minor), "nvrtcVersion");
    check(nvrtc_.get_num_supported_archs(&count), "nvrtcGetNumSupportedArchs");
    std::vector<int> archs(std::size_t(std::max(count, 0)));
    check(nvrtc_.get_supported_archs(archs.data()), "nvrtcGetSupportedArchs");
    targets_ = nvrtc_targets(archs, major, minor);

    std::filesystem::path directory = std::filesystem::path(library_.real_path()).parent_path();
    builtins_ = preload_builtins(directory, major, minor);
    // NVRTC's version has no patch level: a toolkit update keeps "13.0" while the code generator
    // and the headers beside it change. The libraries' build ids tell one build from another.
    release_ = release_name(Vendor::nvidia, std::to_string(major) + "." + std::to_string(minor));
    identity_ = release_ + " (" + build_id_text(library_) +
                (builtins_ ? ", " + build_id_text(*builtins_) : "") + ")";
    cuda_include_directory_ = cuda_include_directory(directory);
  }

  Vendor vendor() const override { return Vendor::nvidia; }
  std::string_view name() const override { return "nvrtc"; }
  const std::string &identity() const override { return identity_; }
  std::string release() const override { return release_; }
  const std::vector<TargetSupport> &supported_targets() const override { return targets_; }
  // NVRTC reads no environment variable that changes its code (it ignores CPATH, unlike comgr).
  std::vector<std::pair<std::string, std::string>> environment() const override { return {}; }
  std::vector<std::string> library_files() const override { return {library_.real_path()}; }

  CompileResult compile(const CompileRequest &request) const override;

private:
  DynamicLibrary library_;
  NvrtcFunctions nvrtc_;
  std::optional<DynamicLibrary> builtins_; // held so that NVRTC finds it loaded
  std::string cuda_include_directory_;
  std::string identity_;
  std::string release_;
  std::vector<TargetSupport> targets_;
};

CompileResult NvrtcCompiler::compile(const CompileRequest &request) const {
  check_supported(request.target);
  std::vector<std::string> options = canonicalize_options(request.options);
  options.push_back("--gpu-architecture=" + request.target.id());
  for (const std::string &directory : request.include_dirs) // before the toolkit's own
    options.push_back("-I" + directory);
  // The toolkit's own headers (cuda_fp16.h...) are the ones that ship with this NVRTC, so its
  // identity accounts for them: kjit may add this include path while it refuses the caller's.
  if (!cuda_include_directory_.empty())
    options.push_back("-I" + cuda_include_directory_);
  // NVRTC searches the directory of the program's name, the current one for kjit's names, for a
  // quoted #include: a file found there is in no key, so that search is turned off. Declared
  // headers are found by name either way.
  options.push_back("--no-source-include");

  VendorProgram program(nvrtc_, request);
  int status = program.compile(options);
  CompileResult result{.code = {}, .lowered_names = {}, .log = program.log()};
  if (status != 0) {
    // EDG's diagnostics: "scale.cu(3): error: ...", "scale.cu(1): catastrophic error: ...".
    static const std::regex error_location(R"(^(.+)\((\d+)\): (?:catastrophic )?error)");
    throw compile_failure(request, result.log, error_location, status_name(nvrtc_, status));
  }
  result.code = program.code();
  for (const std::string &expression : request.name_expressions) {
    std::optional<std::string> lowered = program.lowered_name(expression, status);
    if (!lowered)
      throw Error(Errc::compile_error, request.program_name + ": name expression '" + expression +
                                           "' could not be lowered to a kernel name (" +
                                           status_name(nvrtc_, status) + ")");
    result.lowered_names.push_back(std::move(*lowered));
  }
  return result;
}

} // namespace

std::unique_ptr<Compiler> load_nvrtc() {
  std::vector<std::string> candidates = library_candidates(
      {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
      {directory_from_environment("CUDA_HOME", "lib64"),
       directory_from_environment("CUDA_PATH", "lib64"), "/usr/local/cuda/lib64"});
  return std::make_unique<NvrtcCompiler>(
      DynamicLibrary::open_first("nvrtc", candidates, "nvrtcGetCUBIN"));
}

} // namespace kjit::jit
