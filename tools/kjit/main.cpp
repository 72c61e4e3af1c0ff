// The kjit command line: inspect compilers and templates, compile variants into the cache, and
// inspect and manage the cache (cache_command.cpp).
// Exit status: exit_status.hpp; every failure is one clear line on stderr.
#include "cache_command.hpp"
#include "exit_status.hpp"
#include "json_output.hpp"
#include "prebuild_command.hpp"
#include "table.hpp"
#include "template_args.hpp"
#include "tune_command.hpp"

#include "kjit/input_file.hpp"
#include "kjit/jit/compiler.hpp"
#include "kjit/kjit.hpp"
#include "kjit/log.hpp"
#include "kjit/templates/sets.hpp"
#include "kjit/text.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>

namespace kjit::cli {
namespace {

using nlohmann::json;

// ---- kjit targets ---------------------------------------------------------------------------

// `items` joined with ", " into lines of at most `width` characters (an item longer than that
// gets a line of its own).
std::vector<std::string> wrap(const std::vector<std::string> &items, std::size_t width) {
  std::vector<std::string> lines{""};
  for (const auto &item : items) {
    if (!lines.back().empty() && lines.back().size() + 2 + item.size() > width) {
      lines.back() += ",";
      lines.emplace_back();
    }
    lines.back() += (lines.back().empty() ? "" : ", ") + item;
  }
  return lines;
}

// What `kjit targets` found of one vendor's compiler.
struct CompilerFound {
  Vendor vendor;
  std::string unavailable; // why it could not be loaded; "" when it was
  std::string name;
  std::string release;
  std::string identity; // sonames and build ids
  std::vector<jit::TargetSupport> targets;
};

std::vector<CompilerFound> find_compilers() {
  std::vector<CompilerFound> found;
  for (Vendor vendor : {Vendor::amd, Vendor::nvidia}) {
    try {
      auto compiler = jit::load_compiler(vendor);
      found.push_back({vendor, "", std::string(compiler->name()), compiler->release(),
                       compiler->identity(), compiler->supported_targets()});
    } catch (const Error &error) {
      found.push_back({vendor, error.summary(), "", "", "", {}});
    }
  }
  return found;
}

json to_json(const std::vector<CompilerFound> &compilers) {
  json listing = json::array();
  for (const CompilerFound &compiler : compilers) {
    if (!compiler.unavailable.empty()) {
      listing.push_back({{"vendor", to_string(compiler.vendor)},
                         {"available", false},
                         {"reason", compiler.unavailable}});
      continue;
    }
    json targets = json::array();
    for (const jit::TargetSupport &support : compiler.targets)
      targets.push_back({{"arch", support.arch}, {"features", support.features}});
    listing.push_back({{"vendor", to_string(compiler.vendor)},
                       {"compiler", compiler.name},
                       {"available", true},
                       {"release", compiler.release},
                       {"version", compiler.identity},
                       {"targets", targets}});
  }
  return {{"compilers", listing}};
}

// The table fits 100 columns: the release, and the targets wrapped. `verbose` adds the full
// identity (sonames and build ids) on a line of its own under each compiler.
void print_table(const std::vector<CompilerFound> &compilers, bool verbose, std::ostream &out) {
  constexpr std::size_t targets_width = 64;
  Table table({"compiler", "release", "targets"});
  for (const CompilerFound &compiler : compilers) {
    if (!compiler.unavailable.empty()) {
      table.add({std::string(to_string(compiler.vendor)), "unavailable", compiler.unavailable});
      continue;
    }
    std::vector<std::string> names;
    for (const jit::TargetSupport &support : compiler.targets) {
      std::string name = support.arch;
      for (const auto &feature : support.features)
        name += ":" + feature + "±";
      names.push_back(name);
    }
    const std::vector<std::string> lines = wrap(names, targets_width);
    for (std::size_t i = 0; i < lines.size(); ++i)
      table.add({i == 0 ? compiler.name : "", i == 0 ? compiler.release : "", lines[i]});
    if (verbose)
      table.add({"", "identity", compiler.identity});
  }
  table.print(out);
}

int run_targets(bool as_json, bool verbose) {
  const std::vector<CompilerFound> compilers = find_compilers();
  if (as_json)
    print_json(to_json(compilers));
  else
    print_table(compilers, verbose, std::cout);
  return 0;
}

// ---- kjit templates -------------------------------------------------------------------------

// The built-in templates, or with `sets_file` the templates that set file declares (`set` holds
// them).
std::vector<const Template *> list_templates(const std::string &sets_file,
                                             std::optional<templates::VariantSet> &set) {
  std::vector<const Template *> listed;
  if (!sets_file.empty()) {
    set.emplace(templates::VariantSet::read_file(sets_file));
    return set->templates();
  }
  for (const Template &tmpl : templates::builtin())
    listed.push_back(&tmpl);
  return listed;
}

json param_json(const std::string &name, const ParamSchema &param) {
  json item = {{"name", name},
               {"kind", param.kind() == ParamSchema::Kind::type ? "type" : "integer"},
               {"accepts", param.describe()}};
  if (param.kind() == ParamSchema::Kind::type)
    item["allowed"] = param.allowed_types();
  else if (!param.allowed_integers().empty())
    item["allowed"] = param.allowed_integers();
  else
    item["range"] = {param.min(), param.max()};
  if (param.fallback())
    item["default"] = param.fallback()->is_integer() ? json(param.fallback()->integer())
                                                     : json(param.fallback()->to_string());
  return item;
}

json to_json(const std::vector<const Template *> &listed) {
  json listing = json::array();
  for (const Template *tmpl : listed) {
    json params = json::array();
    for (const auto &[name, param] : tmpl->params())
      params.push_back(param_json(name, param));
    listing.push_back({{"name", tmpl->name()},
                       {"kernel", tmpl->kernel()},
                       {"targets", tmpl->targets()},
                       {"params", params}});
  }
  return {{"templates", listing}};
}

void print_table(const std::vector<const Template *> &listed, std::ostream &out) {
  Table table({"template", "targets", "parameter", "accepts", "default"});
  for (const Template *tmpl : listed) {
    // What it builds for (Template::targets); "any" where it is written for every target.
    const std::string targets = join(tmpl->targets(), ",");
    bool first = true;
    for (const auto &[name, param] : tmpl->params()) {
      table.add({first ? tmpl->name() : "", first ? (targets.empty() ? "any" : targets) : "", name,
                 param.describe(), param.fallback() ? param.fallback()->to_string() : ""});
      first = false;
    }
  }
  table.print(out);
}

int run_templates(bool as_json, const std::string &sets_file) {
  std::optional<templates::VariantSet> set;
  const std::vector<const Template *> listed = list_templates(sets_file, set);
  if (as_json)
    print_json(to_json(listed));
  else
    print_table(listed, std::cout);
  return 0;
}

// ---- kjit compile ---------------------------------------------------------------------------

struct CompileArgs {
  std::string template_name;
  std::string source_file;
  std::string source_name; // --source: the name its log gives it (default: its file name)
  std::string sets_file;   // the template is the one this set file declares
  std::string kernel;
  std::vector<std::string> params;
  std::string target;
  std::vector<std::string> headers;      // --source: [NAME=]FILE
  std::vector<std::string> include_dirs; // --source: -I DIR
  std::vector<std::string> defines;      // --source: NAME[=VALUE]
  std::vector<std::string> options;      // --source: compile options
};

// --header [NAME=]FILE: the file, named as the source #includes it (default: its file name).
HeaderFile header_from(const std::string &spec) {
  const std::size_t equals = spec.find('=');
  const std::string file = equals == std::string::npos ? spec : spec.substr(equals + 1);
  const std::string name = equals == std::string::npos
                               ? std::filesystem::path(file).filename().string()
                               : spec.substr(0, equals);
  if (name.empty() || file.empty())
    throw Error(Errc::bad_usage, "--header " + spec + ": expected FILE or NAME=FILE");
  return {name, read_input_file(file, "--header")};
}

// A template for a source file given on the command line: its parameters are those given, in
// the order given, each accepting exactly the value given; its headers and options those given.
Template template_from_file(const CompileArgs &args, const ParamValues &params) {
  std::vector<ParamDecl> decls;
  for (const auto &[name, value] : params)
    decls.push_back({name, value.is_integer()
                               ? ParamSchema::integer(value.integer(), value.integer())
                               : ParamSchema::type({value.type()})});
  TemplateOptions options{.kernel = args.kernel,
                          .source_name =
                              args.source_name.empty()
                                  ? std::filesystem::path(args.source_file).filename().string()
                                  : args.source_name,
                          .include_dirs = args.include_dirs,
                          .compile_options = args.options};
  for (const std::string &spec : args.headers)
    options.headers.push_back(header_from(spec));
  for (const std::string &define : args.defines)
    options.compile_options.push_back("-D" + define);
  return Template(args.kernel, read_input_file(args.source_file, "--source"), std::move(decls),
                  std::move(options));
}

// What `kjit compile` found or made.
struct CompileResult {
  std::string key;
  std::string origin;
  bool cached = false; // found in a tier, not compiled by this call
  std::string template_name;
  std::string kernel;
  std::string lowered_name;
  std::string target;
  double compile_ms = 0;
  double elapsed_ms = 0;
  std::size_t code_bytes = 0;
  std::string entry; // empty: kept in memory only
};

CompileResult compile_variant(const CompileArgs &args) {
  if (args.source_file.empty() == args.template_name.empty())
    throw Error(Errc::bad_usage,
                "name a library template (kjit compile scale ...) or give --source FILE, not both");
  if (!args.source_file.empty() && args.kernel.empty())
    throw Error(Errc::bad_usage, "--source needs --kernel NAME");
  if (args.source_file.empty() &&
      !(args.headers.empty() && args.include_dirs.empty() && args.defines.empty() &&
        args.options.empty() && args.source_name.empty()))
    throw Error(Errc::bad_usage,
                "--header, -D, --option and --source-name go with --source, as -I does (a "
                "template and a set file declare their own)");
  if (args.target.empty())
    throw Error(Errc::bad_target, "--target is required (e.g. --target gfx90a or sm_90)");

  const ParamValues params = parse_params(args.params);
  std::optional<Template> from_file;
  std::optional<templates::VariantSet> set;
  if (!args.source_file.empty())
    from_file.emplace(template_from_file(args, params));
  else if (!args.sets_file.empty())
    set.emplace(templates::VariantSet::read_file(args.sets_file));
  const Template &tmpl = from_file ? *from_file
                         : set     ? template_from_set(*set, args.template_name)
                                   : templates::find(args.template_name);
  const auto target = jit::Target::parse(args.target);

  Runtime runtime;
  const auto started = std::chrono::steady_clock::now();
  const CodeObject &object = runtime.compile(tmpl, params, target);
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  const bool cached = object.origin() != Origin::compiled;
  return {.key = object.key().hex(),
          .origin = std::string(to_string(object.origin())),
          .cached = cached,
          .template_name = tmpl.name(),
          .kernel = object.expression(),
          .lowered_name = object.lowered_name(),
          .target = target.id(),
          .compile_ms = cached ? 0.0 : object.compile_ms(),
          .elapsed_ms = elapsed_ms,
          .code_bytes = object.code().size(),
          .entry = object.entry_path().string()};
}

json to_json(const CompileResult &result) {
  return {{"key", result.key},
          {"cached", result.cached},
          {"origin", result.origin},
          {"template", result.template_name},
          {"kernel", result.kernel},
          {"lowered_name", result.lowered_name},
          {"target", result.target},
          {"compile_ms", result.compile_ms},
          {"elapsed_ms", result.elapsed_ms},
          {"code_bytes", result.code_bytes},
          {"entry", result.entry}};
}

void print_table(const CompileResult &result, std::ostream &out) {
  out << result.kernel << " for " << result.target << ": "
      << (result.cached
              ? "cache hit (" + result.origin + ")"
              : "compiled in " + std::to_string(static_cast<long>(result.compile_ms)) + " ms")
      << ", " << result.code_bytes << " bytes\n"
      << "  key   " << result.key << '\n'
      << "  entry " << (result.entry.empty() ? "(memory only)" : result.entry) << '\n';
}

int run_compile(const CompileArgs &args, bool as_json) {
  const CompileResult result = compile_variant(args);
  if (as_json)
    print_json(to_json(result));
  else
    print_table(result, std::cout);
  return 0;
}

int run(int argc, char **argv) {
  CLI::App app{"kjit: JIT kernel compiler and cache for GPU kernels (hiprtc, NVRTC)", "kjit"};
  app.require_subcommand(1);
  bool as_json = false;
  app.add_flag("--json", as_json, "print one JSON document instead of a table");

  auto *targets = app.add_subcommand("targets", "compilers found and the targets each supports");
  bool verbose_targets = false;
  targets->add_flag("-v,--verbose", verbose_targets,
                    "also each compiler's full identity (sonames, build ids), as in --json");
  auto *templates_cmd =
      app.add_subcommand("templates", "templates and their parameters (type, values, default)");
  std::string templates_sets;
  templates_cmd->add_option("--sets", templates_sets, "a set file: the templates it declares");
  CompileArgs compile_args;
  auto *compile = app.add_subcommand("compile", "compile one variant into the cache (or hit it)");
  compile->add_option("template,--template", compile_args.template_name,
                      "a template from `kjit templates` (or from --sets FILE)");
  compile->add_option("--sets", compile_args.sets_file,
                      "a set file: the template as it declares it (parameters checked by name)");
  compile->add_option("--source", compile_args.source_file, "compile a kernel from this file");
  compile->add_option("--header", compile_args.headers,
                      "--source: [NAME=]FILE the source #includes as NAME (default its file name)");
  compile->add_option("-I,--include-dir", compile_args.include_dirs,
                      "--source: DIR, a header library directory (searched in order; every header "
                      "included from it is in the key)");
  compile->add_option("-D", compile_args.defines, "--source: NAME[=VALUE], a macro definition");
  compile->add_option("--option", compile_args.options, "--source: a compile option");
  compile->add_option("--kernel", compile_args.kernel, "the kernel template in --source");
  compile->add_option("--source-name", compile_args.source_name,
                      "--source: the name the compiler's log gives it, keyed (default: its file "
                      "name; a library's TemplateOptions::source_name to find its variant)");
  compile->add_option("-p,--param", compile_args.params, "NAME=VALUE, repeatable, in order");
  compile->add_option("--target", compile_args.target, "gfx90a, gfx90a:sramecc+:xnack-, sm_90...");
  for (auto *command : {targets, templates_cmd, compile})
    command->add_flag("--json", as_json, "print one JSON document instead of a table");
  CacheArgs cache_args;
  CLI::App *cache = add_cache_command(app, cache_args, as_json);
  PrebuildArgs prebuild_args;
  auto [prebuild, prebuild_worker] = add_prebuild_command(app, prebuild_args, as_json);
  TuneArgs tune_args;
  CLI::App *tune = add_tune_command(app, tune_args, as_json);

  // CLI11 would say only "a subcommand is required": name the word and what is accepted.
  auto check_command = [](const CLI::App &parent, const char *word, const std::string &what) {
    if (word[0] == '-')
      return;
    std::string names;
    for (const CLI::App *command : parent.get_subcommands({})) {
      if (command->get_name() == word)
        return;
      if (!command->get_group().empty()) // hidden commands have none
        names += (names.empty() ? "" : ", ") + command->get_name();
    }
    throw Error(Errc::bad_usage, "unknown " + what + " '" + word + "'; commands: " + names);
  };
  if (argc > 1)
    check_command(app, argv[1], "command");
  if (argc > 2 && std::string_view(argv[1]) == "cache")
    check_command(*cache, argv[2], "cache command");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &help) {
    return app.exit(help);
  } catch (const CLI::ParseError &error) {
    std::cerr << "kjit: " << error.what() << " (see kjit --help)\n";
    return exit_bad_input;
  }
  // The logger reads KJIT_LOG_LEVEL when it is first used: made here, every command says that the
  // variable is wrong, also one that logs nothing (kjit templates).
  log();
  if (*targets)
    return run_targets(as_json, verbose_targets);
  if (*templates_cmd)
    return run_templates(as_json, templates_sets);
  if (*cache)
    return run_cache(*cache, cache_args, as_json);
  if (*prebuild)
    return run_prebuild(prebuild_args, as_json, std::cout);
  if (*prebuild_worker)
    return run_prebuild_worker(prebuild_args);
  if (*tune)
    return run_tune(*tune, tune_args, as_json);
  return run_compile(compile_args, as_json);
}

} // namespace
} // namespace kjit::cli

int main(int argc, char **argv) {
  using namespace kjit::cli;
  try {
    return run(argc, argv);
  } catch (const kjit::Error &error) {
    std::cerr << "kjit: " << error.summary() << '\n';
    if (!error.detail().empty())
      std::cerr << error.detail() << '\n';
    return exit_status_of(error.code());
  } catch (const std::system_error &error) { // std::filesystem's among them: the system refused
    std::cerr << "kjit: " << error.what() << '\n';
    return exit_io_failure;
  } catch (const std::exception &error) {
    std::cerr << "kjit: internal error: " << error.what() << '\n';
    return exit_internal;
  }
}
