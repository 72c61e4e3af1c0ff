#include "kjit/error.hpp"
#include "kjit/templates/template.hpp"

#include <algorithm>

namespace kjit {

ParamValues::ParamValues(std::initializer_list<value_type> values) : values_(values) {
  // Copied whole, then checked: the per-call wrappers build their lists on the hit path.
  for (auto later = values_.begin(); later != values_.end(); ++later)
    for (auto earlier = values_.begin(); earlier != later; ++earlier)
      if (earlier->first == later->first)
        throw Error(Errc::bad_parameter, "parameter '" + later->first + "' is given twice");
}

const Value &ParamValues::get(std::string_view name) const {
  if (const Value *value = find(name))
    return *value;
  throw Error(Errc::bad_parameter,
              "parameter '" + std::string(name) + "' has no value among (" + to_string() + ")");
}

void ParamValues::set(std::string name, Value value) {
  auto found = std::find_if(values_.begin(), values_.end(),
                            [&](const value_type &pair) { return pair.first == name; });
  if (found != values_.end())
    found->second = std::move(value);
  else
    values_.emplace_back(std::move(name), std::move(value));
}

void ParamValues::add(std::string name, Value value) {
  if (find(name) != nullptr)
    throw Error(Errc::bad_parameter, "parameter '" + name + "' is given twice");
  values_.emplace_back(std::move(name), std::move(value));
}

void ParamValues::add(const ParamValues &others) {
  for (const auto &[name, value] : others)
    add(name, value);
}

bool ParamValues::operator==(const ParamValues &other) const {
  return size() == other.size() &&
         std::all_of(values_.begin(), values_.end(), [&](const value_type &pair) {
           const Value *value = other.find(pair.first);
           return value != nullptr && *value == pair.second;
         });
}

ParamValues ParamValues::sorted() const {
  ParamValues out = *this;
  std::sort(out.values_.begin(), out.values_.end(),
            [](const value_type &a, const value_type &b) { return a.first < b.first; });
  return out;
}

std::string ParamValues::to_string() const {
  std::string out;
  for (const auto &[name, value] : sorted()) {
    if (!out.empty())
      out += ',';
    out += name + "=" + value.to_string();
  }
  return out;
}

} // namespace kjit
