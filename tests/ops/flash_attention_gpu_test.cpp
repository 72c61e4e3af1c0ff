// flash_attention on the device against the double-precision reference: ragged batches (lengths
// of 1 and not multiples of the tiles), causal masks at their boundaries (more keys than queries,
// and more queries than keys, whose first rows see none), GQA 1, 4 and 8, both head dims and
// types, into a poisoned output.
#include "ops/src/flash_attention_variant.hpp"
#include "ops/src/launch.hpp"
#include "tests/ops/gpu_support.hpp"
#include "tests/ops/paged_prefill_case.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;
using gpu_testing::PagedCase;

struct Case {
  std::vector<int> q_lengths, k_lengths;
  int q_heads, kv_heads, head_dim;
  bool causal;
};

std::vector<int> offsets(const std::vector<int> &lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  return cu;
}

// How a test runs the operator: flash_attention() or one variant of it.
template <Element T>
using Attention = std::function<void(T *, const T *, const T *, const T *, const int *, const int *,
                                     const AttentionShape &)>;

template <Element T> class FlashAttentionGpuTest : public OpsGpuTest {
protected:
  DeviceBuffer upload_offsets(const std::vector<int> &cu) {
    DeviceBuffer buffer = this->device().allocate(cu.size() * sizeof(int));
    buffer.write(cu.data(), cu.size() * sizeof(int));
    return buffer;
  }

  // P is rounded to T before its product with v (|v| <= 1): at most half of epsilon<T> relative
  // on each probability, so epsilon<T> absolute bounds that with room; the output is rounded once
  // more (epsilon<T> relative). exp2.approx's error (2^-22) and float accumulation are far below.
  // Each of `attentions` (a name and a launch) against the reference, computed once per case.
  void
  expect_matches_reference(const std::vector<std::pair<std::string, Attention<T>>> &attentions) {
    const std::vector<Case> cases = {
        {{1, 130, 257, 64}, {1, 130, 257, 64}, 8, 8, 128, true},
        {{1, 130, 257, 64}, {1, 130, 257, 64}, 8, 8, 128, false},
        {{100, 1, 200}, {300, 77, 450}, 8, 2, 128, true}, // keys past the queries: chunked
        {{300, 5}, {100, 1}, 8, 1, 64, true},             // rows that see no key get zeros
        {{129, 383}, {129, 383}, 16, 2, 64, false},
        {{129, 383}, {129, 383}, 16, 2, 64, true},
        // 384 tiles of rows, more than a persistent launch's blocks: each walks several items
        // (Q_BUFFERS 2 alternates its q tiles).
        {{1000, 700, 520}, {1000, 700, 520}, 16, 2, 64, true},
        // 384 items again, most of the first sequence's seeing no key: between items whose last
        // products wait for the next item's first scores (Q_BUFFERS 2), items with none.
        {{1500, 700}, {100, 700}, 16, 2, 64, true},
    };
    std::mt19937 rng(27);
    for (const Case &c : cases) {
      const std::vector<int> cu_q = offsets(c.q_lengths), cu_k = offsets(c.k_lengths);
      const AttentionShape shape{.batch = static_cast<int>(c.q_lengths.size()),
                                 .total_q = cu_q.back(),
                                 .total_k = cu_k.back(),
                                 .max_seqlen_q =
                                     *std::max_element(c.q_lengths.begin(), c.q_lengths.end()),
                                 .q_heads = c.q_heads,
                                 .kv_heads = c.kv_heads,
                                 .head_dim = c.head_dim,
                                 .causal = c.causal,
                                 .scale = static_cast<float>(1 / std::sqrt(c.head_dim))};
      SCOPED_TRACE("q_heads " + std::to_string(c.q_heads) + ", kv_heads " +
                   std::to_string(c.kv_heads) + ", head_dim " + std::to_string(c.head_dim) +
                   (c.causal ? ", causal" : "") + ", total_q " + std::to_string(shape.total_q));
      const std::size_t q_count = std::size_t(shape.total_q) * c.q_heads * c.head_dim;
      const std::size_t k_count = std::size_t(shape.total_k) * c.kv_heads * c.head_dim;
      const auto q = gpu_testing::random_elements<T>(q_count, rng, -1, 1);
      const auto k = gpu_testing::random_elements<T>(k_count, rng, -1, 1);
      const auto v = gpu_testing::random_elements<T>(k_count, rng, -1, 1);
      DeviceBuffer q_device = this->upload(q), k_device = this->upload(k),
                   v_device = this->upload(v);
      DeviceBuffer cu_q_device = upload_offsets(cu_q), cu_k_device = upload_offsets(cu_k);
      const std::vector<double> expected =
          reference::flash_attention<T>(q, k, v, cu_q, cu_k, shape);
      for (const auto &[name, attention] : attentions) {
        DeviceBuffer out = this->template poisoned<T>(q_count);
        attention(static_cast<T *>(out.data()), static_cast<const T *>(q_device.data()),
                  static_cast<const T *>(k_device.data()), static_cast<const T *>(v_device.data()),
                  static_cast<const int *>(cu_q_device.data()),
                  static_cast<const int *>(cu_k_device.data()), shape);
        EXPECT_TRUE(gpu_testing::all_close(this->template download<T>(out, q_count), expected,
                                           epsilon<T>(), epsilon<T>()))
            << name;
      }
    }
  }
};
using AttentionTypes = ::testing::Types<Half, BFloat16>;
TYPED_TEST_SUITE(FlashAttentionGpuTest, AttentionTypes);

// On sm_90a flash_attention() (the wgmma kernel, persistent without a mask, a block per tile of
// rows with one), the same with the other PERSISTENT (and the q tiles the wrapper takes for that
// walk), persistent with the other Q_BUFFERS, and with the other STAGE_O (the output through
// shared memory and bulk copies, or from registers); on
// NVIDIA sm_80 and newer the mma.sync kernel, which the others get. Empty where none runs.
template <Element T>
std::vector<std::pair<std::string, Attention<T>>> kernels(Runtime &rt, const jit::Target &target) {
  std::vector<std::pair<std::string, Attention<T>>> attentions;
  // The variant for the call's shape as chosen for `chosen_for`, with `change` applied.
  const auto variant = [&rt](const jit::Target &chosen_for,
                             std::function<void(detail::ChosenVariant &)> change) -> Attention<T> {
    return [&rt, chosen_for, change](T *out, const T *q, const T *k, const T *v, const int *cu_q,
                                     const int *cu_k, const AttentionShape &shape) {
      detail::ChosenVariant chosen = detail::flash_attention_variant<T>(chosen_for, shape);
      change(chosen);
      detail::launch_flash_attention<T>(rt, chosen, out, q, k, v, cu_q, cu_k, shape);
    };
  };
  if (target.id() == "sm_90a") {
    attentions.emplace_back("flash_attention()",
                            [&rt](T *out, const T *q, const T *k, const T *v, const int *cu_q,
                                  const int *cu_k, const AttentionShape &shape) {
                              flash_attention<T>(rt, out, q, k, v, cu_q, cu_k, shape);
                            });
    attentions.emplace_back("the other PERSISTENT",
                            variant(target, [](detail::ChosenVariant &chosen) {
                              const int other = 1 - chosen.integer("PERSISTENT");
                              chosen.params.set("PERSISTENT", other);
                              chosen.params.set("Q_BUFFERS", 1 + other);
                            }));
    attentions.emplace_back("PERSISTENT 1 with the other Q_BUFFERS",
                            variant(target, [](detail::ChosenVariant &chosen) {
                              chosen.params.set("PERSISTENT", 1);
                              chosen.params.set("Q_BUFFERS", 3 - chosen.integer("Q_BUFFERS"));
                            }));
    attentions.emplace_back("the other STAGE_O", variant(target, [](detail::ChosenVariant &chosen) {
                              chosen.params.set("STAGE_O", 1 - chosen.integer("STAGE_O"));
                            }));
  }
  if (target.vendor() == Vendor::nvidia && detail::nvidia_compute_capability(target) >= 80)
    attentions.emplace_back("flash_attention_mma",
                            variant(jit::Target::parse("sm_80"), [](detail::ChosenVariant &) {}));
  return attentions;
}

TYPED_TEST(FlashAttentionGpuTest, EveryKernelMatchesTheReferenceOnRaggedCausalGroupedBatches) {
  using T = TypeParam;
  const auto attentions = kernels<T>(this->runtime(), this->device().target());
  if (attentions.empty())
    GTEST_SKIP() << "flash_attention runs on NVIDIA sm_80 and newer; this is "
                 << this->device().target().id();
  this->expect_matches_reference(attentions);
}

// cu_seqlens whose second sequence runs to 2^30 rows of 70: every kernel finishes, writes
// nothing past out (a poisoned guard after it stays poisoned) and still gets the first
// sequence right.
TYPED_TEST(FlashAttentionGpuTest, OffsetsPastTheArraysStayInsideThemAndFinish) {
  using T = TypeParam;
  const auto attentions = kernels<T>(this->runtime(), this->device().target());
  if (attentions.empty())
    GTEST_SKIP() << "flash_attention runs on NVIDIA sm_80 and newer; this is "
                 << this->device().target().id();
  constexpr int rows = 70, heads = 2, head_dim = 64, guard = 64 * 1024;
  for (bool causal : {false, true}) {
    const std::vector<int> cu = {0, 5, 1 << 30};
    const AttentionShape shape{.batch = 2,
                               .total_q = rows,
                               .total_k = rows,
                               .max_seqlen_q = rows,
                               .q_heads = heads,
                               .kv_heads = heads,
                               .head_dim = head_dim,
                               .causal = causal,
                               .scale = 0.125f};
    const std::size_t count = std::size_t(rows) * heads * head_dim;
    std::mt19937 rng(5);
    const auto q = gpu_testing::random_elements<T>(count, rng, -1, 1);
    const auto k = gpu_testing::random_elements<T>(count, rng, -1, 1);
    const auto v = gpu_testing::random_elements<T>(count, rng, -1, 1);
    DeviceBuffer q_device = this->upload(q), k_device = this->upload(k), v_device = this->upload(v);
    DeviceBuffer cu_device = this->upload_offsets(cu);
    // The first sequence alone: its 5 rows of each array.
    AttentionShape first = shape;
    first.batch = 1;
    first.total_q = first.total_k = first.max_seqlen_q = 5;
    const std::size_t first_count = std::size_t(5) * heads * head_dim;
    const std::vector<T> q5(q.begin(), q.begin() + first_count),
        k5(k.begin(), k.begin() + first_count), v5(v.begin(), v.begin() + first_count);
    const std::vector<int> cu5 = {0, 5};
    const std::vector<double> expected = reference::flash_attention<T>(q5, k5, v5, cu5, cu5, first);
    for (const auto &[name, attention] : attentions) {
      SCOPED_TRACE(name + (causal ? ", causal" : ""));
      DeviceBuffer out = this->template poisoned<T>(count + guard);
      attention(static_cast<T *>(out.data()), static_cast<const T *>(q_device.data()),
                static_cast<const T *>(k_device.data()), static_cast<const T *>(v_device.data()),
                static_cast<const int *>(cu_device.data()),
                static_cast<const int *>(cu_device.data()), shape);
      const std::vector<T> got = this->template download<T>(out, count + guard);
      EXPECT_TRUE(gpu_testing::all_close(std::span<const T>(got.data(), first_count),
                                         std::span<const double>(expected), epsilon<T>(),
                                         epsilon<T>()));
      std::size_t written = 0;
      for (std::size_t i = count; i < count + guard; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, &got[i], sizeof(bits));
        written += bits != 0xFFFF;
      }
      EXPECT_EQ(written, 0u) << "elements written past out";
    }
  }
}

template <Element T> class FlashAttentionPagedGpuTest : public FlashAttentionGpuTest<T> {
protected:
  void SetUp() override {
    FlashAttentionGpuTest<T>::SetUp();
    if (!this->HasFatalFailure() && !this->IsSkipped() && this->device().target().id() != "sm_90a")
      GTEST_SKIP() << "these tests run the sm_90a variants (gfx942's and gfx950's are "
                      "emulated: emulated_flash_attention_mfma.hpp); this is "
                   << this->device().target().id();
  }

  // Runs flash_attention_paged (paged 0) or its variant with PAGED `paged` on `c` (filled) into
  // a poisoned output, with `lengths` as k_lens (c.k_lengths unless given), and returns the
  // output.
  std::vector<T> run(int paged, const PagedCase<T> &c, const std::vector<int> *lengths = nullptr,
                     bool validate = false) {
    DeviceBuffer q = this->upload(c.q), k = this->upload(c.k_cache), v = this->upload(c.v_cache);
    DeviceBuffer cu_q = this->upload_offsets(c.cu_q), tables = this->upload_offsets(c.tables),
                 k_lens = this->upload_offsets(lengths ? *lengths : c.k_lengths);
    const std::size_t count = c.q.size();
    DeviceBuffer out = this->template poisoned<T>(count);
    const PagedKvCache cache{.k = k.data(),
                             .v = v.data(),
                             .num_blocks = c.num_blocks,
                             .page_size = c.page_size,
                             .kv_heads = c.kv_heads,
                             .head_dim = c.head_dim};
    const PagedPrefillBatch batch{.cu_seqlens_q = static_cast<const int *>(cu_q.data()),
                                  .k_lens = static_cast<const int *>(k_lens.data()),
                                  .block_tables = static_cast<const int *>(tables.data()),
                                  .batch = static_cast<int>(c.q_lengths.size()),
                                  .max_blocks = c.max_blocks,
                                  .total_q = c.cu_q.back(),
                                  .max_seqlen_q =
                                      *std::max_element(c.q_lengths.begin(), c.q_lengths.end()),
                                  .validate = validate};
    if (paged == 0) {
      flash_attention_paged<T>(this->runtime(), static_cast<T *>(out.data()),
                               static_cast<const T *>(q.data()), c.q_heads, cache, batch, c.causal,
                               c.scale());
    } else {
      const AttentionShape shape{.batch = batch.batch,
                                 .total_q = batch.total_q,
                                 .total_k = c.num_blocks * c.page_size,
                                 .max_seqlen_q = batch.max_seqlen_q,
                                 .q_heads = c.q_heads,
                                 .kv_heads = c.kv_heads,
                                 .head_dim = c.head_dim,
                                 .causal = c.causal,
                                 .scale = c.scale()};
      detail::ChosenVariant variant = detail::flash_attention_paged_variant<T>(shape, c.page_size);
      variant.params.set("PAGED", paged);
      detail::launch_flash_attention_paged<T>(
          this->runtime(), variant, static_cast<T *>(out.data()), static_cast<const T *>(q.data()),
          c.q_heads, cache, batch, c.causal, c.scale());
    }
    return this->template download<T>(out, count);
  }
};
TYPED_TEST_SUITE(FlashAttentionPagedGpuTest, AttentionTypes);

// Chunked prefill: the new rows are the last of each sequence's keys (lengths 1, not multiples of
// the page, longer than a tile, and a full prefill; and blocks walking several items); GQA 1, 4
// and 8; pages of 16 and 32 in shuffled tables; both head dims; causal at ragged boundaries;
// flash_attention_paged() and both PAGED variants (TMA's page boxes, the producer's row copies).
// Within the bounds of expect_matches_reference.
TYPED_TEST(FlashAttentionPagedGpuTest, MatchesTheReferenceOnShuffledPages) {
  using T = TypeParam;
  std::mt19937 rng(270);
  // `many`: 240 tiles of rows, more than a persistent launch's blocks, so that each walks several
  // items (with pages of 16, Q_BUFFERS 2 alternates its q tiles).
  for (const auto &[q_heads, kv_heads, head_dim, page_size, many] :
       std::vector<std::tuple<int, int, int, int, bool>>{{8, 8, 128, 16, false},
                                                         {8, 2, 128, 32, false},
                                                         {8, 1, 64, 16, false},
                                                         {16, 2, 64, 32, false},
                                                         {16, 2, 64, 16, true}})
    for (bool causal : {true, false}) {
      PagedCase<T> c{.q_lengths = many ? std::vector<int>{600, 500, 400}
                                       : std::vector<int>{1, 5, 130, 64, 257},
                     .k_lengths = many ? std::vector<int>{700, 500, 450}
                                       : std::vector<int>{1, 37, 300, 64, 257},
                     .q_heads = q_heads,
                     .kv_heads = kv_heads,
                     .head_dim = head_dim,
                     .page_size = page_size,
                     .causal = causal};
      c.fill(rng);
      SCOPED_TRACE("GQA " + std::to_string(q_heads) + "/" + std::to_string(kv_heads) +
                   ", head_dim " + std::to_string(head_dim) + ", page " +
                   std::to_string(page_size) + (causal ? ", causal" : ""));
      const std::vector<double> expected = c.expected();
      for (int paged : {0, 1, 2})
        EXPECT_TRUE(
            gpu_testing::all_close(this->run(paged, c), expected, epsilon<T>(), epsilon<T>()))
            << "PAGED " << paged << " (0: flash_attention_paged())";
    }
}

// A length past the table's capacity, and a page past the cache: those sequences' outputs are
// NaN, the other's right; with `validate`, Error(bad_argument) names the entry.
TYPED_TEST(FlashAttentionPagedGpuTest, RefusedTablesPoisonTheirSequenceOrThrowWithValidate) {
  using T = TypeParam;
  std::mt19937 rng(27);
  PagedCase<T> c{.q_lengths = {20, 20, 20},
                 .k_lengths = {40, 40, 40},
                 .q_heads = 4,
                 .kv_heads = 2,
                 .head_dim = 64,
                 .page_size = 16,
                 .causal = true};
  c.fill(rng);
  const std::vector<double> expected = c.expected();
  c.tables[2 * c.max_blocks + 1] = c.num_blocks; // sequence 2's second page: past the cache
  const std::vector<int> lengths = {40, c.max_blocks * 16 + 1, 40}; // sequence 1: past capacity
  for (int paged : {1, 2}) {
    SCOPED_TRACE("PAGED " + std::to_string(paged));
    const std::vector<T> got = this->run(paged, c, &lengths);
    const std::size_t per_sequence = std::size_t(20) * 4 * 64;
    EXPECT_TRUE(gpu_testing::all_close(std::span<const T>(got.data(), per_sequence),
                                       std::span<const double>(expected.data(), per_sequence),
                                       epsilon<T>(), epsilon<T>()));
    std::size_t finite = 0;
    for (std::size_t i = per_sequence; i < got.size(); ++i)
      finite += std::isfinite(to_double(got[i]));
    EXPECT_EQ(finite, 0u) << "elements of refused sequences that are not NaN";
  }
  try {
    this->run(0, c, &lengths, true);
    ADD_FAILURE() << "validate let a length past the tables' capacity through";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(), "kjit::ops::flash_attention_paged: k_lens[1] is " +
                                   std::to_string(lengths[1]) + ", outside [0, " +
                                   std::to_string(c.max_blocks * 16) + "]");
  }
  try {
    this->run(0, c, nullptr, true);
    ADD_FAILURE() << "validate let a page past the cache through";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(), "kjit::ops::flash_attention_paged: block_tables[2][1] is " +
                                   std::to_string(c.num_blocks) + ", past the cache's " +
                                   std::to_string(c.num_blocks) + " blocks");
  }
}

} // namespace
} // namespace kjit::ops
