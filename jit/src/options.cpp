#include "kjit/jit/options.hpp"

#include "kjit/error.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
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

// Why a spelling is refused, where kjit can say more than "not on the list".
struct RefusalReason {
  std::string_view spelling;
  bool prefix; // also covers spellings with a value attached: "-I/usr/include", "-arch=sm_90"
  std::string_view reason;
};

constexpr std::string_view target_reason =
    "it selects the target, which kjit sets from the Target so that the key names it";
constexpr std::string_view include_reason =
    "it makes the compiler read files that the cache key does not hash; pass headers as Headers";
constexpr std::string_view mode_reason =
    "it changes what the compiler produces or writes, and kjit needs one code object";

constexpr std::array refusal_reasons{
    RefusalReason{"--gpu-architecture", true, target_reason},
    RefusalReason{"-arch", true, target_reason},
    RefusalReason{"--offload-arch", true, target_reason},
    RefusalReason{"--cuda-gpu-arch", true, target_reason},
    RefusalReason{"-mcpu", true, target_reason},
    RefusalReason{"--mcpu", true, target_reason},
    RefusalReason{"-march", true, target_reason},
    RefusalReason{"-target", true, target_reason},
    RefusalReason{"--target", true, target_reason},
    // Target features belong in the target id (gfx90a:xnack-), not beside it.
    RefusalReason{"-mxnack", false, target_reason},
    RefusalReason{"-mno-xnack", false, target_reason},
    RefusalReason{"-msramecc", false, target_reason},
    RefusalReason{"-mno-sramecc", false, target_reason},
    RefusalReason{"-mwavefrontsize64", false, target_reason},
    RefusalReason{"-mno-wavefrontsize64", false, target_reason},
    RefusalReason{"-I", true, include_reason},
    RefusalReason{"-i", true,
                  include_reason}, // -isystem, -iquote, -idirafter, -include, -imacros...
    RefusalReason{"--include", true, include_reason}, // --include-directory(-after), --include=
    RefusalReason{"--pre-include", true, include_reason},
    RefusalReason{"-cxx-isystem", true, include_reason},
    RefusalReason{"-Wp,", true, include_reason},
    RefusalReason{"--sysroot", true, include_reason},
    RefusalReason{"--cuda-path", true, include_reason},
    RefusalReason{"--rocm-path", true, include_reason},
    RefusalReason{"--hip-path", true, include_reason},
    RefusalReason{"--rocm-device-lib-path", true, include_reason},
    RefusalReason{"--embed-dir", true, include_reason},
    RefusalReason{"--use-pch", true, include_reason},
    RefusalReason{"--pch-dir", true, include_reason},
    RefusalReason{"-o", false, mode_reason},
    RefusalReason{"-E", false, mode_reason},
    RefusalReason{"-c", false, mode_reason},
    RefusalReason{"-S", false, mode_reason},
    RefusalReason{"-fsyntax-only", false, mode_reason},
    RefusalReason{"--fdevice-syntax-only", false, mode_reason},
    RefusalReason{"-fgpu-rdc", false, mode_reason},
    RefusalReason{"--relocatable-device-code", true, mode_reason},
    // Dependency output (-M, -MD, -MF file...) writes files beside the compile.
    RefusalReason{"-M", true, mode_reason},
};

// Options that change only the code generated from what the key hashes: flags taken as they are.
// What hiprtc's clang and NVRTC accept, restricted to what reads no file and keeps the output one
// loadable code object; README.md, "Compile options", lists them. A spelling one compiler does not
// know is its compile error, not a stale entry.
constexpr std::string_view allowed_flags[] = {
    // Optimisation and floating point (clang; NVRTC takes -O3 and the like too).
    "-O0", "-O1", "-O2", "-O3", "-Os", "-Oz", "-Ofast", "-ffast-math", "-fno-fast-math",
    "-funsafe-math-optimizations", "-fno-unsafe-math-optimizations", "-ffinite-math-only",
    "-fno-finite-math-only", "-fno-honor-infinities", "-fno-honor-nans",
    "-fgpu-flush-denormals-to-zero", "-fno-gpu-flush-denormals-to-zero",
    "-fcuda-flush-denormals-to-zero", "-fno-cuda-flush-denormals-to-zero", "-funroll-loops",
    "-fno-unroll-loops", "-fno-gpu-rdc", "-munsafe-fp-atomics", "-mno-unsafe-fp-atomics",
    "-mcumode", "-mno-cumode",
    // Diagnostics and debug information.
    "-w", "-g", "-g0", "-gline-tables-only", "-save-temps",
    // NVRTC.
    "--use_fast_math", "-use_fast_math", "--extra-device-vectorization",
    "-extra-device-vectorization", "--restrict", "-restrict", "--device-int128", "-device-int128",
    "--generate-line-info", "-lineinfo", "--device-debug", "-G", "--disable-warnings"};

bool is_one_of(std::string_view value, std::initializer_list<std::string_view> choices) {
  return std::find(choices.begin(), choices.end(), value) != choices.end();
}

bool is_digits(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_word(std::string_view text) { // letters, digits, '_', '-', '+', '=' and '.'
  auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '+' || c == '=' || c == '.';
  };
  return !text.empty() && std::all_of(text.begin(), text.end(), word_char);
}

bool is_true_or_false(std::string_view value) { return is_one_of(value, {"true", "false"}); }

bool is_language_standard(std::string_view value) {
  for (std::string_view family : {"c++", "gnu++"})
    if (value.starts_with(family))
      return is_word(value.substr(family.size()));
  return false;
}

bool is_ptxas_report(std::string_view value) { // "-v" or "-v,--warn-on-spills"
  for (std::size_t comma; !value.empty();
       value.remove_prefix(comma == value.npos ? value.size() : comma + 1)) {
    comma = value.find(',');
    if (!is_one_of(value.substr(0, comma),
                   {"-v", "--verbose", "--warn-on-spills", "--warn-on-local-memory-usage",
                    "--warn-on-double-precision-use"}))
      return false;
  }
  return true;
}

bool is_diagnostic_numbers(std::string_view value) { // "177" or "177,550"
  return !value.empty() && value.find_first_not_of("0123456789,") == value.npos;
}

// Options with a value attached after '=', and the values each takes.
struct ValuedOption {
  std::string_view prefix; // up to and with the '='
  bool (*accepts)(std::string_view value);
};

constexpr std::array allowed_valued_options{
    ValuedOption{"-std=", is_language_standard},
    ValuedOption{"--std=", is_language_standard},
    ValuedOption{"-ffp-contract=",
                 [](std::string_view v) {
                   return is_one_of(v, {"fast", "on", "off", "fast-honor-pragmas"});
                 }},
    ValuedOption{"--ftz=", is_true_or_false},
    ValuedOption{"-ftz=", is_true_or_false},
    ValuedOption{"--prec-div=", is_true_or_false},
    ValuedOption{"-prec-div=", is_true_or_false},
    ValuedOption{"--prec-sqrt=", is_true_or_false},
    ValuedOption{"-prec-sqrt=", is_true_or_false},
    ValuedOption{"--fmad=", is_true_or_false},
    ValuedOption{"-fmad=", is_true_or_false},
    ValuedOption{"--maxrregcount=", is_digits},
    ValuedOption{"-maxrregcount=", is_digits},
    ValuedOption{"--optimization-info=", [](std::string_view v) { return v == "inline"; }},
    ValuedOption{"-opt-info=", [](std::string_view v) { return v == "inline"; }},
    ValuedOption{"--diag-suppress=", is_diagnostic_numbers},
    ValuedOption{"--diag-error=", is_diagnostic_numbers},
    ValuedOption{"--diag-warn=", is_diagnostic_numbers},
    ValuedOption{"--ptxas-options=", is_ptxas_report},
};

// "-Wall", "-Wno-unused-variable", "-Werror=shadow": a warning, never "-Wp,..." or "-Wa,...",
// which pass options on to the preprocessor or assembler (a ',' is no word character).
bool is_warning_option(std::string_view option) {
  return option.starts_with("-W") && is_word(option.substr(2));
}

// An LLVM option for "-mllvm": "-amdgpu-early-inline-all=true", "-unroll-threshold=200". One
// naming a file ("-sample-profile-file=...", "-info-output-file=...") or taking a path would read
// or write what the key does not hash, so such names and any value with a '/' are refused.
bool is_llvm_option(std::string_view argument) {
  if (!argument.starts_with('-') || !is_word(argument) || argument.find('/') != argument.npos)
    return false;
  const std::string_view name = argument.substr(0, argument.find('='));
  if (is_one_of(name, {"-march", "-mcpu", "-mattr", "-mtriple"})) // the target's, set by kjit
    return false;
  for (std::string_view file_word : {"file", "path", "dir", "load", "output", "plugin"})
    if (name.find(file_word) != name.npos)
      return false;
  return true;
}

bool is_allowed(std::string_view option) {
  if (std::find(std::begin(allowed_flags), std::end(allowed_flags), option) !=
      std::end(allowed_flags))
    return true;
  for (const ValuedOption &valued : allowed_valued_options)
    if (option.starts_with(valued.prefix))
      return valued.accepts(option.substr(valued.prefix.size()));
  return is_warning_option(option);
}

[[noreturn]] void refuse(std::string_view option, std::string_view reason) {
  throw Error(Errc::bad_option, "compile option '" + std::string(option) +
                                    "' is not allowed: " + std::string(reason));
}

void refuse_unless_allowed(std::string_view option) {
  if (is_allowed(option))
    return;
  for (const RefusalReason &refusal : refusal_reasons)
    if (refusal.prefix ? option.starts_with(refusal.spelling) : option == refusal.spelling)
      refuse(option, refusal.reason);
  refuse(option, "it is not among the options kjit knows to change only the code of what the key "
                 "hashes (README.md, \"Compile options\"); macros go in -D, headers in Headers, "
                 "the target in the Target");
}

// Options whose next item is their argument: "-mllvm -amdgpu-early-inline-all=true",
// "-Xclang -DX". Each argument is checked as that option's kind of argument.
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
    if (takes_separate_argument(option)) {
      if (i + 1 == options.size())
        refuse(option, "it needs an argument after it");
      std::string_view argument = trim(options[++i]);
      const bool llvm = option == "-mllvm";
      // "-Xclang -I/x" and "-mllvm -sample-profile-file=..." would slip past the list otherwise.
      if (llvm && !is_llvm_option(argument))
        refuse(std::string(option) + " " + std::string(argument),
               "its LLVM option names or takes a file, or is not '-name' or '-name=value'");
      if (!llvm && !(is_macro_option(argument) && is_identifier(macro_name(argument))))
        refuse_unless_allowed(argument);
      others.emplace_back(option);
      others.emplace_back(argument);
      continue;
    }
    if (!is_macro_option(option)) {
      refuse_unless_allowed(option);
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
