#pragma once
// Kernel templates: a source string, the kernel it defines, and the schema of its parameters.
// Binding parameters validates them and yields the instantiation expression ("scale<__half,
// 4096>") that the compiler instantiates and lowers.
#include "kjit/header_file.hpp"
#include "kjit/vendor.hpp"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace kjit {

// A parameter value: a C++ type name ("half") or an integer.
class Value {
public:
  Value(const char *type_name) : v_(std::string(type_name)) {}
  Value(std::string type_name) : v_(std::move(type_name)) {}
  Value(std::string_view type_name) : v_(std::string(type_name)) {}
  template <typename I>
  requires(std::is_integral_v<I> && !std::is_same_v<I, bool> && !std::is_same_v<I, char>)
      Value(I integer)
      : v_(static_cast<std::int64_t>(integer)) {}

  bool is_integer() const { return std::holds_alternative<std::int64_t>(v_); }
  bool is_type() const { return !is_integer(); }
  std::int64_t integer() const { return std::get<std::int64_t>(v_); }
  const std::string &type() const { return std::get<std::string>(v_); }
  std::string to_string() const; // "half", "4096"
  bool operator==(const Value &) const = default;

private:
  std::variant<std::string, std::int64_t> v_;
};

// The parameters of one instantiation: each name once, with its value. Iteration yields (name,
// value) pairs in the order the names were added; order does not change what they mean, so
// equality and the text form ignore it.
class ParamValues {
public:
  using value_type = std::pair<std::string, Value>;
  using const_iterator = std::vector<value_type>::const_iterator;

  ParamValues() = default;
  // {{"T", "half"}, {"N", 4096}}. Throws Error(bad_parameter) when a name is given twice.
  ParamValues(std::initializer_list<value_type> values);

  // The value of `name`, or nullptr when there is none. Inline: the memory tier's hit compares
  // parameters with it.
  const Value *find(std::string_view name) const {
    for (const auto &[param, value] : values_)
      if (param == name)
        return &value;
    return nullptr;
  }
  // The value of `name`. Throws Error(bad_parameter) naming it when there is none.
  const Value &get(std::string_view name) const;
  // Gives `name` the value `value`: replaces its value where it has one, else appends it.
  void set(std::string name, Value value);
  // Appends `name`. Throws Error(bad_parameter) when it already has a value.
  void add(std::string name, Value value);
  // Appends each of `others`' names, as add does.
  void add(const ParamValues &others);

  const_iterator begin() const { return values_.begin(); }
  const_iterator end() const { return values_.end(); }
  std::size_t size() const { return values_.size(); }
  bool empty() const { return values_.empty(); }

  // The same names with the same values, in any order.
  bool operator==(const ParamValues &other) const;
  // These values ordered by name.
  ParamValues sorted() const;
  // "N=4096,T=half": ordered by name; the one text form of parameters in keys, records,
  // listings and messages.
  std::string to_string() const;

private:
  std::vector<value_type> values_;
};

// What values a parameter accepts.
class ParamSchema {
public:
  enum class Kind { type, integer };

  // A type parameter whose value is one of `allowed` (C++ type names).
  static ParamSchema type(std::vector<std::string> allowed,
                          std::optional<std::string> fallback = {});
  // An integer parameter in [min, max].
  static ParamSchema integer(std::int64_t min, std::int64_t max,
                             std::optional<std::int64_t> fallback = {});
  // An integer parameter from a fixed set (tile shapes: {64, 128, 256}).
  static ParamSchema one_of(std::vector<std::int64_t> allowed,
                            std::optional<std::int64_t> fallback = {});

  // This parameter as a tunable one: its value changes how the kernel runs (vector width,
  // threads, tiles, stages) but not what it computes beyond the kernel's tolerance, so a tuner may
  // choose it (kjit/runtime/tuner.hpp). Parameters are problem parameters otherwise (T, HIDDEN):
  // they come from the caller's data and tuning never changes them.
  ParamSchema tunable() const;
  bool is_tunable() const { return tunable_; }

  Kind kind() const { return kind_; }
  const std::vector<std::string> &allowed_types() const { return types_; }
  const std::vector<std::int64_t> &allowed_integers() const { return integers_; } // empty: range
  std::int64_t min() const { return min_; }
  std::int64_t max() const { return max_; }
  const std::optional<Value> &fallback() const { return fallback_; }
  // "one of float, half, bfloat16", "integer in [1, 1048576]"
  std::string describe() const;

private:
  Kind kind_ = Kind::integer;
  std::vector<std::string> types_;
  std::vector<std::int64_t> integers_;
  std::int64_t min_ = 0, max_ = 0;
  std::optional<Value> fallback_;
  bool tunable_ = false;
};

struct ParamDecl {
  std::string name;
  ParamSchema param;
};

class Instance;

// What a template states about which of its tunable variants a tuner may try on a device. Each
// function may be empty (no such constraint). The tuner drops a variant that breaks one before
// compiling it, except `threads`, which it checks against what the driver reports for the
// compiled kernel: the registers the code generator allotted bound the threads a block may have.
struct TuningRules {
  // Why `instance` cannot run on `target` ("sm_90a", "gfx90a:sramecc+:xnack-"), or "" when it
  // can: values that do not fit together (a vector width that does not divide the row), an
  // instruction the target lacks.
  std::function<std::string(const Instance &instance, std::string_view target)> fits = {};
  // Bytes of shared memory a block of `instance` uses; checked against the device's limit.
  std::function<std::int64_t(const Instance &instance)> shared_bytes = {};
  // Threads per block `instance` launches with.
  std::function<std::int64_t(const Instance &instance)> threads = {};
  // Whether candidates are timed with the L2 cache flushed before each burst: for kernels whose
  // inputs would otherwise stay in L2 between repetitions and be timed at cache speed.
  bool flush_l2 = false;
};

struct TemplateOptions {
  std::string kernel = {}; // the __global__ function template; default: the template name
  // The source's file as its author names it ("kernels/axpby.hip", relative to the library's
  // project): the compiler's diagnostics name it ("kernels/axpby.hip:3:10: error: ..."). Default:
  // "<name>.hip". Part of the key when given: it is the source's #line name, so __FILE__,
  // assert() messages and line tables (-lineinfo, -g) carry it into the code object.
  std::string source_name = {};
  std::vector<HeaderFile> headers = {};
  // Directories of a header library the source includes from (-I, searched in this order after
  // the HeaderFiles). Each must be a readable directory; kept as absolute paths. The key covers
  // every header a compile could read from them (docs/ARCHITECTURE.md, "Header libraries").
  std::vector<std::string> include_dirs = {};
  std::vector<std::string> compile_options = {};
  // The kernel's parameter types as the source declares them, in terms of the template's type
  // parameters: {"const T*", "T*", "float", "int"}. Launches are checked against them. Empty:
  // the template declares none (callers then name the signature themselves).
  std::vector<std::string> arguments = {};
  // Constraints on its tunable parameters' values (above).
  TuningRules tuning = {};
  // The targets its source builds for, where it uses what only some have (wgmma, MFMA, mma.sync,
  // fp8). Each entry is a vendor ("amd", "nvidia"), a processor as jit::Target::arch() reads it
  // ("gfx942", "sm_90a"), or an NVIDIA architecture and every newer one ("sm_80+", which takes
  // sm_90a and sm_100f too). Empty: every target.
  std::vector<std::string> targets = {};
};

class Template;

// A template with its parameters validated and completed with defaults, in declaration order.
class Instance {
public:
  const Template &source_template() const { return *template_; }
  const ParamValues &values() const { return values_; }
  // The expression the compiler instantiates. Types are spelled by their underlying names for
  // `vendor` (hiprtc 5.2 matches name expressions against demangled symbols, where the alias
  // `half` reads `__half`).
  std::string expression(Vendor vendor) const;
  // "N=4096,T=half": values().to_string(), for keys and listings.
  std::string canonical_params() const;
  // The template's declared kernel argument types with type parameters replaced by their values
  // ("T*" with T=half reads "half*"). Empty when the template declares none.
  std::vector<std::string> argument_types() const;

private:
  friend class Template;
  const Template *template_ = nullptr;
  ParamValues values_;
};

class Template {
public:
  // Throws Error(bad_parameter) when the schema itself is malformed (a name that is not an
  // identifier, a duplicate, an empty type list, min > max, a default outside the schema).
  Template(std::string name, std::string source, std::vector<ParamDecl> params,
           TemplateOptions options = {});

  const std::string &name() const { return name_; }
  const std::string &source() const { return source_; }
  const std::string &kernel() const { return options_.kernel; }
  // TemplateOptions::source_name, or "<name>.hip" where none was given.
  const std::string &source_name() const { return options_.source_name; }
  const std::vector<ParamDecl> &params() const { return params_; }
  const std::vector<HeaderFile> &headers() const { return options_.headers; }
  const std::vector<std::string> &include_dirs() const { return options_.include_dirs; }
  const std::vector<std::string> &compile_options() const { return options_.compile_options; }
  const std::vector<std::string> &arguments() const { return options_.arguments; }
  const TuningRules &tuning() const { return options_.tuning; }
  const std::vector<std::string> &targets() const { return options_.targets; }
  // Whether its source builds for a target of `vendor` whose processor is `arch` ("gfx90a",
  // "gfx11-generic", "sm_90a"): checked before any compiler is loaded.
  bool builds_for(Vendor vendor, std::string_view arch) const;
  // Throws Error(unsupported_target) unless builds_for(vendor, arch), in one line naming the
  // targets it builds for: "template gemm_wgmma builds only for sm_90a, not sm_90".
  void check_target(Vendor vendor, std::string_view arch) const;
  // The declaration of parameter `name`; nullptr when the template has none of that name.
  const ParamDecl *param(std::string_view name) const;
  // 128 bits over everything that defines the template; identity in the in-memory tier.
  const std::pair<std::uint64_t, std::uint64_t> &fingerprint() const { return fingerprint_; }

  // Validates and completes `params`. Throws Error(bad_parameter) naming the parameter, the
  // value and what the schema allows: missing (no default), unknown, wrong kind, out of range.
  // The Instance refers to this Template, so a temporary one cannot bind (it would dangle).
  Instance bind(const ParamValues &params) const &;
  Instance bind(const ParamValues &params) const && = delete;

private:
  std::string name_;
  std::string source_;
  std::vector<ParamDecl> params_;
  TemplateOptions options_;
  std::pair<std::uint64_t, std::uint64_t> fingerprint_;
};

} // namespace kjit
