#pragma once
// Launch plans: what an operator launches for one shape (the kernel and its geometry), chosen
// once per shape and Runtime and then found again on every launch of that shape without building
// a parameter list or asking the Runtime. The choice is the tuning table's winner for the shape
// on this device when there is one that the pointers' alignment allows, else the heuristic.
#include "kjit/error.hpp"
#include "kjit/log.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "variants.hpp"

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>

namespace kjit::ops::detail {

// The rows a tuning record is kept for: the next power of two, so that records cover every
// batch size between two tuned ones.
std::int64_t rows_bucket(std::int64_t rows);

// A plan key's hash: `runtime` and then each part mixed in (Fibonacci hashing).
inline std::size_t hash_key(std::uint64_t runtime, std::initializer_list<std::uint64_t> parts) {
  std::size_t h = std::hash<std::uint64_t>()(runtime);
  for (std::uint64_t part : parts)
    h = (h ^ part) * 0x9e3779b97f4a7c15ull;
  return h;
}

// One shape of one operator through one Runtime. `op` is the address of the operator's
// constant (its RowwiseKernel, its activation name): unique, and cheap to compare.
struct PlanKey {
  std::uint64_t runtime;
  const void *op;
  std::int64_t length; // row length, or d
  std::int64_t rows;   // rounded up to a power of two: rows_bucket()
  int element;         // element_code<T>()
  int aligned_vec;     // the widest vector the pointers allow
  bool operator==(const PlanKey &) const = default;
};

// T's size and kind: float 4, half 2, bfloat16 3. Its size alone would give half and bfloat16 one
// plan, and the second type to run a shape would launch the first one's kernel.
template <Element T> constexpr int element_code() {
  return std::is_same_v<T, BFloat16> ? 3 : static_cast<int>(sizeof(T));
}

// The key of T's plan for one shape of `op` (a row length, or d) through the Runtime `runtime`.
template <Element T>
PlanKey plan_key(std::uint64_t runtime, const void *op, std::int64_t length, std::int64_t rows,
                 int aligned_vec) {
  return {runtime, op, length, rows_bucket(rows), element_code<T>(), aligned_vec};
}

struct Plan {
  const Kernel *kernel;
  int vec;
  int threads;        // per row (row-wise operators)
  int rows_per_block; // row-wise operators
};

// This thread's plan for `key`, or nullptr. Lock-free: each thread keeps its own.
const Plan *find_plan(const PlanKey &key);
const Plan &remember_plan(const PlanKey &key, const Plan &plan);

// What a wrapper asks the tuning table with: the device its records are keyed by (whose target
// and multiprocessors the heuristics read too), the compiler's identity and the table's tiers.
// A Runtime's is tuning_lookup(rt); tests make their own, with no GPU.
struct TuningLookup {
  TuningDevice device;
  std::string compiler; // empty: none to key by, so no record is asked for
  TuningTable table;
};

// The Runtime's default device, its compiler's identity and its Config's tiers. Throws what
// rt.default_device() throws; a compiler identity or table that cannot be had (logged at debug
// level) gives a lookup that finds no record.
TuningLookup tuning_lookup(Runtime &rt);

// The tuning table's winner for `problem` of `tmpl` over `extents` ({"rows", rows_bucket(..)})
// on the lookup's device, or nullopt (no record, no compiler identity to key by, or a winner
// that does not fit `tmpl`'s schema: ignored with one warning, winner_problem).
std::optional<TimedVariant> tuned_winner(const TuningLookup &lookup, const Template &tmpl,
                                         const ParamValues &problem, const ParamValues &extents);
// The same on the Runtime's device (tuning_lookup); nullopt where it has none.
std::optional<TimedVariant> tuned_winner(Runtime &rt, const Template &tmpl,
                                         const ParamValues &problem, const ParamValues &extents);

// An integer value of a winner's parameters; `fallback` when it does not name it.
int winner_value(const TimedVariant &winner, std::string_view name, int fallback);

// `variant` (a heuristic's, naming every tunable of its template) with the tunable values `winner`
// names; the problem's parameters are kept. A tunable the record leaves out takes the template's
// default, as the variant the tuner timed did (a record from before the tunable existed ran its
// default's code): the heuristic's value could make a variant the template refuses (gemm's
// BLOCK_M 64 beside a recorded SWAP_AB 0), or one the tuner never timed.
ChosenVariant with_winner(const ChosenVariant &variant, const TimedVariant &winner);

// `heuristic` (naming every tunable of its template) with the tunables of the table's winner for
// `problem` of its template over `extents` (tuned_winner, then with_winner), or `heuristic` itself
// where there is none: the one lookup of the operators that take a record's variant whole.
ChosenVariant tuned_variant(const TuningLookup &lookup, const ChosenVariant &heuristic,
                            const ParamValues &problem, const ParamValues &extents);

// "m x n x k", as the GEMMs' warnings name a shape.
inline std::string gemm_shape_text(std::int64_t m, std::int64_t n, std::int64_t k) {
  return std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k);
}

// make(chosen); where that throws Error and `chosen` is not `heuristic` (a tuning record's
// variant that does not build: the table is shared, untrusted input), one warning naming the
// template and `shape` ("64 x 4096 x 7168"), then make(heuristic).
template <typename Make>
auto built_or_heuristic(const ChosenVariant &chosen, const ChosenVariant &heuristic,
                        const std::string &shape, Make &&make) -> decltype(make(chosen)) {
  try {
    return make(chosen);
  } catch (const Error &error) {
    if (chosen.tmpl == heuristic.tmpl && chosen.params == heuristic.params)
      throw;
    log().warn("the tuned {} variant for {} does not build ({}); using the heuristic's",
               chosen.tmpl->name(), shape, error.summary());
    return make(heuristic);
  }
}

} // namespace kjit::ops::detail
