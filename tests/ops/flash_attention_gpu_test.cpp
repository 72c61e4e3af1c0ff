// flash_attention on the device against the double-precision reference: ragged batches (lengths
// of 1 and not multiples of the tiles), causal masks at their boundaries (more keys than queries,
// and more queries than keys, whose first rows see none), GQA 1, 4 and 8, both head dims and
// types, into a poisoned output.
#include "ops/src/flash_attention_variant.hpp"
#include "ops/src/launch.hpp"
#include "tests/ops/gpu_support.hpp"

#include <functional>

#include <numeric>
#include <string>
#include <vector>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

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
  void expect_matches_reference(const Attention<T> &attention) {
    const std::vector<Case> cases = {
        {{1, 130, 257, 64}, {1, 130, 257, 64}, 8, 8, 128, true},
        {{1, 130, 257, 64}, {1, 130, 257, 64}, 8, 8, 128, false},
        {{100, 1, 200}, {300, 77, 450}, 8, 2, 128, true}, // keys past the queries: chunked
        {{300, 5}, {100, 1}, 8, 1, 64, true},             // rows that see no key get zeros
        {{129, 383}, {129, 383}, 16, 2, 64, false},
        {{129, 383}, {129, 383}, 16, 2, 64, true},
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
      DeviceBuffer out = this->template poisoned<T>(q_count);
      attention(static_cast<T *>(out.data()), static_cast<const T *>(q_device.data()),
                static_cast<const T *>(k_device.data()), static_cast<const T *>(v_device.data()),
                static_cast<const int *>(cu_q_device.data()),
                static_cast<const int *>(cu_k_device.data()), shape);
      const std::vector<double> expected =
          reference::flash_attention<T>(q, k, v, cu_q, cu_k, shape);
      EXPECT_TRUE(gpu_testing::all_close(this->template download<T>(out, q_count), expected,
                                         epsilon<T>(), epsilon<T>()));
    }
  }
};
using AttentionTypes = ::testing::Types<Half, BFloat16>;
TYPED_TEST_SUITE(FlashAttentionGpuTest, AttentionTypes);

TYPED_TEST(FlashAttentionGpuTest, MatchesTheReferenceOnRaggedCausalAndGroupedBatches) {
  using T = TypeParam;
  if (this->device().target().id() != "sm_90a")
    GTEST_SKIP() << "flash_attention's wgmma kernel runs on sm_90a; this is "
                 << this->device().target().id();
  this->expect_matches_reference([&](T *out, const T *q, const T *k, const T *v, const int *cu_q,
                                     const int *cu_k, const AttentionShape &shape) {
    flash_attention<T>(this->runtime(), out, q, k, v, cu_q, cu_k, shape);
  });
}

// The mma.sync kernel that serves sm_80 and newer other than sm_90a, run here on whatever NVIDIA
// device of sm_80 or newer there is.
TYPED_TEST(FlashAttentionGpuTest, MmaSyncKernelMatchesTheReference) {
  using T = TypeParam;
  const jit::Target &target = this->device().target();
  if (detail::nvidia_compute_capability(target) < 80)
    GTEST_SKIP() << "flash_attention_mma runs on NVIDIA sm_80 and newer; this is " << target.id();
  this->expect_matches_reference([&](T *out, const T *q, const T *k, const T *v, const int *cu_q,
                                     const int *cu_k, const AttentionShape &shape) {
    detail::launch_flash_attention<T>(
        this->runtime(), detail::flash_attention_variant<T>(jit::Target::parse("sm_80"), shape),
        out, q, k, v, cu_q, cu_k, shape);
  });
}

} // namespace
} // namespace kjit::ops
