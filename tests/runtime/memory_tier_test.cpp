#include "runtime/src/memory_tier.hpp"

#include <atomic>
#include <gtest/gtest.h>
#include <thread>

namespace kjit {
namespace {

class CodeObject;

// The tier stores pointers it never dereferences: distinct fake addresses are enough.
const CodeObject *fake_object(std::uintptr_t n) {
  return reinterpret_cast<const CodeObject *>((n + 1) * 64);
}

const Template tmpl("scale", "",
                    {{"T", ParamSchema::type({"float", "half"})},
                     {"N", ParamSchema::integer(0, 1 << 30)}});

TEST(MemoryTier, FindsWhatWasInsertedWhateverTheParameterOrder) {
  MemoryTier<CodeObject> tier;
  const auto target = jit::Target::parse("gfx90a");
  const ParamValues params = {{"T", "half"}, {"N", 64}};
  const ParamValues reordered = {{"N", 64}, {"T", "half"}};
  EXPECT_EQ(memory_hash(tmpl, params, target, 0), memory_hash(tmpl, reordered, target, 0));
  tier.insert(memory_hash(tmpl, params, target, 0), tmpl, params, target, fake_object(1));
  EXPECT_EQ(tier.find(memory_hash(tmpl, reordered, target, 0), tmpl, reordered, target),
            fake_object(1));
}

TEST(MemoryTier, MissesOnAnyDifference) {
  MemoryTier<CodeObject> tier;
  const auto gfx90a = jit::Target::parse("gfx90a");
  const ParamValues params = {{"T", "half"}, {"N", 64}};
  tier.insert(memory_hash(tmpl, params, gfx90a, 0), tmpl, params, gfx90a, fake_object(1));

  const auto gfx908 = jit::Target::parse("gfx908");
  EXPECT_EQ(tier.find(memory_hash(tmpl, params, gfx908, 0), tmpl, params, gfx908), nullptr);
  const ParamValues other = {{"T", "half"}, {"N", 65}};
  EXPECT_EQ(tier.find(memory_hash(tmpl, other, gfx90a, 0), tmpl, other, gfx90a), nullptr);
  const Template edited(
      "scale", "// edited",
      {{"T", ParamSchema::type({"float", "half"})}, {"N", ParamSchema::integer(0, 1 << 30)}});
  EXPECT_EQ(tier.find(memory_hash(edited, params, gfx90a, 0), edited, params, gfx90a), nullptr);
}

TEST(MemoryTier, ScopesKeepDevicesApart) {
  MemoryTier<CodeObject> tier;
  const auto target = jit::Target::parse("sm_90a");
  const ParamValues params = {{"T", "half"}, {"N", 64}};
  tier.insert(memory_hash(tmpl, params, target, 1), tmpl, params, target, fake_object(1), 1);
  tier.insert(memory_hash(tmpl, params, target, 2), tmpl, params, target, fake_object(2), 2);
  EXPECT_EQ(tier.find(memory_hash(tmpl, params, target, 1), tmpl, params, target, 1),
            fake_object(1));
  EXPECT_EQ(tier.find(memory_hash(tmpl, params, target, 2), tmpl, params, target, 2),
            fake_object(2));
  EXPECT_EQ(tier.find(memory_hash(tmpl, params, target, 0), tmpl, params, target, 0), nullptr);
}

// Readers probe without a lock while a writer inserts enough entries to grow the table many
// times: every entry a reader sees must be the one inserted for its parameters.
TEST(MemoryTier, ReadersSeeConsistentEntriesWhileTheTableGrows) {
  MemoryTier<CodeObject> tier;
  const auto target = jit::Target::parse("gfx90a");
  constexpr int count = 20000;
  std::atomic<int> published = 0;
  std::atomic<bool> wrong = false;
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      while (published.load() < count) {
        const int seen = published.load();
        for (int n = std::max(0, seen - 64); n < seen; ++n) {
          const ParamValues params = {{"T", "float"}, {"N", n}};
          if (tier.find(memory_hash(tmpl, params, target, 0), tmpl, params, target) !=
              fake_object(n))
            wrong = true;
        }
      }
    });
  for (int n = 0; n < count; ++n) {
    const ParamValues params = {{"T", "float"}, {"N", n}};
    tier.insert(memory_hash(tmpl, params, target, 0), tmpl, params, target, fake_object(n));
    published.store(n + 1);
  }
  for (auto &reader : readers)
    reader.join();
  EXPECT_FALSE(wrong);
  for (int n = 0; n < count; ++n) {
    const ParamValues params = {{"N", n}, {"T", "float"}};
    ASSERT_EQ(tier.find(memory_hash(tmpl, params, target, 0), tmpl, params, target),
              fake_object(n));
  }
}

} // namespace
} // namespace kjit
