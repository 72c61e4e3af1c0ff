#include "kjit/jit/options.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <array>
#include <map>
#include <string_view>

namespace kjit::jit {
namespace {

constexpr std::string_view whitespace = " \t\n\r\f\v";

std::string_view trim(std::string_view text) {
  std::size_t first = text.find_first_not_of(whitespace);
  if (first == std::string_view::npos)
    return {};
  return text.substr(first, text.find_last_not_of(whitespace) - first + 1);
}

struct RefusedOption {
  std::string_view spelling;
  bool prefix; // also refuses spellings with the value attached: "-I/usr/include", "-arch=sm_90"
  std::string_view reason;
};

constexpr std::string_view target_reason =
    "it selects the target, which kjit sets from the Target so that the key names it";
constexpr std::string_view include_reason =
    "it makes headers reachable that the cache key does not hash; pass them as Headers";
constexpr std::string_view mode_reason =
    "it changes what the compiler produces, and kjit needs a code object";

constexpr std::array refused_options{
    RefusedOption{"--gpu-architecture", true, target_reason},
    RefusedOption{"-arch", true, target_reason},
    RefusedOption{"--offload-arch", true, target_reason},
    RefusedOption{"--cuda-gpu-arch", true, target_reason},
    RefusedOption{"-mcpu", true, target_reason},
    RefusedOption{"--mcpu", true, target_reason},
    RefusedOption{"-march", true, target_reason},
    RefusedOption{"-target", true, target_reason},
    RefusedOption{"--target", true, target_reason},
    // Target features belong in the target id (gfx90a:xnack-), not beside it.
    RefusedOption{"-mxnack", false, target_reason},
    RefusedOption{"-mno-xnack", false, target_reason},
    RefusedOption{"-msramecc", false, target_reason},
    RefusedOption{"-mno-sramecc", false, target_reason},
    RefusedOption{"-I", true, include_reason},
    RefusedOption{"-isystem", true, include_reason},
    RefusedOption{"-iquote", true, include_reason},
    RefusedOption{"-idirafter", true, include_reason},
    RefusedOption{"--include-path", true, include_reason},
    RefusedOption{"-include", true, include_reason},
    RefusedOption{"--pre-include", true, include_reason},
    RefusedOption{"-o", false, mode_reason},
    RefusedOption{"-E", false, mode_reason},
    RefusedOption{"-c", false, mode_reason},
    RefusedOption{"-S", false, mode_reason},
    RefusedOption{"-fsyntax-only", false, mode_reason},
    RefusedOption{"--fdevice-syntax-only", false, mode_reason},
    // Dependency output (-M, -MD, -MF file...) writes files beside the compile.
    RefusedOption{"-M", true, mode_reason},
};

void refuse_if_kjit_owns(std::string_view option) {
  for (const RefusedOption &refused : refused_options) {
    bool matches =
        refused.prefix ? option.starts_with(refused.spelling) : option == refused.spelling;
    if (matches)
      throw Error(Errc::bad_option, "compile option '" + std::string(option) +
                                        "' is not allowed: " + std::string(refused.reason));
  }
}

// Options whose next item is their argument, kept as it is rather than read as an option of
// ours: "-mllvm -amdgpu-early-inline-all=true", "-Xclang -DX".
bool takes_separate_argument(std::string_view option) {
  return option == "-mllvm" || option == "-Xclang";
}

bool is_macro_option(std::string_view option) {
  return option.starts_with("-D") || option.starts_with("-U");
}

// "FOO" from "-DFOO=1", "-DFOO", "-DFOO(x)=x" or "-UFOO".
std::string_view macro_name(std::string_view option) {
  std::string_view definition = option.substr(2);
  return definition.substr(0, definition.find_first_of("=("));
}

bool is_identifier(std::string_view name) {
  auto is_letter = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  auto is_letter_or_digit = [&](char c) { return is_letter(c) || (c >= '0' && c <= '9'); };
  return !name.empty() && is_letter(name.front()) &&
         std::all_of(name.begin(), name.end(), is_letter_or_digit);
}

} // namespace

std::vector<std::string> canonicalize_options(std::span<const std::string> options) {
  std::vector<std::string> others;
  // Keyed by macro name: two different -D/-U items for one macro depend on their order, which
  // sorting would lose, so they are refused rather than guessed at.
  std::map<std::string, std::string, std::less<>> macros;

  for (std::size_t i = 0; i < options.size(); ++i) {
    std::string_view option = trim(options[i]);
    if (option.empty())
      continue;
    if (takes_separate_argument(option) && i + 1 < options.size()) {
      std::string_view argument = trim(options[++i]);
      // "-Xclang -I/x" and "-mllvm -march=..." would slip past the refusals otherwise.
      refuse_if_kjit_owns(argument);
      others.emplace_back(option);
      others.emplace_back(argument);
      continue;
    }
    if (!is_macro_option(option)) {
      refuse_if_kjit_owns(option);
      others.emplace_back(option);
      continue;
    }
    std::string_view definition = trim(option.substr(2)); // "-D NAME" given as one item
    if (definition.empty() && i + 1 < options.size())
      definition = trim(options[++i]);      // "-D", "NAME" given as two items
    std::string macro(option.substr(0, 2)); // "-D" or "-U"
    macro += definition;
    if (!is_identifier(macro_name(macro)))
      throw Error(Errc::bad_option, "compile option '" + macro +
                                        "' names no macro; write -DNAME, -DNAME=VALUE or -UNAME");
    auto [existing, inserted] = macros.try_emplace(std::string(macro_name(macro)), macro);
    if (!inserted && existing->second != macro)
      throw Error(Errc::bad_option, "compile options '" + existing->second + "' and '" + macro +
                                        "' both set macro " + existing->first +
                                        "; their effect depends on their order, which kjit "
                                        "does not keep: give one");
  }

  std::vector<std::string> canonical;
  canonical.reserve(macros.size() + others.size());
  for (auto &[name, macro] : macros)
    canonical.push_back(std::move(macro));
  std::sort(canonical.begin(), canonical.end());
  std::move(others.begin(), others.end(), std::back_inserter(canonical));
  return canonical;
}

} // namespace kjit::jit
