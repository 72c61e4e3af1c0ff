#include "kjit/templates/sets.hpp"

#include "kjit/error.hpp"
#include "kjit/templates/library.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kjit::templates {

namespace embedded {
extern const std::size_t sets_count;
extern const std::string_view sets_names[];
extern const std::string_view sets_texts[];
} // namespace embedded

namespace {

// Keeps the order a file lists parameters in: a source template's are its template arguments.
using json = nlohmann::ordered_json;

std::string read_text(const std::filesystem::path &path, const std::string &what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error(Errc::file_io, "cannot read " + what + " " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
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
  SetParser(const json &document, std::string origin)
      : document_(document), origin_(std::move(origin)) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw Error(Errc::bad_parameter, origin_ + ": " + what);
  }

  const json &field(const json &object, const char *name, json::value_t type) const {
    auto found = object.find(name);
    if (found == object.end() || found->type() != type)
      fail(std::string("needs \"") + name + "\" (" + json(type).type_name() + ")");
    return *found;
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

// A template from a source file: its parameters are those its variants list, in their order,
// accepting the values listed.
Template source_template(const json &spec, const json &variants, const SetParser &parser,
                         const std::filesystem::path &base_dir) {
  const std::string name = parser.field(spec, "name", json::value_t::string).get<std::string>();
  const std::filesystem::path source =
      base_dir / parser.field(spec, "source", json::value_t::string).get<std::string>();
  std::vector<std::pair<std::string, std::vector<Value>>> accepted;
  for (const json &variant : variants) {
    if (!variant.is_object() || variant.value("template", "") != name)
      continue;
    const json params = variant.value("params", json::object());
    for (const auto &[param, values_spec] : params.items()) {
      auto slot = std::find_if(accepted.begin(), accepted.end(),
                               [&](const auto &axis) { return axis.first == param; });
      if (slot == accepted.end())
        slot = accepted.insert(accepted.end(), {param, {}});
      for (Value &value : parser.values(param, values_spec))
        slot->second.push_back(std::move(value));
    }
  }
  std::vector<ParamDecl> decls;
  for (const auto &[param, values] : accepted) {
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
    decls.push_back({param, integers ? ParamSchema::one_of(numbers) : ParamSchema::type(types)});
  }
  std::vector<std::string> arguments;
  if (auto listed = spec.find("arguments"); listed != spec.end())
    arguments = listed->get<std::vector<std::string>>();
  return Template(name, read_text(source, "template source"), std::move(decls),
                  TemplateOptions{.kernel = name, .arguments = std::move(arguments)});
}

} // namespace

VariantSet VariantSet::parse(std::string_view json_text, std::string origin,
                             const std::filesystem::path &base_dir) {
  const json document = json::parse(json_text, nullptr, false);
  if (document.is_discarded() || !document.is_object())
    throw Error(Errc::bad_parameter, origin + ": not a JSON object (see kjit/templates/sets.hpp)");
  const SetParser parser(document, origin);
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
      for (const json &spec : *sources)
        set.templates_.push_back(
            std::make_unique<Template>(source_template(spec, variants, parser, base_dir)));
    for (const json &variant : variants) {
      if (!variant.is_object())
        parser.fail("a variants item is not an object");
      const std::string name =
          parser.field(variant, "template", json::value_t::string).get<std::string>();
      auto own = std::find_if(set.templates_.begin(), set.templates_.end(),
                              [&](const auto &t) { return t->name() == name; });
      const Template *tmpl = own != set.templates_.end() ? own->get() : &find(name);
      std::vector<std::pair<std::string, std::vector<Value>>> axes;
      const json params = variant.value("params", json::object());
      for (const auto &[param, values] : params.items())
        axes.emplace_back(param, parser.values(param, values));
      const std::vector<Vendor> vendors = parser.vendors(variant);
      const std::vector<std::string> processors = parser.processors(variant);
      for (ParamValues &params : combinations(axes))
        set.variants_.push_back({tmpl, std::move(params), vendors, processors});
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

VariantSet VariantSet::read_file(const std::filesystem::path &path) {
  return parse(read_text(path, "set file"), path.string(), path.parent_path());
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
