#include "memory_tier.hpp"

#include <xxhash.h>

namespace kjit {

namespace {

std::uint64_t hash_value(const Value &value) {
  if (value.is_integer()) {
    const std::int64_t integer = value.integer();
    return XXH3_64bits(&integer, sizeof integer);
  }
  return XXH3_64bits(value.type().data(), value.type().size()) ^ 0x9e3779b97f4a7c15ULL;
}

} // namespace

std::uint64_t memory_hash(const Template &tmpl, const ParamValues &params,
                          const jit::Target &target, std::uint64_t scope) {
  // Summing the per-parameter hashes makes the result independent of parameter order.
  std::uint64_t params_hash = 0;
  for (const auto &[name, value] : params)
    params_hash += XXH3_64bits_withSeed(name.data(), name.size(), hash_value(value));
  const auto &[high, low] = tmpl.fingerprint();
  return high ^ (low * 0x100000001b3ULL) ^ (target.hash() * 31) ^ (scope * 0xff51afd7ed558ccdULL) ^
         params_hash;
}

} // namespace kjit
