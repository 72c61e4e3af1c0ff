#include "kjit/templates/template.hpp"

#include "kjit/error.hpp"
#include "kjit/templates/includes.hpp"
#include "kjit/text.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <regex>
#include <xxhash.h>

namespace kjit {

namespace {

// One entry of TemplateOptions::targets, read: a vendor, an NVIDIA architecture and every newer
// one (sm_80+: `newer_than` 80), or one processor. nullopt when it is none of these.
struct TargetPattern {
  std::optional<Vendor> vendor;
  int newer_than = 0;
  std::string_view processor;
};

// 90 from "sm_90", "sm_90a" or "sm_100f" (100); 0 for anything else.
int nvidia_architecture(std::string_view arch) {
  if (!arch.starts_with("sm_"))
    return 0;
  arch.remove_prefix(3);
  const std::size_t digits = arch.find_first_not_of("0123456789");
  if (digits == 0 || arch.empty())
    return 0;
  return std::stoi(std::string(arch.substr(0, digits)));
}

std::optional<TargetPattern> target_pattern(std::string_view text) {
  if (text == "amd")
    return TargetPattern{.vendor = Vendor::amd, .newer_than = 0, .processor = {}};
  if (text == "nvidia")
    return TargetPattern{.vendor = Vendor::nvidia, .newer_than = 0, .processor = {}};
  if (text.ends_with('+')) {
    const std::string_view arch = text.substr(0, text.size() - 1);
    const int number = nvidia_architecture(arch);
    if (number == 0 || arch != "sm_" + std::to_string(number))
      return std::nullopt;
    return TargetPattern{.vendor = Vendor::nvidia, .newer_than = number, .processor = {}};
  }
  if (text.starts_with("gfx") || nvidia_architecture(text) > 0)
    return TargetPattern{.vendor = std::nullopt, .newer_than = 0, .processor = text};
  return std::nullopt;
}

// "sm_90a", "gfx942 or gfx950", "sm_80 and newer", "AMD targets or sm_89 and newer".
std::string describe_targets(const std::vector<std::string> &targets) {
  std::string text;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    std::string_view target = targets[i];
    if (i > 0)
      text += i + 1 == targets.size() ? " or " : ", ";
    if (target.ends_with('+'))
      text += std::string(target.substr(0, target.size() - 1)) + " and newer";
    else if (target == "amd" || target == "nvidia")
      text += target == "amd" ? "AMD targets" : "NVIDIA targets";
    else
      text += target;
  }
  return text;
}

bool is_identifier(std::string_view text) {
  if (text.empty() || !(std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_'))
    return false;
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// A type name as it may appear in a template argument list: identifiers, '::', template
// brackets, pointers and spaces. Nothing that could end the argument list early or inject code
// (';', braces, parentheses, quotes, '#').
bool is_type_name(std::string_view text) {
  static const std::regex grammar(R"([A-Za-z_][A-Za-z0-9_:<>, *]*)");
  return !text.empty() && std::regex_match(text.begin(), text.end(), grammar);
}

[[noreturn]] void bad_parameter(const std::string &message) {
  throw Error(Errc::bad_parameter, message);
}

// Why `value` does not fit `param`, or empty when it does.
std::string mismatch(const ParamSchema &param, const Value &value) {
  if (param.kind() == ParamSchema::Kind::type) {
    if (!value.is_type())
      return "is an integer, expected a type";
    const auto &allowed = param.allowed_types();
    if (std::find(allowed.begin(), allowed.end(), value.type()) == allowed.end())
      return "is not allowed";
    return {};
  }
  if (!value.is_integer())
    return "is a type, expected an integer";
  const auto &allowed = param.allowed_integers();
  if (!allowed.empty())
    return std::find(allowed.begin(), allowed.end(), value.integer()) == allowed.end()
               ? "is not allowed"
               : "";
  return value.integer() < param.min() || value.integer() > param.max() ? "is out of range" : "";
}

// Element types are spelled by their underlying names in name expressions: hiprtc 5.2 looks
// expressions up among demangled symbols, where the prelude's alias `half` appears as `__half`.
// bfloat16 is the prelude's own type on AMD and CUDA's on NVIDIA (see kjit/prelude.h).
std::string spell_type(const std::string &type, Vendor vendor) {
  if (type == "half")
    return "__half";
  if (type == "bfloat16")
    return vendor == Vendor::amd ? "kjit::bfloat16" : "__nv_bfloat16";
  return type;
}

class Fingerprinter {
public:
  Fingerprinter() { XXH3_128bits_reset(state_); }
  ~Fingerprinter() { XXH3_freeState(state_); }
  Fingerprinter(const Fingerprinter &) = delete;
  Fingerprinter &operator=(const Fingerprinter &) = delete;
  // Length-prefixed, so that ("ab","c") and ("a","bc") differ.
  Fingerprinter &add(std::string_view text) {
    const std::uint64_t size = text.size();
    XXH3_128bits_update(state_, &size, sizeof size);
    XXH3_128bits_update(state_, text.data(), text.size());
    return *this;
  }
  std::pair<std::uint64_t, std::uint64_t> finish() const {
    const XXH128_hash_t hash = XXH3_128bits_digest(state_);
    return {hash.high64, hash.low64};
  }

private:
  XXH3_state_t *state_ = XXH3_createState();
};

} // namespace

std::string Value::to_string() const { return is_integer() ? std::to_string(integer()) : type(); }

ParamSchema ParamSchema::type(std::vector<std::string> allowed,
                              std::optional<std::string> fallback) {
  ParamSchema p;
  p.kind_ = Kind::type;
  p.types_ = std::move(allowed);
  if (fallback)
    p.fallback_ = Value(*fallback);
  return p;
}

ParamSchema ParamSchema::integer(std::int64_t min, std::int64_t max,
                                 std::optional<std::int64_t> fallback) {
  ParamSchema p;
  p.kind_ = Kind::integer;
  p.min_ = min;
  p.max_ = max;
  if (fallback)
    p.fallback_ = Value(*fallback);
  return p;
}

ParamSchema ParamSchema::one_of(std::vector<std::int64_t> allowed,
                                std::optional<std::int64_t> fallback) {
  if (allowed.empty())
    bad_parameter("ParamSchema::one_of needs at least one value");
  ParamSchema p = integer(*std::min_element(allowed.begin(), allowed.end()),
                          *std::max_element(allowed.begin(), allowed.end()), fallback);
  p.integers_ = std::move(allowed);
  return p;
}

ParamSchema ParamSchema::tunable() const {
  ParamSchema p = *this;
  p.tunable_ = true;
  return p;
}

std::string ParamSchema::describe() const {
  if (kind_ == Kind::type)
    return "a type, one of " + join(types_, ", ");
  if (!integers_.empty()) {
    std::vector<std::string> texts;
    for (auto v : integers_)
      texts.push_back(std::to_string(v));
    return "an integer, one of " + join(texts, ", ");
  }
  return "an integer in [" + std::to_string(min_) + ", " + std::to_string(max_) + "]";
}

Template::Template(std::string name, std::string source, std::vector<ParamDecl> params,
                   TemplateOptions options)
    : name_(std::move(name)), source_(std::move(source)), params_(std::move(params)),
      options_(std::move(options)) {
  if (!is_identifier(name_))
    bad_parameter("template name '" + name_ + "' is not an identifier");
  if (options_.kernel.empty())
    options_.kernel = name_;
  if (!is_type_name(options_.kernel))
    bad_parameter(name_ + ": kernel name '" + options_.kernel + "' is not a C++ name");
  if (options_.source_name.empty())
    options_.source_name = name_ + ".hip";
  // It becomes a #line directive's file name, which ends at the line's end.
  if (std::any_of(options_.source_name.begin(), options_.source_name.end(),
                  [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); }))
    bad_parameter(name_ + ": its source name has a control character (a line break or tab); it "
                          "names a file");

  for (const std::string &target : options_.targets)
    if (!target_pattern(target))
      bad_parameter(name_ + ": target '" + target +
                    "' is not a vendor (amd, nvidia), a processor (gfx942, sm_90a) or an NVIDIA "
                    "architecture and newer (sm_80+)");

  Fingerprinter fingerprint;
  fingerprint.add(name_).add(source_).add(options_.kernel).add(options_.source_name);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto &[param_name, param] = params_[i];
    const std::string where = name_ + ": parameter '" + param_name + "'";
    if (!is_identifier(param_name))
      bad_parameter(where + " is not an identifier");
    for (std::size_t j = 0; j < i; ++j)
      if (params_[j].name == param_name)
        bad_parameter(where + " is declared twice");
    if (param.kind() == ParamSchema::Kind::type) {
      if (param.allowed_types().empty())
        bad_parameter(where + " allows no type");
      for (const auto &type : param.allowed_types())
        if (!is_type_name(type))
          bad_parameter(where + " allows '" + type + "', which is not a C++ type name");
    } else if (param.min() > param.max()) {
      bad_parameter(where + " has an empty range");
    }
    if (param.fallback()) {
      const std::string why = mismatch(param, *param.fallback());
      if (!why.empty())
        bad_parameter(where + ": default " + param.fallback()->to_string() + " " + why + "; " +
                      param_name + " is " + param.describe());
    }
    fingerprint.add(param_name).add(param.describe());
    fingerprint.add(param.fallback() ? param.fallback()->to_string() : std::string_view{});
  }
  // Refused here, before any lookup: such a file is not in the key, so a hit could be stale.
  auto refuse_unkeyed_include = [this](const std::string &file, std::string_view text) {
    if (const std::string problem = templates::find_unkeyed_include(text); !problem.empty())
      bad_parameter(name_ + ": " + file + " " + problem +
                    ", a file the cache key does not hash; declare it as a HeaderFile and include "
                    "it by that name");
  };
  refuse_unkeyed_include("source", source_);
  for (const auto &header : options_.headers) {
    refuse_unkeyed_include("header '" + header.name + "'", header.content);
    fingerprint.add(header.name).add(header.content);
  }
  for (std::string &directory : options_.include_dirs) {
    directory = templates::checked_include_directory(directory, name_);
    fingerprint.add(directory);
  }
  for (const auto &option : options_.compile_options)
    fingerprint.add(option);
  for (const auto &argument : options_.arguments) {
    if (!is_type_name(argument))
      bad_parameter(name_ + ": kernel argument type '" + argument + "' is not a C++ type name");
    fingerprint.add(argument);
  }
  fingerprint_ = fingerprint.finish();
}

const ParamDecl *Template::param(std::string_view name) const {
  auto found = std::find_if(params_.begin(), params_.end(),
                            [&](const ParamDecl &decl) { return decl.name == name; });
  return found == params_.end() ? nullptr : &*found;
}

Instance Template::bind(const ParamValues &given) const & {
  for (const auto &[name, value] : given)
    if (param(name) == nullptr) {
      std::vector<std::string> known;
      for (const auto &d : params_)
        known.push_back(d.name);
      bad_parameter(name_ + ": unknown parameter '" + name + "'; its parameters are " +
                    (known.empty() ? std::string("none") : join(known, ", ")));
    }

  Instance instance;
  instance.template_ = this;
  for (const auto &[name, param] : params_) {
    const Value *found = given.find(name);
    if (found == nullptr) {
      if (!param.fallback())
        bad_parameter(name_ + ": parameter '" + name + "' is missing; it is " + param.describe());
      instance.values_.add(name, *param.fallback());
      continue;
    }
    const std::string why = mismatch(param, *found);
    if (!why.empty())
      bad_parameter(name_ + ": parameter " + name + " = " + found->to_string() + " " + why + "; " +
                    name + " is " + param.describe());
    instance.values_.add(name, *found);
  }
  return instance;
}

std::string Instance::expression(Vendor vendor) const {
  const std::string &kernel = template_->kernel();
  if (values_.empty())
    return kernel;
  std::vector<std::string> arguments;
  for (const auto &[name, value] : values_)
    arguments.push_back(value.is_integer() ? value.to_string() : spell_type(value.type(), vendor));
  return kernel + "<" + join(arguments, ", ") + ">";
}

std::string Instance::canonical_params() const { return values_.to_string(); }

std::vector<std::string> Instance::argument_types() const {
  static const std::regex identifier(R"([A-Za-z_][A-Za-z0-9_]*)");
  std::vector<std::string> resolved;
  for (const std::string &declared : template_->arguments()) {
    // Replace whole identifiers only: T in "T*" but not in "Tile*".
    std::string out;
    auto last = declared.cbegin();
    for (std::sregex_iterator it(declared.begin(), declared.end(), identifier), end; it != end;
         ++it) {
      out.append(last, declared.cbegin() + it->position());
      const Value *value = values_.find(it->str());
      out += value != nullptr && value->is_type() ? value->type() : it->str();
      last = declared.cbegin() + it->position() + it->length();
    }
    out.append(last, declared.cend());
    resolved.push_back(std::move(out));
  }
  return resolved;
}

bool Template::builds_for(Vendor vendor, std::string_view arch) const {
  if (options_.targets.empty())
    return true;
  return std::any_of(options_.targets.begin(), options_.targets.end(), [&](const std::string &t) {
    const TargetPattern pattern = *target_pattern(t); // checked by the constructor
    if (!pattern.processor.empty())
      return pattern.processor == arch;
    return pattern.vendor == vendor &&
           (pattern.newer_than == 0 || nvidia_architecture(arch) >= pattern.newer_than);
  });
}

void Template::check_target(Vendor vendor, std::string_view arch) const {
  if (!builds_for(vendor, arch))
    throw Error(Errc::unsupported_target, "template " + name_ + " builds only for " +
                                              describe_targets(options_.targets) + ", not " +
                                              std::string(arch));
}

} // namespace kjit
