#include "signature.hpp"

#include "kjit/error.hpp"
#include "kjit/jit/kernel_resources.hpp"
#include "kjit/runtime/tensor_map.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <regex>
#include <vector>

namespace kjit {

namespace {

struct Layout {
  std::uint32_t size;
  std::uint32_t alignment;
};

// The by-value argument types of HIP and CUDA kernels, in every spelling the compilers, the
// vendors' headers and kjit's prelude give them, with their host ABI layout (x86-64 and AArch64
// Linux: long is 8 bytes).
std::map<std::string, Layout, std::less<>> make_layouts() {
  std::map<std::string, Layout, std::less<>> layouts;
  const std::pair<std::vector<const char *>, std::uint32_t> scalars[] = {
      {{"bool", "char", "signed char", "unsigned char", "int8_t", "uint8_t"}, 1},
      {{"short", "short int", "unsigned short", "unsigned short int", "int16_t", "uint16_t", "half",
        "__half", "bfloat16", "__nv_bfloat16", "__hip_bfloat16", "hip_bfloat16"},
       2},
      {{"int", "signed", "signed int", "unsigned", "unsigned int", "int32_t", "uint32_t", "float",
        "half2", "__half2", "bfloat162", "__nv_bfloat162", "__hip_bfloat162"},
       4},
      {{"long", "long int", "unsigned long", "unsigned long int", "long long", "long long int",
        "unsigned long long", "unsigned long long int", "int64_t", "uint64_t", "size_t",
        "ptrdiff_t", "intptr_t", "uintptr_t", "double"},
       8},
  };
  for (const auto &[names, size] : scalars)
    for (const char *name : names)
      layouts[name] = {size, size};
  // The vector types of hip_vector_types.h and CUDA's vector_types.h: three elements are packed at
  // the element's alignment; two and four are aligned to their size, at most 16.
  const std::pair<const char *, std::uint32_t> elements[] = {
      {"char", 1},  {"uchar", 1}, {"short", 2}, {"ushort", 2},   {"int", 4},       {"uint", 4},
      {"float", 4}, {"long", 8},  {"ulong", 8}, {"longlong", 8}, {"ulonglong", 8}, {"double", 8}};
  for (const auto &[element, size] : elements)
    for (std::uint32_t count = 1; count <= 4; ++count)
      layouts[element + std::to_string(count)] = {
          size * count, count == 3 ? size : std::min<std::uint32_t>(size * count, 16)};
  // Tensor maps (gemm_wgmma's TMA descriptors) travel by value as __grid_constant__ parameters.
  layouts["kjit::TensorMap"] = {sizeof(TensorMap), alignof(TensorMap)};
  return layouts;
}

// "const T * __restrict__" -> "T*": qualifiers do not change what the driver copies.
std::string normalise(const std::string &type) {
  static const std::regex qualifiers(R"(\b(const|volatile|__restrict__|KJIT_RESTRICT)\b)");
  static const std::regex spaces(R"(\s+)");
  std::string out = std::regex_replace(type, qualifiers, " ");
  out = std::regex_replace(out, spaces, " ");
  while (!out.empty() && out.front() == ' ')
    out.erase(out.begin());
  while (!out.empty() && out.back() == ' ')
    out.pop_back();
  out = std::regex_replace(out, std::regex(R"( ?\* ?)"), "*");
  return out;
}

// "2 arguments of 8, 4 bytes"
std::string sizes_text(const std::vector<std::uint32_t> &sizes) {
  std::string text =
      std::to_string(sizes.size()) + (sizes.size() == 1 ? " argument" : " arguments");
  for (std::size_t i = 0; i < sizes.size(); ++i)
    text += (i == 0 ? " of " : ", ") + std::to_string(sizes[i]);
  return text + (sizes.empty() ? "" : " bytes");
}

} // namespace

KernelSignature signature_of(const Instance &instance) {
  const Template &tmpl = instance.source_template();
  if (tmpl.arguments().empty())
    throw Error(Errc::bad_argument,
                tmpl.name() + " declares no kernel arguments (TemplateOptions::arguments); name "
                              "them: rt.kernel(tmpl, params, KernelSignature::of<float *, int>())");
  std::vector<KernelParameter> parameters;
  for (const std::string &type : instance.argument_types()) {
    const std::string plain = normalise(type);
    if (!plain.empty() && plain.back() == '*') {
      parameters.push_back({plain, sizeof(void *), alignof(void *)});
      continue;
    }
    static const std::map<std::string, Layout, std::less<>> layouts = make_layouts();
    const auto found = layouts.find(plain);
    if (found == layouts.end())
      throw Error(Errc::bad_argument, tmpl.name() + ": cannot size kernel argument type '" + type +
                                          "'; name the host types: rt.kernel(tmpl, params, "
                                          "KernelSignature::of<...>())");
    parameters.push_back({plain, found->second.size, found->second.alignment});
  }
  return KernelSignature(std::move(parameters));
}

void check_signature(const CodeObject &code, const KernelSignature &signature) {
  const auto kernels = jit::read_kernel_resources(code.code());
  const jit::KernelResources *kernel = nullptr;
  if (kernels)
    for (const jit::KernelResources &candidate : *kernels)
      if (candidate.symbol == code.lowered_name())
        kernel = &candidate;
  if (kernel == nullptr || !kernel->argument_sizes)
    throw Error(Errc::bad_argument, code.expression() +
                                        ": its code object records no argument "
                                        "sizes to check the signature " +
                                        signature.to_string() + " against");
  std::vector<std::uint32_t> named;
  for (const KernelParameter &parameter : signature.parameters())
    named.push_back(parameter.size);
  if (named != *kernel->argument_sizes)
    throw Error(Errc::bad_argument, code.expression() + ": the kernel takes " +
                                        sizes_text(*kernel->argument_sizes) + ", the signature " +
                                        signature.to_string() + " names " + sizes_text(named));
}

} // namespace kjit
