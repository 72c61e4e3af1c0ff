#include "memory_tier.hpp"

#include <algorithm>
#include <xxhash.h>

namespace kjit {

struct MemoryTier::Node {
  std::uint64_t hash;
  std::pair<std::uint64_t, std::uint64_t> fingerprint;
  std::string target_id;
  Params params;
  const CodeObject *object;
};

struct MemoryTier::Table {
  explicit Table(std::size_t capacity)
      : mask(capacity - 1), slots(std::make_unique<std::atomic<const Node *>[]>(capacity)) {}
  std::size_t mask; // capacity - 1; capacity is a power of two
  std::unique_ptr<std::atomic<const Node *>[]> slots;
};

namespace {

constexpr std::size_t initial_capacity = 64;

std::uint64_t hash_value(const Value &value) {
  if (value.is_integer()) {
    const std::int64_t integer = value.integer();
    return XXH3_64bits(&integer, sizeof integer);
  }
  return XXH3_64bits(value.type().data(), value.type().size()) ^ 0x9e3779b97f4a7c15ULL;
}

bool same_params(const Params &a, const Params &b) {
  if (a.size() != b.size())
    return false;
  return std::all_of(a.begin(), a.end(), [&](const auto &pair) {
    return std::find(b.begin(), b.end(), pair) != b.end();
  });
}

} // namespace

MemoryTier::MemoryTier() {
  tables_.push_back(std::make_unique<Table>(initial_capacity));
  current_.store(tables_.back().get(), std::memory_order_release);
}

MemoryTier::~MemoryTier() = default;

std::uint64_t MemoryTier::hash(const Template &tmpl, const Params &params,
                               const jit::Target &target) {
  // Summing the per-parameter hashes makes the result independent of parameter order.
  std::uint64_t params_hash = 0;
  for (const auto &[name, value] : params)
    params_hash += XXH3_64bits_withSeed(name.data(), name.size(), hash_value(value));
  const auto &[high, low] = tmpl.fingerprint();
  return high ^ (low * 0x100000001b3ULL) ^ (target.hash() * 31) ^ params_hash;
}

const CodeObject *MemoryTier::find(std::uint64_t hash, const Template &tmpl, const Params &params,
                                   const jit::Target &target) const {
  const Table *table = current_.load(std::memory_order_acquire);
  for (std::size_t i = hash & table->mask;; i = (i + 1) & table->mask) {
    const Node *node = table->slots[i].load(std::memory_order_acquire);
    if (node == nullptr)
      return nullptr;
    if (node->hash == hash && node->fingerprint == tmpl.fingerprint() &&
        node->target_id == target.id() && same_params(node->params, params))
      return node->object;
  }
}

void MemoryTier::place(Table &table, const Node *node) {
  std::size_t i = node->hash & table.mask;
  while (table.slots[i].load(std::memory_order_relaxed) != nullptr)
    i = (i + 1) & table.mask;
  table.slots[i].store(node, std::memory_order_release);
}

void MemoryTier::insert(std::uint64_t hash, const Template &tmpl, const Params &params,
                        const jit::Target &target, const CodeObject *object) {
  std::lock_guard lock(writer_);
  if (find(hash, tmpl, params, target) != nullptr)
    return;
  nodes_.push_back(std::make_unique<Node>(
      Node{hash, tmpl.fingerprint(), target.id(), params, object}));
  Table *table = tables_.back().get();
  // Keep the load under one half so probes stay short.
  if (2 * nodes_.size() > table->mask + 1) {
    auto grown = std::make_unique<Table>(2 * (table->mask + 1));
    for (const auto &node : nodes_)
      place(*grown, node.get());
    tables_.push_back(std::move(grown));
    current_.store(tables_.back().get(), std::memory_order_release);
    return;
  }
  place(*table, nodes_.back().get());
}

} // namespace kjit
