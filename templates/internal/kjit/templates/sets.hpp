#pragma once
// Variant sets: which instantiations `kjit prebuild` compiles ahead of time. The built-in sets are
// the JSON files in templates/sets/, embedded into the library like the kernel sources; a user's
// library declares its own in files of the same format (kjit prebuild --sets FILE).
//
// One set per file (the fields, then an example):
//
//   "name"         identifies the set in messages
//   "level"        PREBUILD_KERNELS / --level: 1 core, 2 inference, 3 minimal
//   "description"  optional
//   "values"       optional named lists: {"types": ["half", "float"], "sizes": [1024, 4096]}
//   "models"       optional: {"Llama-3-8B": {"hidden": 4096, "intermediate": 14336}}; "@hidden"
//                  is every model's "hidden" value (sorted, each once)
//   "templates"    optional, user sets only: a library's templates from source files (below)
//   "variants"     [{"template": "scale", "params": {"T": "@types", "N": [256, 4096]}}]
//                  compiled for the targets its template builds for (Template::targets: a
//                  template written for MFMA or wgmma says so itself); an item may narrow them
//                  with "vendors": ["nvidia"] (or "amd"): compiled for those targets only (what
//                  only one vendor's wrappers ask for), and "processors": ["gfx942"]: compiled
//                  for targets of those processors only
//
// A "templates" item declares a template as the library's C++ `Template` does, so that a variant
// prebuilt from the set has exactly the key the library's JIT call computes:
//
//   {"name": "rms_norm",                  the Template's name (part of the key)
//    "source": "kernels/rms_norm.hip",    relative to the set file; the compiler's diagnostics
//                                         name it so (TemplateOptions::source_name, keyed)
//    "params": ["T", "HIDDEN"],           its template parameters, in the kernel's order
//    "kernel": "rms_norm_kernel",         optional: the __global__ function template; default name
//    "arguments": ["T*", "const T*", "int"],   optional: the kernel's argument types
//    "headers": ["include", "extra.h"],   optional: files the source #includes, read at build time
//                                         (their content is in the key): a file is named by its
//                                         file name, a folder gives every file under it, named by
//                                         its path relative to the folder ("mylib/math.h")
//    "include_dirs": ["../include"],     optional: header library directories, relative to the
//                                         set file (TemplateOptions::include_dirs: the headers
//                                         included from them are keyed through a manifest)
//    "compile_options": ["-DMYLIB_FAST=1"],   optional: as TemplateOptions::compile_options
//    "tunable": ["VEC"]}                  optional: parameters a tuner may choose among the values
//                                         its variants list (kjit tune --sets;
//                                         ParamSchema::tunable)
//
// Each variants item names a template (one of the file's "templates", else a built-in) and, per
// parameter, one value, a list of values, or "@name" (a "values" list or a "models" field); it
// stands for every combination. Parameters are matched by name against the template's
// declaration, whatever order the item lists them in; a template from a source file accepts the
// values its variants list (a string is a type, an integer an integer). Parameters left out take
// the template's default. A field this format does not name, a parameter the template does not
// declare and a template name no one declares are errors naming the file and line.
//
// To add variants to a level, add an item to that level's file, or a new file with that "level"
// in templates/sets/ (every *.json there is embedded). For kjit::ops, list exactly what the
// wrappers pick (ops/src/variants.hpp); tests/ops/variants_in_sets_test.cpp checks each level.
#include "kjit/templates/template.hpp"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::templates {

// One instantiation a set names.
struct SetVariant {
  const Template *tmpl;        // built-in, or owned by the set
  ParamValues params;          // as listed (defaults not yet applied)
  std::vector<Vendor> vendors; // the targets' vendors it is for; empty: every vendor
  // The targets' processors it is for ("gfx942", as jit::Target::arch() reads); empty: every one.
  std::vector<std::string> processors;

  bool for_vendor(Vendor vendor) const {
    return vendors.empty() || std::find(vendors.begin(), vendors.end(), vendor) != vendors.end();
  }
  // For a target of this vendor and processor: one its template builds for (Template::targets),
  // narrowed by the item's vendors and processors.
  bool for_target(Vendor vendor, std::string_view processor) const {
    return for_vendor(vendor) && tmpl->builds_for(vendor, processor) &&
           (processors.empty() ||
            std::find(processors.begin(), processors.end(), processor) != processors.end());
  }
};

class VariantSet {
public:
  const std::string &name() const { return name_; }
  int level() const { return level_; }
  // Where it came from, for messages: "built-in set core.json", or the file's path.
  const std::string &origin() const { return origin_; }
  // The templates the file declares from source files, in its order.
  std::vector<const Template *> templates() const;
  // Every combination, in the order the file lists them.
  const std::vector<SetVariant> &variants() const { return variants_; }

  // Parses a set. `base_dir` resolves the paths of source templates and headers, which are read
  // now. Throws Error(bad_parameter) naming `origin`, the line where known, and what is wrong
  // (bad JSON, a missing or unknown field, an unknown template, parameter or "@name", a value of
  // the wrong kind); parameter values are checked against the template when bound.
  static VariantSet parse(std::string_view json_text, std::string origin,
                          const std::filesystem::path &base_dir);
  // Reads and parses a set file. Throws Error(file_io) when it cannot be read.
  static VariantSet read_file(const std::filesystem::path &path);

  VariantSet(VariantSet &&) noexcept = default;
  VariantSet &operator=(VariantSet &&) noexcept = default;

private:
  VariantSet() = default;
  std::string name_;
  int level_ = 0;
  std::string origin_;
  std::vector<std::unique_ptr<Template>> templates_; // stable addresses for SetVariant::tmpl
  std::vector<SetVariant> variants_;
};

// The sets embedded from templates/sets/*.json, in file name order.
const std::vector<VariantSet> &builtin_sets();

// The lowest built-in level whose sets name this instance (its template's parameters after
// defaults), or 0 when none does: what a prebuilt-mode miss suggests to prebuild.
int builtin_level_of(const Instance &instance);

} // namespace kjit::templates
