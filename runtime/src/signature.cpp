#include "signature.hpp"

#include "kjit/error.hpp"
#include "kjit/runtime/tensor_map.hpp"

#include <cstdint>
#include <map>
#include <regex>

namespace kjit {

namespace {

// The argument types kernels take by value, as written in sources and the prelude.
const std::map<std::string, std::uint32_t, std::less<>> scalar_sizes = {
    {"bool", 1},          {"char", 1},      {"signed char", 1}, {"unsigned char", 1},
    {"int8_t", 1},        {"uint8_t", 1},   {"short", 2},       {"unsigned short", 2},
    {"int16_t", 2},       {"uint16_t", 2},  {"half", 2},        {"__half", 2},
    {"bfloat16", 2},      {"int", 4},       {"unsigned", 4},    {"unsigned int", 4},
    {"int32_t", 4},       {"uint32_t", 4},  {"float", 4},       {"long", 8},
    {"unsigned long", 8}, {"long long", 8}, {"int64_t", 8},     {"uint64_t", 8},
    {"size_t", 8},        {"double", 8}};

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

} // namespace

KernelSignature signature_of(const Instance &instance) {
  const Template &tmpl = instance.source_template();
  if (tmpl.arguments().empty())
    throw Error(Errc::bad_argument,
                tmpl.name() + " declares no kernel arguments (TemplateOptions::arguments); pass "
                              "a KernelSignature, e.g. KernelSignature::of<float *, int>()");
  std::vector<KernelParameter> parameters;
  for (const std::string &type : instance.argument_types()) {
    const std::string plain = normalise(type);
    if (!plain.empty() && plain.back() == '*') {
      parameters.push_back({plain, sizeof(void *), alignof(void *)});
      continue;
    }
    if (plain == "kjit::TensorMap") {
      parameters.push_back({plain, sizeof(TensorMap), alignof(TensorMap)});
      continue;
    }
    const auto found = scalar_sizes.find(plain);
    if (found == scalar_sizes.end())
      throw Error(Errc::bad_argument, tmpl.name() + ": cannot size kernel argument type '" + type +
                                          "'; pass a KernelSignature for this template");
    parameters.push_back({plain, found->second, found->second});
  }
  return KernelSignature(std::move(parameters));
}

} // namespace kjit
