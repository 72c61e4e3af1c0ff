#include "kjit/templates/sets.hpp"

#include "kjit/error.hpp"
#include "kjit/input_file.hpp"
#include "kjit/templates/library.hpp"
#include "kjit/text.hpp"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

namespace kjit::templates {

namespace embedded {
extern const std::size_t sets_count;
extern const std::string_view sets_names[];
extern const std::string_view sets_texts[];
} // namespace embedded

namespace {

// Keeps the order a file lists things in (the order of a set's variants).
using json = nlohmann::ordered_json;

// The fields each object of a set may have (sets.hpp); any other is an error naming its line.
const std::vector<std::string_view> kSetFields = {"name",   "level",     "description", "values",
                                                  "models", "templates", "variants"};
const std::vector<std::string_view> kTemplateFields = {
    "name",    "source",          "kernel",       "params", "arguments",
    "headers", "compile_options", "include_dirs", "tunable"};
const std::vector<std::string_view> kVariantFields = {"template", "params", "vendors",
                                                      "processors"};

// A char iterator that records the furthest position the parser has read, so that a parse
// callback knows where in the text the token it is told about ends.
class CountingIterator {
public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;
  CountingIterator(const char *at, const char **furthest) : at_(at), furthest_(furthest) {}
  reference operator*() const { return *at_; }
  CountingIterator &operator++() {
    *furthest_ = std::max(*furthest_, ++at_);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator before = *this;
    ++*this;
    return before;
  }
  bool operator==(const CountingIterator &other) const { return at_ == other.at_; }

private:
  const char *at_;
  const char **furthest_;
};

// A parsed set and the line of each member and array element, by JSON pointer
// ("/variants/1/params/HIDEN" -> 7): nlohmann's DOM keeps no positions, so they are collected
// while it is built.
struct LocatedJson {
  json document;
  std::map<std::string, int> lines;
};

LocatedJson parse_located(std::string_view text) {
  LocatedJson located;
  const char *furthest = text.data();
  // The line of the token just read: newlines before its last character (a number's end is
  // known only once the character after it is read).
  auto line_now = [&] {
    return 1 + static_cast<int>(std::count(text.data(), std::max(text.data(), furthest - 1), '\n'));
  };
  struct Frame {
    std::string path;
    bool array;
    std::size_t next = 0;
    std::string key;
  };
  std::vector<Frame> frames;
  // The path of the value about to start in the innermost container (recording its line).
  auto child = [&]() -> std::string {
    if (frames.empty())
      return "";
    Frame &parent = frames.back();
    if (!parent.array)
      return parent.path + "/" + parent.key;
    std::string path = parent.path + "/" + std::to_string(parent.next++);
    located.lines.emplace(path, line_now());
    return path;
  };
  using event = json::parse_event_t;
  located.document = json::parse(
      CountingIterator(text.data(), &furthest),
      CountingIterator(text.data() + text.size(), &furthest),
      [&](int, event what, json &parsed) {
        switch (what) {
        case event::object_start:
        case event::array_start:
          frames.push_back({child(), what == event::array_start, 0, ""});
          break;
        case event::object_end:
        case event::array_end:
          frames.pop_back();
          break;
        case event::key:
          frames.back().key = parsed.get<std::string>();
          located.lines.emplace(frames.back().path + "/" + frames.back().key, line_now());
          break;
        case event::value:
          if (!frames.empty() && frames.back().array)
            child();
          break;
        }
        return true;
      },
      false);
  return located;
}

Value value_of(const json &item, const std::string &where) {
  if (item.is_number_integer())
    return Value(item.get<std::int64_t>());
  if (item.is_string())
    return Value(item.get<std::string>());
  throw Error(Errc::bad_parameter,
              where + ": " + item.dump() + " is neither a type nor an integer");
}

class SetParser {
public:
  SetParser(const LocatedJson &located, std::string origin)
      : document_(located.document), lines_(located.lines), origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(Errc::bad_parameter, origin_ + ": " + what);
  }
  // Fails naming the line of the member or element at `pointer` ("/variants/0/params/N").
  [[noreturn]] void fail_at(const std::string &pointer, const std::string &what) const {
    auto line = lines_.find(pointer);
    if (line == lines_.end())
      fail(what);
    throw Error(Errc::bad_parameter, origin_ + ":" + std::to_string(line->second) + ": " + what);
  }

  const json &field(const json &object, const char *name, json::value_t type,
                    const std::string &pointer = "") const {
    auto found = object.find(name);
    if (found == object.end() || found->type() != type)
      fail_at(found == object.end() ? pointer : pointer + "/" + name,
              std::string("needs \"") + name + "\" (" + json(type).type_name() + ")");
    return *found;
  }

  // Refuses a member of `object` (at `pointer`) that is not one of `known`: a misspelled field
  // would otherwise be ignored.
  void only_fields(const json &object, const std::vector<std::string_view> &known,
                   const std::string &pointer, const char *what) const {
    for (const auto &[name, value] : object.items())
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        fail_at(pointer + "/" + name,
                "unknown field \"" + name + "\" in " + what + " (its fields: " + join(known) + ")");
      }
  }

  // The values one parameter takes: a value, a list, or "@name".
  std::vector<Value> values(const std::string &param, const json &spec) const {
    const std::string where = "parameter " + param;
    if (spec.is_string() && spec.get<std::string>().starts_with("@"))
      return named(spec.get<std::string>().substr(1), where);
    if (!spec.is_array())
      return {value_of(spec, where)};
    std::vector<Value> listed;
    for (const json &item : spec)
      listed.push_back(value_of(item, where));
    if (listed.empty())
      fail(where + " lists no values");
    return listed;
  }

  // A variants item's "vendors": empty when it has none (every vendor).
  std::vector<Vendor> vendors(const json &variant) const {
    std::vector<Vendor> listed;
    auto found = variant.find("vendors");
    if (found == variant.end())
      return listed;
    if (!found->is_array() || found->empty())
      fail("\"vendors\" must list \"amd\", \"nvidia\" or both");
    for (const json &item : *found) {
      const std::string name = item.is_string() ? item.get<std::string>() : item.dump();
      if (name == to_string(Vendor::amd))
        listed.push_back(Vendor::amd);
      else if (name == to_string(Vendor::nvidia))
        listed.push_back(Vendor::nvidia);
      else
        fail("\"vendors\": " + name + " is neither \"amd\" nor \"nvidia\"");
    }
    return listed;
  }

  // A variants item's "processors": empty when it has none (every processor).
  std::vector<std::string> processors(const json &variant) const {
    std::vector<std::string> listed;
    auto found = variant.find("processors");
    if (found == variant.end())
      return listed;
    if (!found->is_array() || found->empty())
      fail("\"processors\" must list processor names such as \"gfx942\"");
    for (const json &item : *found) {
      if (!item.is_string() || item.get<std::string>().empty())
        fail("\"processors\": " + item.dump() + " is not a processor name");
      listed.push_back(item.get<std::string>());
    }
    return listed;
  }

  // A list of strings at `pointer` (a template's "params", "arguments", "compile_options").
  std::vector<std::string> strings(const json &object, const char *name,
                                   const std::string &pointer) const {
    auto found = object.find(name);
    if (found == object.end())
      return {};
    if (!found->is_array() ||
        !std::all_of(found->begin(), found->end(), [](const json &v) { return v.is_string(); }))
      fail_at(pointer + "/" + name, std::string("\"") + name + "\" must be a list of strings");
    return found->get<std::vector<std::string>>();
  }

private:
  std::vector<Value> named(const std::string &name, const std::string &where) const {
    if (auto values = document_.find("values"); values != document_.end() && values->contains(name))
      return this->values(name, (*values)[name]);
    std::vector<std::int64_t> collected; // every model's field, sorted, each once
    if (auto models = document_.find("models"); models != document_.end() && models->is_object())
      for (const auto &[model, fields] : models->items())
        if (auto value = fields.find(name); value != fields.end()) {
          if (!value->is_number_integer())
            fail("model " + model + ": \"" + name + "\" is not an integer");
          collected.push_back(value->get<std::int64_t>());
        }
    if (collected.empty())
      fail(where + ": \"@" + name + "\" names no \"values\" list and no \"models\" field");
    std::sort(collected.begin(), collected.end());
    collected.erase(std::unique(collected.begin(), collected.end()), collected.end());
    return {collected.begin(), collected.end()};
  }

  const json &document_;
  const std::map<std::string, int> &lines_;
  std::string origin_;
};

// Every combination of the listed values, the last parameter varying fastest.
std::vector<ParamValues>
combinations(const std::vector<std::pair<std::string, std::vector<Value>>> &axes) {
  std::vector<ParamValues> all = {{}};
  for (const auto &[name, values] : axes) {
    std::vector<ParamValues> next;
    for (const ParamValues &partial : all)
      for (const Value &value : values) {
        next.push_back(partial);
        next.back().add(name, value);
      }
    all = std::move(next);
  }
  return all;
}

// `paths` resolved against `base_dir` (absolute ones stay as they are).
std::vector<std::string> relative_to(const std::filesystem::path &base_dir,
                                     const std::vector<std::string> &paths) {
  std::vector<std::string> resolved;
  for (const std::string &path : paths)
    resolved.push_back((base_dir / path).string());
  return resolved;
}

// A template item's "headers": each a file (named by its file name) or a folder (every file
// under it, named by its path relative to the folder, as `#include "mylib/math.h"` reads it),
// read now, so that their content is in every key.
std::vector<HeaderFile> read_headers(const std::vector<std::string> &listed,
                                     const std::filesystem::path &base_dir, const SetParser &parser,
                                     const std::string &pointer) {
  namespace fs = std::filesystem;
  std::vector<HeaderFile> headers;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    const fs::path path = base_dir / listed[i];
    std::error_code error;
    if (fs::is_regular_file(path, error)) {
      headers.push_back({path.filename().string(), read_input_file(path, "header")});
      continue;
    }
    if (!fs::is_directory(path, error))
      parser.fail_at(pointer + "/" + std::to_string(i),
                     "header " + listed[i] + ": no such file or folder (" + path.string() + ")");
    std::vector<fs::path> files;
    for (const fs::directory_entry &item : fs::recursive_directory_iterator(path))
      if (item.is_regular_file())
        files.push_back(item.path());
    std::sort(files.begin(), files.end());
    for (const fs::path &file : files)
      headers.push_back(
          {file.lexically_relative(path).generic_string(), read_input_file(file, "header")});
  }
  return headers;
}

// A template from a source file (a "templates" item at `pointer`): its parameters are the names
// its "params" declares, in that order (the kernel's template arguments), each accepting the
// values its variants list.
Template source_template(const json &spec, const std::string &pointer, const json &variants,
                         const SetParser &parser, const std::filesystem::path &base_dir) {
  if (!spec.is_object())
    parser.fail_at(pointer, "a templates item is not an object");
  parser.only_fields(spec, kTemplateFields, pointer, "a templates item");
  const std::string name =
      parser.field(spec, "name", json::value_t::string, pointer).get<std::string>();
  // The compiler's diagnostics name the source as the set file does ("kernels/norm.hip"), as a
  // library's own Template names it (TemplateOptions::source_name, kjit_embed_sources()).
  const std::string source_name =
      parser.field(spec, "source", json::value_t::string, pointer).get<std::string>();
  const std::filesystem::path source = base_dir / source_name;
  const std::vector<std::string> declared = parser.strings(spec, "params", pointer);
  if (declared.empty())
    parser.fail_at(pointer, "template " + name +
                                " needs \"params\": its template parameters' names, in the "
                                "kernel's order ([\"T\", \"N\"])");
  std::vector<std::vector<Value>> accepted(declared.size());
  bool named = false;
  for (const json &variant : variants) {
    if (!variant.is_object() || variant.value("template", "") != name)
      continue;
    named = true;
    const json params = variant.value("params", json::object());
    for (const auto &[param, values_spec] : params.items()) {
      auto slot = std::find(declared.begin(), declared.end(), param);
      if (slot == declared.end())
        continue; // refused with its line when the variants are read
      for (Value &value : parser.values(param, values_spec))
        accepted[slot - declared.begin()].push_back(std::move(value));
    }
  }
  if (!named) // its values are what its variants list: it has none
    parser.fail_at(pointer, "template " + name + " is named by no variant");
  // Parameters a tuner may choose (kjit tune --sets): each one of "params".
  const std::vector<std::string> tunable = parser.strings(spec, "tunable", pointer);
  for (std::size_t i = 0; i < tunable.size(); ++i)
    if (std::find(declared.begin(), declared.end(), tunable[i]) == declared.end())
      parser.fail_at(pointer + "/tunable/" + std::to_string(i),
                     "template " + name + ": tunable parameter " + tunable[i] +
                         " is not one of its \"params\" (" + join(declared) + ")");
  std::vector<ParamDecl> decls;
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const std::string &param = declared[i];
    std::vector<Value> &values = accepted[i];
    if (values.empty())
      parser.fail_at(pointer + "/params/" + std::to_string(i),
                     "template " + name + ": no variant gives parameter " + param);
    const bool integers = values.front().is_integer();
    if (std::any_of(values.begin(), values.end(),
                    [&](const Value &v) { return v.is_integer() != integers; }))
      parser.fail("template " + name + ": parameter " + param + " mixes types and integers");
    std::vector<std::string> types;
    std::vector<std::int64_t> numbers;
    for (const Value &value : values)
      integers ? numbers.push_back(value.integer()) : types.push_back(value.type());
    std::sort(numbers.begin(), numbers.end());
    numbers.erase(std::unique(numbers.begin(), numbers.end()), numbers.end());
    std::sort(types.begin(), types.end());
    types.erase(std::unique(types.begin(), types.end()), types.end());
    ParamSchema schema = integers ? ParamSchema::one_of(numbers) : ParamSchema::type(types);
    if (std::find(tunable.begin(), tunable.end(), param) != tunable.end())
      schema = schema.tunable();
    decls.push_back({param, std::move(schema)});
  }
  std::string kernel = name;
  if (auto listed = spec.find("kernel"); listed != spec.end())
    kernel = parser.field(spec, "kernel", json::value_t::string, pointer).get<std::string>();
  return Template(
      name, read_input_file(source, "template source"), std::move(decls),
      TemplateOptions{.kernel = std::move(kernel),
                      .source_name = source_name,
                      .headers = read_headers(parser.strings(spec, "headers", pointer), base_dir,
                                              parser, pointer + "/headers"),
                      .include_dirs =
                          relative_to(base_dir, parser.strings(spec, "include_dirs", pointer)),
                      .compile_options = parser.strings(spec, "compile_options", pointer),
                      .arguments = parser.strings(spec, "arguments", pointer)});
}

// The template a variants item names: the set's own first, then the built-ins; an unknown name
// lists both.
const Template &named_template(const std::string &name,
                               const std::vector<std::unique_ptr<Template>> &own,
                               const SetParser &parser, const std::string &pointer) {
  auto found =
      std::find_if(own.begin(), own.end(), [&](const auto &t) { return t->name() == name; });
  if (found != own.end())
    return **found;
  try {
    return find(name);
  } catch (const Error &error) {
    if (error.code() != Errc::unknown_template || own.empty())
      throw;
    std::vector<std::string> names;
    for (const auto &each : own)
      names.push_back(each->name());
    parser.fail_at(pointer, error.summary() + "; this set's templates: " + join(names));
  }
}

} // namespace

VariantSet VariantSet::parse(std::string_view json_text, std::string origin,
                             const std::filesystem::path &base_dir) {
  const LocatedJson located = parse_located(json_text);
  const json &document = located.document;
  if (document.is_discarded() || !document.is_object())
    throw Error(Errc::bad_parameter, origin + ": not a JSON object (see kjit/templates/sets.hpp)");
  const SetParser parser(located, origin);
  parser.only_fields(document, kSetFields, "", "a set");
  VariantSet set;
  set.origin_ = std::move(origin);
  set.name_ = parser.field(document, "name", json::value_t::string).get<std::string>();
  auto level = document.find("level");
  if (level == document.end() || !level->is_number_integer() || level->get<int>() < 1 ||
      level->get<int>() > 3)
    parser.fail("needs \"level\": 1 (core), 2 (inference) or 3 (minimal)");
  set.level_ = level->get<int>();
  const json &variants = parser.field(document, "variants", json::value_t::array);

  try {
    if (auto sources = document.find("templates"); sources != document.end())
      for (std::size_t t = 0; t < sources->size(); ++t)
        set.templates_.push_back(std::make_unique<Template>(source_template(
            (*sources)[t], "/templates/" + std::to_string(t), variants, parser, base_dir)));
    for (std::size_t v = 0; v < variants.size(); ++v) {
      const json &variant = variants[v];
      const std::string pointer = "/variants/" + std::to_string(v);
      if (!variant.is_object())
        parser.fail_at(pointer, "a variants item is not an object");
      parser.only_fields(variant, kVariantFields, pointer, "a variants item");
      const std::string name =
          parser.field(variant, "template", json::value_t::string, pointer).get<std::string>();
      const Template &tmpl = named_template(name, set.templates_, parser, pointer + "/template");
      std::vector<std::pair<std::string, std::vector<Value>>> axes;
      const json params = variant.value("params", json::object());
      for (const auto &[param, values] : params.items()) {
        if (tmpl.param(param) == nullptr) {
          std::vector<std::string> names;
          for (const ParamDecl &decl : tmpl.params())
            names.push_back(decl.name);
          parser.fail_at(pointer + "/params/" + param, "template " + name + " has no parameter " +
                                                           param +
                                                           "; its parameters: " + join(names));
        }
        axes.emplace_back(param, parser.values(param, values));
      }
      const std::vector<Vendor> vendors = parser.vendors(variant);
      const std::vector<std::string> processors = parser.processors(variant);
      for (ParamValues &params : combinations(axes))
        set.variants_.push_back({&tmpl, std::move(params), vendors, processors});
    }
  } catch (const Error &error) {
    if (error.summary().starts_with(set.origin_))
      throw;
    throw Error(error.code(), set.origin_ + ": " + error.summary(), error.detail());
  } catch (const json::exception &error) {
    parser.fail(error.what());
  }
  return set;
}

std::vector<const Template *> VariantSet::templates() const {
  std::vector<const Template *> own;
  for (const auto &tmpl : templates_)
    own.push_back(tmpl.get());
  return own;
}

VariantSet VariantSet::read_file(const std::filesystem::path &path) {
  return parse(read_input_file(path, "set file"), path.string(), path.parent_path());
}

const std::vector<VariantSet> &builtin_sets() {
  static const std::vector<VariantSet> all = [] {
    std::vector<VariantSet> sets;
    for (std::size_t i = 0; i < embedded::sets_count; ++i)
      sets.push_back(VariantSet::parse(embedded::sets_texts[i],
                                       "built-in set " + std::string(embedded::sets_names[i]), {}));
    return sets;
  }();
  return all;
}

int builtin_level_of(const Instance &instance) {
  int lowest = 0;
  for (const VariantSet &set : builtin_sets()) {
    if (lowest != 0 && set.level() >= lowest)
      continue;
    for (const SetVariant &variant : set.variants())
      if (variant.tmpl->fingerprint() == instance.source_template().fingerprint() &&
          variant.tmpl->bind(variant.params).values() == instance.values()) {
        lowest = set.level();
        break;
      }
  }
  return lowest;
}

} // namespace kjit::templates
