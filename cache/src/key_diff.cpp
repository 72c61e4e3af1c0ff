#include "kjit/cache/key.hpp"

#include <algorithm>
#include <map>

namespace kjit::cache {

KeyInputKind key_input_kind(std::string_view name) {
  static const std::pair<std::string_view, KeyInputKind> exact[] = {
      {"format", KeyInputKind::format},         {"template", KeyInputKind::template_name},
      {"source", KeyInputKind::source},         {"pre-include", KeyInputKind::pre_include},
      {"expression", KeyInputKind::expression}, {"option", KeyInputKind::option},
      {"target", KeyInputKind::target},         {"compiler", KeyInputKind::compiler},
  };
  static const std::pair<std::string_view, KeyInputKind> prefixed[] = {
      {"header:", KeyInputKind::header},
      {"include:", KeyInputKind::header}, // a header from an include directory's manifest
      {"param:", KeyInputKind::parameter},
      {"env:", KeyInputKind::environment},
  };
  for (const auto &[field, kind] : exact)
    if (name == field)
      return kind;
  for (const auto &[prefix, kind] : prefixed)
    if (name.starts_with(prefix))
      return kind;
  return KeyInputKind::other;
}

std::string_view to_string(KeyInputKind kind) {
  switch (kind) {
  case KeyInputKind::format:
    return "entry format";
  case KeyInputKind::template_name:
    return "template";
  case KeyInputKind::source:
    return "source";
  case KeyInputKind::header:
    return "header";
  case KeyInputKind::pre_include:
    return "pre-include";
  case KeyInputKind::expression:
    return "name expression";
  case KeyInputKind::parameter:
    return "parameter";
  case KeyInputKind::option:
    return "option";
  case KeyInputKind::target:
    return "target";
  case KeyInputKind::compiler:
    return "compiler build";
  case KeyInputKind::environment:
    return "compiler environment";
  case KeyInputKind::other:
    return "other";
  }
  return "other";
}

namespace {

// Each field name's values, in order; the names in the order first seen.
struct Grouped {
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>, std::less<>> values;
};

Grouped grouped(const std::vector<KeyField> &fields) {
  Grouped out;
  for (const auto &[name, value] : fields) {
    auto [at, inserted] = out.values.try_emplace(name);
    if (inserted)
      out.names.push_back(name);
    at->second.push_back(value);
  }
  return out;
}

// The values of `from` that `other` does not hold, counted as a multiset, in `from`'s order.
std::vector<std::string> only_in(const std::vector<std::string> &from,
                                 std::vector<std::string> other) {
  std::vector<std::string> left;
  for (const std::string &value : from) {
    auto match = std::find(other.begin(), other.end(), value);
    if (match == other.end())
      left.push_back(value);
    else
      other.erase(match);
  }
  return left;
}

} // namespace

std::vector<KeyDifference> diff_key_inputs(const std::vector<KeyField> &wanted,
                                           const std::vector<KeyField> &found) {
  const Grouped ours = grouped(wanted);
  const Grouped theirs = grouped(found);
  static const std::vector<std::string> none;
  auto values_of = [](const Grouped &group, const std::string &name) -> const auto & {
    auto at = group.values.find(name);
    return at == group.values.end() ? none : at->second;
  };
  std::vector<KeyDifference> differences;
  auto compare = [&](const std::string &name) {
    const std::vector<std::string> &mine = values_of(ours, name);
    const std::vector<std::string> &other = values_of(theirs, name);
    const KeyInputKind kind = key_input_kind(name);
    if (mine.size() == 1 && other.size() == 1) {
      if (mine[0] != other[0])
        differences.push_back({kind, name, mine[0], other[0]});
      return;
    }
    for (const std::string &value : only_in(mine, other))
      differences.push_back({kind, name, value, std::nullopt});
    for (const std::string &value : only_in(other, mine))
      differences.push_back({kind, name, std::nullopt, value});
  };
  for (const std::string &name : ours.names)
    compare(name);
  for (const std::string &name : theirs.names)
    if (!ours.values.contains(name))
      compare(name);
  // The name expression is made from the parameters ("scale<__half, 4096>"): with a parameter
  // named, it says nothing more.
  auto is = [&](KeyInputKind kind) {
    return [kind](const KeyDifference &difference) { return difference.kind == kind; };
  };
  if (std::ranges::any_of(differences, is(KeyInputKind::parameter)))
    std::erase_if(differences, is(KeyInputKind::expression));
  return differences;
}

} // namespace kjit::cache
