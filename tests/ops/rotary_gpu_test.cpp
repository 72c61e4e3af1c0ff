// rotary_embedding on the device against the double-precision reference.
#include "tests/ops/gpu_support.hpp"

#include <cmath>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

template <Element T> class RotaryGpuTest : public OpsGpuTest {};
TYPED_TEST_SUITE(RotaryGpuTest, gpu_testing::ElementTypes);

struct RotaryShape {
  int tokens, q_heads, kv_heads, head_size, rotary_dim;
  RotaryStyle style;
  int misalign = 0; // elements by which query and key start past an aligned address
};

constexpr int max_position = 1024;

// The cache a model builds: cos and sin of position * 10000^(-2i / rotary_dim), rounded to T.
template <Element T> std::vector<T> cos_sin_cache(int rotary_dim) {
  std::vector<T> cache(static_cast<std::size_t>(max_position) * rotary_dim);
  const int half = rotary_dim / 2;
  for (int position = 0; position < max_position; ++position)
    for (int i = 0; i < half; ++i) {
      const double angle = position * std::pow(10000.0, -2.0 * i / rotary_dim);
      cache[static_cast<std::size_t>(position) * rotary_dim + i] = from_double<T>(std::cos(angle));
      cache[static_cast<std::size_t>(position) * rotary_dim + half + i] =
          from_double<T>(std::sin(angle));
    }
  return cache;
}

TYPED_TEST(RotaryGpuTest, RotatesQueryAndKeyAsTheReferenceDoes) {
  using T = TypeParam;
  const RotaryShape shapes[] = {
      {1, 4, 1, 64, 64, RotaryStyle::neox},
      {3, 4, 1, 64, 64, RotaryStyle::gptj, 1}, // misaligned: element by element
      {7, 8, 2, 128, 128, RotaryStyle::gptj},
      {33, 3, 3, 80, 34, RotaryStyle::neox}, // rotary_dim / 2 odd: one pair per access
      {33, 2, 1, 80, 48, RotaryStyle::gptj},
      {17, 32, 8, 128, 128, RotaryStyle::neox},
  };
  std::mt19937 rng(1234);
  for (const RotaryShape &s : shapes) {
    SCOPED_TRACE(::testing::Message()
                 << "tokens " << s.tokens << ", heads " << s.q_heads << "/" << s.kv_heads
                 << ", head_size " << s.head_size << ", rotary_dim " << s.rotary_dim << ", "
                 << (s.style == RotaryStyle::neox ? "NeoX" : "GPT-J") << ", misaligned by "
                 << s.misalign);
    // Position 0 is the identity, so positions start at 1; two tokens of the 7-token case are
    // outside the cache and must be left as they are.
    std::vector<std::int64_t> positions(s.tokens);
    std::uniform_int_distribution<int> position(1, max_position - 1);
    for (auto &p : positions)
      p = position(rng);
    if (s.tokens == 7) {
      positions[3] = -1;
      positions[5] = max_position;
    }
    const std::size_t q_count = static_cast<std::size_t>(s.tokens) * s.q_heads * s.head_size;
    const std::size_t k_count = static_cast<std::size_t>(s.tokens) * s.kv_heads * s.head_size;
    const auto query = gpu_testing::random_elements<T>(q_count, rng, -1.0, 1.0);
    const auto key = gpu_testing::random_elements<T>(k_count, rng, -1.0, 1.0);
    const auto cache = cos_sin_cache<T>(s.rotary_dim);

    DeviceBuffer positions_on_device = this->device().allocate(positions.size() * 8);
    positions_on_device.write(positions.data(), positions.size() * 8);
    std::vector<T> query_with_offset(s.misalign), key_with_offset(s.misalign);
    query_with_offset.insert(query_with_offset.end(), query.begin(), query.end());
    key_with_offset.insert(key_with_offset.end(), key.begin(), key.end());
    DeviceBuffer q = this->upload(query_with_offset), k = this->upload(key_with_offset);
    DeviceBuffer c = this->upload(cache);
    rotary_embedding<T>(this->runtime(), positions_on_device.as<std::int64_t>(),
                        q.as<T>() + s.misalign, k.as<T>() + s.misalign, c.as<T>(), max_position,
                        s.tokens, s.q_heads, s.kv_heads, s.head_size, s.rotary_dim, s.style);
    auto got_q = this->template download<T>(q, s.misalign + q_count);
    auto got_k = this->template download<T>(k, s.misalign + k_count);
    got_q.erase(got_q.begin(), got_q.begin() + s.misalign);
    got_k.erase(got_k.begin(), got_k.begin() + s.misalign);

    // Each output is x cos - y sin (or y cos + x sin) of inputs and cache values that are exact in
    // float, computed in float (a few float roundings of terms at most 1 in magnitude: well
    // under 2^-20) and rounded once to T (half a unit of T: within epsilon<T>() relative).
    const auto expected_q = reference::rotary_embedding<T>(positions, query, cache, s.q_heads,
                                                           s.head_size, s.rotary_dim, s.style);
    const auto expected_k = reference::rotary_embedding<T>(positions, key, cache, s.kv_heads,
                                                           s.head_size, s.rotary_dim, s.style);
    EXPECT_TRUE(gpu_testing::all_close(got_q, expected_q, 0x1p-20, epsilon<T>())) << "query";
    EXPECT_TRUE(gpu_testing::all_close(got_k, expected_k, 0x1p-20, epsilon<T>())) << "key";
  }
}

} // namespace
} // namespace kjit::ops
