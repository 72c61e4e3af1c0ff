#pragma once
// The in-memory tier: (template, target, parameters as the caller wrote them) -> CodeObject.
//
// The hit path takes no lock and computes no SHA-256: a 64-bit hash of the request, then an
// open-addressing probe over atomic slots. Writers (rare: one per variant per process) take a
// mutex, and grow by publishing a doubled table; old tables are kept until destruction so that
// a reader still probing one never touches freed memory (growth is geometric, so the retained
// tables together are smaller than the live one).
#include "kjit/jit/target.hpp"
#include "kjit/templates/template.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace kjit {

class CodeObject;

class MemoryTier {
public:
  MemoryTier();
  ~MemoryTier();
  MemoryTier(const MemoryTier &) = delete;
  MemoryTier &operator=(const MemoryTier &) = delete;

  // A hash of the request; parameter order does not change it.
  static std::uint64_t hash(const Template &tmpl, const Params &params, const jit::Target &target);

  const CodeObject *find(std::uint64_t hash, const Template &tmpl, const Params &params,
                         const jit::Target &target) const;
  void insert(std::uint64_t hash, const Template &tmpl, const Params &params,
              const jit::Target &target, const CodeObject *object);

private:
  struct Node;
  struct Table;
  void place(Table &table, const Node *node);

  std::atomic<const Table *> current_;
  std::mutex writer_;
  std::vector<std::unique_ptr<Table>> tables_; // every generation, the last is current_
  std::vector<std::unique_ptr<Node>> nodes_;
};

} // namespace kjit
