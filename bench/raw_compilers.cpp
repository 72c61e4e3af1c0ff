#include "raw_compilers.hpp"

#include <dlfcn.h>
#include <stdexcept>
#include <string>
#include <vector>

namespace kjit::bench {

namespace {

// hiprtc and NVRTC share one C API shape (nvrtcX <-> hiprtcX), so one driver serves both.
struct RtcApi {
  using Create = int (*)(void **, const char *, const char *, int, const char *const *,
                         const char *const *);
  using AddName = int (*)(void *, const char *);
  using Compile = int (*)(void *, int, const char *const *);
  using Lowered = int (*)(void *, const char *, const char **);
  using Size = int (*)(void *, std::size_t *);
  using Get = int (*)(void *, char *);
  using Destroy = int (*)(void **);
  Create create;
  AddName add_name;
  Compile compile;
  Lowered lowered;
  Size code_size;
  Get code;
  Destroy destroy;
};

template <typename F> F symbol(void *library, const std::string &name) {
  void *address = dlsym(library, name.c_str());
  if (address == nullptr)
    throw std::runtime_error("missing " + name);
  return reinterpret_cast<F>(address);
}

RtcApi load(Vendor vendor) {
  const bool amd = vendor == Vendor::amd;
  // hiprtc as kjit's loader finds it on a Debian system: its own library from ROCm 6 (and 5.3),
  // inside libamdhip64 up to ROCm 5.2. One release is installed where the benchmark runs.
  const std::vector<const char *> names =
      amd ? std::vector{"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libamdhip64.so.5",
                        "libamdhip64.so"}
          : std::vector{"libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so.13"};
  void *library = nullptr;
  for (const char *name : names) {
    library = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (library != nullptr && dlsym(library, amd ? "hiprtcCreateProgram" : "nvrtcCreateProgram"))
      break;
    library = nullptr; // a libamdhip64 of ROCm 6 and later holds no hiprtc
  }
  if (library == nullptr)
    throw std::runtime_error(std::string("cannot load ") + names[0]);
  const std::string prefix = amd ? "hiprtc" : "nvrtc";
  return {symbol<RtcApi::Create>(library, prefix + "CreateProgram"),
          symbol<RtcApi::AddName>(library, prefix + "AddNameExpression"),
          symbol<RtcApi::Compile>(library, prefix + "CompileProgram"),
          symbol<RtcApi::Lowered>(library, prefix + "GetLoweredName"),
          symbol<RtcApi::Size>(library, prefix + (amd ? "GetCodeSize" : "GetCUBINSize")),
          symbol<RtcApi::Get>(library, prefix + (amd ? "GetCode" : "GetCUBIN")),
          symbol<RtcApi::Destroy>(library, prefix + "DestroyProgram")};
}

} // namespace

std::vector<std::byte> raw_compile(const jit::CompileRequest &request) {
  const Vendor vendor = request.target.vendor();
  const RtcApi &api = [vendor]() -> const RtcApi & {
    if (vendor == Vendor::amd) {
      static const RtcApi amd = load(Vendor::amd);
      return amd;
    }
    static const RtcApi nvidia = load(Vendor::nvidia);
    return nvidia;
  }();

  // The translation unit exactly as kjit's compilers assemble it.
  std::string source;
  for (const auto &include : request.pre_includes)
    source += "#include \"" + include + "\"\n";
  source += "#line 1 \"" + request.program_name + "\"\n" + request.source;
  std::vector<const char *> header_texts, header_names;
  for (const auto &header : request.headers) {
    header_texts.push_back(header.content.c_str());
    header_names.push_back(header.name.c_str());
  }
  std::vector<std::string> options = request.options;
  options.push_back((vendor == Vendor::amd ? "--offload-arch=" : "--gpu-architecture=") +
                    request.target.id());
  // What kjit's NVRTC compiler adds itself: NVRTC 13 has no built-in cuda_fp16.h.
  if (vendor == Vendor::nvidia)
    options.push_back("-I/usr/local/cuda/include");
  std::vector<const char *> option_texts;
  for (const auto &option : options)
    option_texts.push_back(option.c_str());

  void *program = nullptr;
  if (api.create(&program, source.c_str(), request.program_name.c_str(),
                 static_cast<int>(header_texts.size()), header_texts.data(),
                 header_names.data()) != 0)
    throw std::runtime_error("create failed");
  for (const auto &expression : request.name_expressions)
    api.add_name(program, expression.c_str());
  if (api.compile(program, static_cast<int>(option_texts.size()), option_texts.data()) != 0) {
    api.destroy(&program);
    throw std::runtime_error("compile failed");
  }
  for (const auto &expression : request.name_expressions) {
    const char *lowered = nullptr;
    api.lowered(program, expression.c_str(), &lowered);
  }
  std::size_t size = 0;
  api.code_size(program, &size);
  std::vector<std::byte> code(size);
  api.code(program, reinterpret_cast<char *>(code.data()));
  api.destroy(&program);
  return code;
}

} // namespace kjit::bench
