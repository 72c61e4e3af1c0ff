#pragma once
// The in-memory tier: (template, target, scope, parameters as the caller wrote them) -> value.
// The Runtime keeps two: code objects (scope 0) and loaded kernels (scope: the device).
//
// The hit path takes no lock and computes no SHA-256: a 64-bit hash of the request, then an
// open-addressing probe over atomic slots. Writers (rare: one per variant per process) take a
// mutex, and grow by publishing a doubled table; old tables are kept until destruction so that
// a reader still probing one never touches freed memory (growth is geometric, so the retained
// tables together are smaller than the live one).
#include "kjit/jit/target.hpp"
#include "kjit/templates/template.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kjit {

// A hash of a request; parameter order does not change it.
std::uint64_t memory_hash(const Template &tmpl, const ParamValues &params,
                          const jit::Target &target, std::uint64_t scope);

template <typename Value> class MemoryTier {
public:
  MemoryTier() {
    tables_.push_back(std::make_unique<Table>(initial_capacity));
    current_.store(tables_.back().get(), std::memory_order_release);
  }
  MemoryTier(const MemoryTier &) = delete;
  MemoryTier &operator=(const MemoryTier &) = delete;

  const Value *find(std::uint64_t hash, const Template &tmpl, const ParamValues &params,
                    const jit::Target &target, std::uint64_t scope = 0) const {
    const Table *table = current_.load(std::memory_order_acquire);
    for (std::size_t i = hash & table->mask;; i = (i + 1) & table->mask) {
      const Node *node = table->slots[i].load(std::memory_order_acquire);
      if (node == nullptr)
        return nullptr;
      if (node->hash == hash && node->scope == scope && node->fingerprint == tmpl.fingerprint() &&
          node->target_id == target.id() && node->params == params)
        return node->value;
    }
  }

  void insert(std::uint64_t hash, const Template &tmpl, const ParamValues &params,
              const jit::Target &target, const Value *value, std::uint64_t scope = 0) {
    std::lock_guard lock(writer_);
    if (find(hash, tmpl, params, target, scope) != nullptr)
      return;
    nodes_.push_back(
        std::make_unique<Node>(Node{hash, scope, tmpl.fingerprint(), target.id(), params, value}));
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

private:
  static constexpr std::size_t initial_capacity = 64;

  struct Node {
    std::uint64_t hash;
    std::uint64_t scope;
    std::pair<std::uint64_t, std::uint64_t> fingerprint;
    std::string target_id;
    ParamValues params;
    const Value *value;
  };
  struct Table {
    explicit Table(std::size_t capacity)
        : mask(capacity - 1), slots(std::make_unique<std::atomic<const Node *>[]>(capacity)) {}
    std::size_t mask; // capacity - 1; capacity is a power of two
    std::unique_ptr<std::atomic<const Node *>[]> slots;
  };

  static void place(Table &table, const Node *node) {
    std::size_t i = node->hash & table.mask;
    while (table.slots[i].load(std::memory_order_relaxed) != nullptr)
      i = (i + 1) & table.mask;
    table.slots[i].store(node, std::memory_order_release);
  }

  std::atomic<const Table *> current_;
  std::mutex writer_;
  std::vector<std::unique_ptr<Table>> tables_; // every generation, the last is current_
  std::vector<std::unique_ptr<Node>> nodes_;
};

} // namespace kjit
