// paged_attention_decode, its merge and reshape_and_cache run on the CPU with a wavefront of 64
// lanes (CDNA: gfx90a, gfx942, gfx950), as tests/ops/kernel_emulation.hpp runs kernels, against
// the double-precision references: the AMD evidence where no AMD GPU is at hand. Small shapes
// (every emulated thread is a std::thread), with splits, GQA, shuffled tables and fp8.
#include "tests/ops/kernel_emulation.hpp"

#include "kjit/ops/paged_attention.hpp"
#include "kjit/ops/quant.hpp"
#include "tests/ops/gpu_support.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <random>

#define KJIT_WARP_SIZE 64
namespace {
// The prelude comes before the kernels, the tests after them.
// clang-format off
#include "templates/prelude/kjit/prelude.h"
#include "templates/kernels/attention_decode.hip"
#include "templates/kernels/kv_cache.hip"
#include "tests/ops/emulated_buffer.hpp"
// clang-format on

using ::kjit::ops::decode_e4m3;
using ::kjit::ops::encode_e4m3;
using ::kjit::ops::epsilon;
using ::kjit::ops::Half;
using ::kjit::ops::gpu_testing::all_close;
using ::kjit::ops::gpu_testing::random_elements;
using ::kjit::ops::gpu_testing::to_doubles;
namespace reference = ::kjit::ops::reference;

constexpr int heads = 8, kv_heads = 2, head_dim = 64, page = 16, warps = 2, unroll = 2;
constexpr float log2e = 1.4426950408889634f;

// Two sequences of 37 tokens and 1 over shuffled pages (entries past a sequence hold -7), GQA 4,
// in 1 split and in 2 of 32 tokens (the second split of the short sequence sees no token).
template <int KV_FP8, int LOADS, int STAGES> void check_decode() {
  SCOPED_TRACE(std::string(KV_FP8 ? "fp8" : "half") + ", LOADS " + std::to_string(LOADS) +
               ", STAGES " + std::to_string(STAGES));
  std::mt19937 rng(9);
  const std::vector<std::int32_t> tables = {3, 0, 4, 1, -7, -7}, lens = {37, 1};
  const int num_blocks = 5, max_blocks = 3, capacity = max_blocks * page;
  const std::size_t elements = std::size_t{num_blocks} * page * kv_heads * head_dim;
  const double k_scale = 0.01, v_scale = 0.004;
  std::vector<unsigned char> k_bytes, v_bytes;
  std::vector<double> k, v;
  std::vector<Half> k16, v16;
  if (KV_FP8) {
    std::uniform_real_distribution<double> uniform(-400, 400);
    for (std::size_t i = 0; i < elements; ++i) {
      k_bytes.push_back(encode_e4m3(uniform(rng)));
      v_bytes.push_back(encode_e4m3(i % 5 == 0 ? uniform(rng) / 4096 : uniform(rng)));
      k.push_back(decode_e4m3(k_bytes.back()) * k_scale);
      v.push_back(decode_e4m3(v_bytes.back()) * v_scale);
    }
  } else {
    k16 = random_elements<Half>(elements, rng, -1, 1);
    v16 = random_elements<Half>(elements, rng, -1, 1);
    k = to_doubles(k16);
    v = to_doubles(v16);
  }
  const void *k_cache = KV_FP8 ? static_cast<const void *>(k_bytes.data()) : k16.data();
  const void *v_cache = KV_FP8 ? static_cast<const void *>(v_bytes.data()) : v16.data();
  const auto q = random_elements<Half>(2 * heads * head_dim, rng, -1, 1);
  const double scale = 0.125;
  const auto expected = reference::paged_attention_decode(
      to_doubles(q), k, v, tables, lens, heads, kv_heads, head_dim, page, max_blocks, scale);
  const float q_scale = static_cast<float>(scale) * log2e * (KV_FP8 ? k_scale : 1.0f);
  const float v_factor = KV_FP8 ? static_cast<float>(v_scale) : 1.0f;
  Buffer<Half> dq(q);
  for (const int splits : {1, 2}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    const int partition = splits == 1 ? capacity : 32;
    auto out = Buffer<Half>::poisoned(q.size());
    std::vector<float> partial_out(2 * heads * splits * head_dim, NAN),
        partial_lse(2 * heads * splits, NAN);
    ::kjit::emulation::launch({kv_heads, 2, static_cast<unsigned>(splits)}, {warps * 64}, [&] {
      paged_attention_decode<__half, KV_FP8, head_dim, page, heads / kv_heads, warps, unroll, LOADS,
                             STAGES>(out.data(), partial_out.data(), partial_lse.data(), dq.data(),
                                     k_cache, v_cache, tables.data(), lens.data(), q_scale,
                                     v_factor, heads, kv_heads, num_blocks, max_blocks, partition,
                                     capacity);
    });
    if (splits > 1)
      ::kjit::emulation::launch({2 * heads}, {64}, [&] { // detail::merge_threads(2, 64, 64)
        paged_attention_merge<__half, head_dim>(out.data(), partial_out.data(), partial_lse.data(),
                                                splits);
      });
    const double largest = KV_FP8 ? 448 * v_scale : 1.0;
    EXPECT_TRUE(all_close(out.values(q.size()), expected, largest * 0x1p-12, epsilon<Half>()));
    EXPECT_TRUE(out.guard_intact(q.size()));
  }
}

TEST(EmulatedPagedAttentionWave64, DecodeMatchesTheReferenceWithAndWithoutSplits) {
  check_decode<0, 1, 2>();
  check_decode<1, 1, 3>();
  check_decode<0, 2, 3>();
  check_decode<1, 2, 2>();
}

// Five tokens (one padding, one past the cache) into 2 pages of 16, RoPE (NeoX with 8 pairs an
// item, GPT-J with 4) over the whole head, by blocks of 4 tokens (kv_cache.hip's TOKENS; the
// second holds one) and 8 threads, each of which takes several items.
template <int KV_FP8, int ROPE> void check_write() {
  SCOPED_TRACE(std::string(KV_FP8 ? "fp8" : "half") + (ROPE == 1 ? ", NeoX" : ", GPT-J"));
  std::mt19937 rng(4);
  const int tokens = 5, slots = 2 * page, row = kv_heads * head_dim, max_position = 8;
  const auto key = random_elements<Half>(tokens * row, rng, -2, 2);
  const auto value = random_elements<Half>(tokens * row, rng, -2, 2);
  const std::vector<std::int64_t> slot_mapping = {7, -1, 30, slots, 0};
  const std::vector<std::int64_t> positions = {3, 0, 7, 1, 5};
  const auto cos_sin = random_elements<Half>(max_position * head_dim, rng, -1, 1);
  const std::size_t element = KV_FP8 ? 1 : 2;
  std::vector<unsigned char> k(slots * row * element, 0xFF), v(k);
  Buffer<Half> dkey(key), dvalue(value), dcos(cos_sin);
  const double k_scale = 0.02, v_scale = 0.05;
  ::kjit::emulation::launch({(tokens + 3) / 4}, {8}, [&] {
    reshape_and_cache<__half, KV_FP8, head_dim, ROPE, head_dim, ROPE == 1 ? 8 : 4, 4>(
        dkey.data(), dvalue.data(), k.data(), v.data(),
        reinterpret_cast<const long long *>(slot_mapping.data()),
        reinterpret_cast<const long long *>(positions.data()), dcos.data(), max_position,
        KV_FP8 ? static_cast<float>(1 / k_scale) : 1.0f,
        KV_FP8 ? static_cast<float>(1 / v_scale) : 1.0f, kv_heads, row, row, slots, tokens);
  });
  std::vector<double> expected_k(slots * row, NAN), expected_v(expected_k);
  reference::reshape_and_cache<Half>(
      key, value, slot_mapping, kv_heads, head_dim, expected_k, expected_v, positions, cos_sin,
      head_dim, ROPE == 1 ? ::kjit::ops::RotaryStyle::neox : ::kjit::ops::RotaryStyle::gptj);
  for (int which = 0; which < 2; ++which) {
    const auto &got = which == 0 ? k : v;
    const auto &want = which == 0 ? expected_k : expected_v;
    const double scale = which == 0 ? k_scale : v_scale;
    int wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const unsigned char *bytes = got.data() + i * element;
      if (std::isnan(want[i])) {
        wrong += std::any_of(bytes, bytes + element, [](unsigned char b) { return b != 0xFF; });
      } else if (KV_FP8) {
        const double exact = want[i] / scale;
        wrong += !(std::abs(decode_e4m3(bytes[0]) - exact) <= std::abs(exact) * 0x1p-3 + 0x1p-9);
      } else {
        Half h;
        std::memcpy(&h, bytes, 2);
        wrong += !(std::abs(::kjit::ops::to_double(h) - want[i]) <=
                   0x1p-20 + epsilon<Half>() * std::abs(want[i]));
      }
    }
    EXPECT_EQ(wrong, 0) << (which == 0 ? "k" : "v");
  }
}

TEST(EmulatedPagedAttentionWave64, ReshapeAndCacheMatchesTheReference) {
  check_write<0, 1>();
  check_write<1, 1>();
  check_write<0, 2>();
  check_write<1, 2>();
}

// The integer e4m3 rounding against encode_e4m3 on every float the write can meet: each
// e4m3 value, the midpoints between neighbours (ties to even) and values past 448.
TEST(EmulatedPagedAttentionWave64, TheWritesE4m3RoundingIsEncodeE4m3s) {
  int wrong = 0;
  for (int bits = 0; bits < 256; ++bits) {
    const double x = decode_e4m3(static_cast<std::uint8_t>(bits));
    if (std::isnan(x))
      continue;
    const double next = decode_e4m3(static_cast<std::uint8_t>(bits + 1));
    for (const double probe : {x, std::isnan(next) ? x * 1.1 : (x + next) / 2, x * 1.01})
      wrong += kjit_kv_cache::to_e4m3(static_cast<float>(probe)) != encode_e4m3(probe);
  }
  EXPECT_EQ(wrong, 0);
}

} // namespace
