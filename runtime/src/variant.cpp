#include "variant.hpp"

#include "include_scan.hpp"
#include "kjit/error.hpp"
#include "kjit/jit/options.hpp"
#include "kjit/templates/kernel_declaration.hpp"
#include "kjit/templates/library.hpp"

#include <algorithm>
#include <chrono>

namespace kjit {

namespace {

// The key's record of a parameter: its kind and value, so that a type and an integer of the same
// spelling can never give one key. Only hashed and shown, never parsed: the entry header carries
// the parameters themselves (EntryHeader::parameters).
std::string param_text(const Value &value) {
  return (value.is_integer() ? "int:" : "type:") + value.to_string();
}

std::vector<cache::EntryParameter> entry_parameters(const Instance &instance) {
  std::vector<cache::EntryParameter> parameters;
  for (const auto &[name, value] : instance.values())
    parameters.push_back(value.is_integer() ? cache::EntryParameter{name, value.integer()}
                                            : cache::EntryParameter{name, value.type()});
  return parameters;
}

} // namespace

VariantDescription describe_variant(const Instance &instance, const jit::Target &target,
                                    const CompilerIdentity &compiler,
                                    const std::vector<std::string> &runtime_include_dirs) {
  const Template &tmpl = instance.source_template();
  std::vector<HeaderFile> headers = {templates::prelude()};
  headers.insert(headers.end(), tmpl.headers().begin(), tmpl.headers().end());
  std::vector<std::string> options = tmpl.compile_options();
  options.push_back("-DKJIT_WARP_SIZE=" + std::to_string(target.warp_size()));
  VariantDescription variant{
      .request = {.program_name = tmpl.source_name(),
                  .source = tmpl.source(),
                  .pre_includes = {templates::prelude().name},
                  .headers = std::move(headers),
                  .include_dirs = tmpl.include_dirs(),
                  .name_expressions = {instance.expression(target.vendor())},
                  .options = jit::canonicalize_options(options),
                  .target = target},
      .compiler = compiler,
      .key_inputs = {},
      .key = {},
  };
  variant.request.include_dirs.insert(variant.request.include_dirs.end(),
                                      runtime_include_dirs.begin(), runtime_include_dirs.end());
  const auto &request = variant.request;

  auto &key = variant.key_inputs;
  key.add("template", tmpl.name());
  // The program name is the source's #line name: __FILE__, assert() messages and line tables
  // (-lineinfo, -g) carry it into the code (NVRTC 13 for sm_90 gives other bytes for another name
  // when the source uses __FILE__ or with -lineinfo; hiprtc's clang writes it alike). The default
  // one, "<template>.hip", is keyed by the template's name above, so keys of templates without a
  // name of their own stay as they were.
  if (tmpl.source_name() != tmpl.name() + ".hip")
    key.add("source-name", tmpl.source_name());
  key.add("source", cache::sha256_hex(request.source));
  auto sorted_headers = request.headers;
  std::sort(sorted_headers.begin(), sorted_headers.end(),
            [](const auto &a, const auto &b) { return a.name < b.name; });
  for (const auto &header : sorted_headers)
    key.add("header:" + header.name, cache::sha256_hex(header.content));
  for (const auto &include : request.pre_includes)
    key.add("pre-include", include);
  // Their paths are not keyed (a library installed elsewhere is the same library): the headers
  // read from them are, by keyed_with_headers.
  if (!request.include_dirs.empty())
    key.add("include-dirs", std::to_string(request.include_dirs.size()));
  for (const auto &expression : request.name_expressions)
    key.add("expression", expression);
  for (const auto &[name, value] : instance.values())
    key.add("param:" + name, param_text(value));
  for (const auto &option : request.options)
    key.add("option", option);
  key.add("target", target.id());
  key.add("compiler", compiler.identity);
  for (const auto &[name, value] : compiler.environment)
    key.add("env:" + name, value);
  variant.key = key.finish();
  return variant;
}

jit::CompileResult compile_variant(const jit::Compiler &compiler,
                                   const jit::CompileRequest &request, const Template &tmpl) {
  try {
    return compiler.compile(request);
  } catch (const Error &error) {
    if (error.code() != Errc::compile_error)
      throw;
    const std::string mismatch = templates::kernel_mismatch(tmpl);
    if (mismatch.empty())
      throw;
    throw Error(Errc::compile_error, "template " + tmpl.name() + ": " + mismatch,
                error.summary() + "\n" + error.detail());
  }
}

VariantDescription keyed_with_headers(VariantDescription variant,
                                      const std::vector<cache::RecordedHeader> &headers) {
  for (const cache::RecordedHeader &header : headers) {
    auto [name, value] = cache::header_key_input(header);
    variant.key_inputs.add(std::move(name), std::move(value));
  }
  variant.key = variant.key_inputs.finish();
  return variant;
}

VariantDescription keyed_with_current_headers(VariantDescription variant,
                                              std::string_view template_name) {
  if (!variant.has_include_dirs())
    return variant;
  const std::vector<cache::RecordedHeader> headers = scan_includes(variant.request, template_name);
  return keyed_with_headers(std::move(variant), headers);
}

cache::Entry make_entry(const Instance &instance, const VariantDescription &variant,
                        const jit::Compiler &compiler, jit::CompileResult result,
                        double compile_ms) {
  return cache::Entry{
      .header =
          {
              .key = variant.key,
              .target = variant.request.target.id(),
              .template_name = instance.source_template().name(),
              .parameters = entry_parameters(instance),
              .key_inputs = variant.key_inputs.fields(),
              .kernels = {{variant.request.name_expressions[0], result.lowered_names[0]}},
              .compiler = compiler.identity(),
              .created_unix = std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count(),
              .compile_ms = compile_ms,
          },
      .code = std::move(result.code),
  };
}

} // namespace kjit
