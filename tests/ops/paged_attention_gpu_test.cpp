// paged_attention_decode and reshape_and_cache on the device against the double-precision
// references: ragged lengths (0, 1, not multiples of the page), shuffled non-contiguous block
// tables, GQA 1, 4, 8 and 12, MQA, split-KV (tens of splits at batch 1 and 2), fp8 caches, poisoned
// outputs and workspaces, a workspace used twice, and bad tables.
#include "kjit/runtime/tuning_table.hpp"
#include "ops/src/paged_attention_plan.hpp"
#include "tests/ops/gpu_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace kjit::ops {
namespace {

using gpu_testing::OpsGpuTest;

// OpsGpuTest's helpers take element types; tables, slots and fp8 bytes are not.
template <typename X> DeviceBuffer to_device(const Device &device, const std::vector<X> &host) {
  DeviceBuffer buffer = device.allocate(std::max<std::size_t>(host.size() * sizeof(X), 1));
  buffer.write(host.data(), host.size() * sizeof(X));
  return buffer;
}
DeviceBuffer poisoned_bytes(const Device &device, std::size_t bytes) {
  return to_device(device, kjit::testing::poisoned<unsigned char>(bytes));
}
std::vector<unsigned char> bytes_from_device(const Device &device, const DeviceBuffer &buffer,
                                             std::size_t bytes) {
  device.synchronize();
  std::vector<unsigned char> host(bytes);
  buffer.read(host.data(), bytes);
  return host;
}

template <Element T> class PagedAttentionGpuTest : public OpsGpuTest {};
using HalfTypes = ::testing::Types<Half, BFloat16>;
TYPED_TEST_SUITE(PagedAttentionGpuTest, HalfTypes);

struct DecodeCase {
  int q_heads, kv_heads, head_dim, page;
  std::vector<int> lens;
  bool fp8 = false;
  bool workspace = true;
};

// A cache of `num_blocks` pages, as the device holds it (bytes) and as the reference reads it.
struct HostCache {
  std::vector<unsigned char> k_bytes, v_bytes;
  std::vector<double> k, v;
};

template <Element T>
HostCache random_cache(std::size_t elements, bool fp8, double k_scale, double v_scale,
                       std::mt19937 &rng) {
  HostCache cache;
  for (int which = 0; which < 2; ++which) {
    auto &bytes = which == 0 ? cache.k_bytes : cache.v_bytes;
    auto &values = which == 0 ? cache.k : cache.v;
    if (fp8) {
      // Bytes of every magnitude e4m3 has (subnormals too), never NaN.
      std::uniform_real_distribution<double> uniform(-400, 400);
      const double scale = which == 0 ? k_scale : v_scale;
      for (std::size_t i = 0; i < elements; ++i) {
        const double x = uniform(rng);
        const std::uint8_t byte = encode_e4m3(i % 7 == 0 ? x / 4096 : x);
        bytes.push_back(byte);
        values.push_back(decode_e4m3(byte) * scale);
      }
    } else {
      const auto typed = gpu_testing::random_elements<T>(elements, rng, -1.0, 1.0);
      bytes.resize(elements * sizeof(T));
      std::memcpy(bytes.data(), typed.data(), bytes.size());
      values = gpu_testing::to_doubles(typed);
    }
  }
  return cache;
}

// Tables over a shuffled pool of pages, with 3 pages no sequence uses; entries past a sequence's
// pages hold -7, which the kernel must never read.
struct Tables {
  std::vector<std::int32_t> tables, lens;
  int max_blocks, num_blocks;
};

Tables shuffled_tables(const std::vector<int> &lens, int page, std::mt19937 &rng) {
  Tables t;
  t.max_blocks = 1;
  int used = 0;
  for (int len : lens) {
    t.max_blocks = std::max(t.max_blocks, (len + page - 1) / page);
    used += (len + page - 1) / page;
  }
  t.num_blocks = used + 3;
  std::vector<std::int32_t> pool(t.num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  t.tables.assign(lens.size() * t.max_blocks, -7);
  int next = 0;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    for (int b = 0; b < (lens[s] + page - 1) / page; ++b)
      t.tables[s * t.max_blocks + b] = pool[next++];
    t.lens.push_back(lens[s]);
  }
  return t;
}

// The decode inputs on the device, and the output poisoned.
struct DecodeBuffers {
  DeviceBuffer k, v, q, tables, lens, out;
};
template <Element T>
DecodeBuffers decode_buffers(const Device &device, const HostCache &host, const std::vector<T> &q,
                             const Tables &t) {
  return {to_device(device, host.k_bytes),
          to_device(device, host.v_bytes),
          to_device(device, q),
          to_device(device, t.tables),
          to_device(device, t.lens),
          poisoned_bytes(device, q.size() * sizeof(T))};
}

TYPED_TEST(PagedAttentionGpuTest, DecodeMatchesTheReference) {
  using T = TypeParam;
  const DecodeCase cases[] = {
      {4, 4, 128, 16, {1, 17, 16, 33, 100, 0}, false, false}, // GQA 1, one split
      {32, 8, 128, 16, {1, 250, 4093, 15}},                   // GQA 4, split-KV
      {32, 8, 128, 16, {1, 250, 4093, 15}, false, false},     // the same without splits
      {32, 8, 128, 16, {800, 37}},            // 3 splits: a merge block narrower than a row
      {32, 8, 128, 16, {20011, 3}},           // tens of splits
      {32, 8, 128, 16, {9001}, true},         // fp8, the same
      {64, 8, 64, 32, {31, 32, 33, 1000}},    // GQA 8, head_dim 64, page 32
      {12, 1, 128, 32, {77, 1, 2049}},        // MQA, 12 heads: 2 groups of 6
      {32, 8, 128, 16, {5, 300, 2000}, true}, // fp8, split
      {16, 2, 64, 16, {129, 3}, true, false}, // fp8, head_dim 64
  };
  std::mt19937 rng(27);
  for (const DecodeCase &c : cases) {
    std::string lens;
    for (int len : c.lens)
      lens += std::to_string(len) + " ";
    SCOPED_TRACE(::testing::Message()
                 << "heads " << c.q_heads << "/" << c.kv_heads << ", head_dim " << c.head_dim
                 << ", page " << c.page << ", lens " << lens << (c.fp8 ? ", fp8" : "")
                 << (c.workspace ? ", workspace" : ""));
    const int batch = static_cast<int>(c.lens.size());
    const Tables t = shuffled_tables(c.lens, c.page, rng);
    const std::size_t cache_elements =
        static_cast<std::size_t>(t.num_blocks) * c.page * c.kv_heads * c.head_dim;
    const double k_scale = 0.01, v_scale = 0.003;
    const HostCache host = random_cache<T>(cache_elements, c.fp8, k_scale, v_scale, rng);
    const auto q = gpu_testing::random_elements<T>(
        static_cast<std::size_t>(batch) * c.q_heads * c.head_dim, rng, -1.0, 1.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

    DecodeBuffers buffers = decode_buffers(this->device(), host, q, t);
    PagedKvCache cache{
        buffers.k.as<void>(), buffers.v.as<void>(), t.num_blocks, c.page, c.kv_heads, c.head_dim};
    if (c.fp8) {
      cache.format = KvCacheFormat::fp8_e4m3;
      cache.k_scale = static_cast<float>(k_scale);
      cache.v_scale = static_cast<float>(v_scale);
    }
    const DecodeBatch decode{buffers.tables.as<std::int32_t>(), buffers.lens.as<std::int32_t>(),
                             batch, t.max_blocks};
    const std::size_t workspace_bytes =
        paged_attention_workspace_bytes(this->runtime(), c.q_heads, cache, decode);
    DeviceBuffer workspace = poisoned_bytes(this->device(), workspace_bytes + 1);
    paged_attention_decode<T>(this->runtime(), buffers.out.as<T>(), buffers.q.as<T>(), c.q_heads,
                              cache, decode, static_cast<float>(scale),
                              c.workspace ? DecodeWorkspace{workspace.as<void>(), workspace_bytes}
                                          : DecodeWorkspace{});
    const auto got = this->template download<T>(buffers.out, q.size());
    const auto expected = reference::paged_attention_decode(
        gpu_testing::to_doubles(q), host.k, host.v, t.tables, t.lens, c.q_heads, c.kv_heads,
        c.head_dim, c.page, t.max_blocks, scale);
    // The output is a convex combination of the values (|v| <= 1, fp8 <= 448 v_scale), computed
    // in float: scores of at most 128 products (relative 2^-20 each), exp2 approximated to 2^-21,
    // sums of up to 4k terms: well under 2^-12 of the largest value; then one rounding to T.
    const double largest = c.fp8 ? 448 * v_scale : 1.0;
    EXPECT_TRUE(gpu_testing::all_close(got, expected, largest * 0x1p-12, epsilon<T>()));
  }
}

// A split launch's merge is decided by flags in the workspace, which the launch leaves clear: two
// calls on one workspace (poisoned once, as a caller's scratch is) with other queries and freshly
// poisoned outputs both match the reference, at tens of splits and at 3.
TYPED_TEST(PagedAttentionGpuTest, TwoCallsOnOneWorkspaceAreBothRight) {
  using T = TypeParam;
  const int q_heads = 32, kv_heads = 8, head_dim = 128, page = 16;
  std::mt19937 rng(1127);
  for (const std::vector<int> &lens : {std::vector<int>{20011}, std::vector<int>{800, 37}}) {
    SCOPED_TRACE("longest " + std::to_string(lens[0]));
    const int batch = static_cast<int>(lens.size());
    const Tables t = shuffled_tables(lens, page, rng);
    const HostCache host = random_cache<T>(
        static_cast<std::size_t>(t.num_blocks) * page * kv_heads * head_dim, false, 1, 1, rng);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    DecodeBuffers buffers = decode_buffers(
        this->device(), host, std::vector<T>(std::size_t{1} * batch * q_heads * head_dim), t);
    const PagedKvCache cache{
        buffers.k.as<void>(), buffers.v.as<void>(), t.num_blocks, page, kv_heads, head_dim};
    const DecodeBatch decode{buffers.tables.as<std::int32_t>(), buffers.lens.as<std::int32_t>(),
                             batch, t.max_blocks};
    const std::size_t bytes =
        paged_attention_workspace_bytes(this->runtime(), q_heads, cache, decode);
    ASSERT_GT(bytes, 0u) << "the shape must split";
    DeviceBuffer workspace = poisoned_bytes(this->device(), bytes);
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE("call " + std::to_string(call));
      const auto q = gpu_testing::random_elements<T>(
          static_cast<std::size_t>(batch) * q_heads * head_dim, rng, -1.0, 1.0);
      buffers.q = to_device(this->device(), q);
      buffers.out = poisoned_bytes(this->device(), q.size() * sizeof(T));
      paged_attention_decode<T>(this->runtime(), buffers.out.as<T>(), buffers.q.as<T>(), q_heads,
                                cache, decode, static_cast<float>(scale),
                                {workspace.as<void>(), bytes});
      EXPECT_TRUE(gpu_testing::all_close(
          this->template download<T>(buffers.out, q.size()),
          reference::paged_attention_decode(gpu_testing::to_doubles(q), host.k, host.v, t.tables,
                                            t.lens, q_heads, kv_heads, head_dim, page, t.max_blocks,
                                            scale),
          0x1p-12, epsilon<T>()));
    }
  }
}

// A tuning record for the shape decides the decode's variant: the planted winner, a ring of 4
// steps (64 KiB of dynamic shared memory, past the 48 KiB a launch gets without asking), is what
// the call compiled and launched, and the result still matches the reference.
TYPED_TEST(PagedAttentionGpuTest, ATuningRecordForTheShapeChoosesTheDecodesVariant) {
  using T = TypeParam;
  Runtime &rt = this->runtime();
  const Device &device = this->device();
  if (device.target().vendor() != Vendor::nvidia)
    GTEST_SKIP() << "a ring past 48 KiB is NVIDIA's (dynamic shared memory); this is "
                 << device.target().id();
  const Template &tmpl = templates::find("paged_attention_decode");
  const int q_heads = 32, kv_heads = 8, head_dim = 128, page = 16;
  std::mt19937 rng(2727);
  // Batch 2 of at most 4096 tokens: a shape no other case here plans.
  const Tables t = shuffled_tables({3000, 5}, page, rng);
  const detail::DecodePlan heuristic = detail::decode_variant(32, q_heads, kv_heads, false);
  const ParamValues winner = {{"WARPS", 4}, {"UNROLL", 2}, {"LOADS", 2}, {"STAGES", 4}};
  ASSERT_NE(heuristic.stages, 4);
  TuningTable::from_config(rt.config())
      .store({TuningKey::of(tmpl, detail::decode_tuning_problem(heuristic, head_dim, page, false),
                            detail::decode_tuning_extents(2, t.max_blocks * page),
                            {device.target().id(), device.multiprocessors(), device.name()},
                            rt.compiler_identity(device.vendor())),
              {winner, 1.0},
              {},
              0});
  const HostCache host = random_cache<T>(
      static_cast<std::size_t>(t.num_blocks) * page * kv_heads * head_dim, false, 1, 1, rng);
  const auto q = gpu_testing::random_elements<T>(std::size_t{2} * q_heads * head_dim, rng, -1, 1);
  DecodeBuffers buffers = decode_buffers(device, host, q, t);
  const PagedKvCache cache{
      buffers.k.as<void>(), buffers.v.as<void>(), t.num_blocks, page, kv_heads, head_dim};
  const DecodeBatch decode{buffers.tables.as<std::int32_t>(), buffers.lens.as<std::int32_t>(), 2,
                           t.max_blocks};
  const std::size_t workspace_bytes = paged_attention_workspace_bytes(rt, q_heads, cache, decode);
  DeviceBuffer workspace = poisoned_bytes(device, workspace_bytes + 1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  paged_attention_decode<T>(rt, buffers.out.as<T>(), buffers.q.as<T>(), q_heads, cache, decode,
                            static_cast<float>(scale), {workspace.as<void>(), workspace_bytes});
  const auto got = this->template download<T>(buffers.out, q.size());
  EXPECT_TRUE(gpu_testing::all_close(
      got,
      reference::paged_attention_decode(gpu_testing::to_doubles(q), host.k, host.v, t.tables,
                                        t.lens, q_heads, kv_heads, head_dim, page, t.max_blocks,
                                        scale),
      0x1p-12, epsilon<T>()));

  ParamValues planted = {{"T", element_name<T>()},
                         {"KV_FP8", 0},
                         {"HEAD_DIM", head_dim},
                         {"PAGE", page},
                         {"GROUP", heuristic.group}};
  planted.add(winner);
  const std::uint64_t compiled = rt.counters().compiled;
  rt.kernel(tmpl, planted);
  EXPECT_EQ(rt.counters().compiled, compiled) << "the call did not build the planted winner";
}

TYPED_TEST(PagedAttentionGpuTest, BadTablesGiveNaNForTheirSequenceAloneOrAnErrorWhenValidated) {
  using T = TypeParam;
  std::mt19937 rng(5);
  const int page = 16, head_dim = 128, q_heads = 8, kv_heads = 2;
  Tables t = shuffled_tables({40, 40, 40}, page, rng);
  t.tables[1 * t.max_blocks + 2] = 1 << 20; // sequence 1: a page past the cache
  t.lens[2] = t.max_blocks * page + 1;      // sequence 2: longer than its table
  const std::size_t elements = static_cast<std::size_t>(t.num_blocks) * page * kv_heads * head_dim;
  const HostCache host = random_cache<T>(elements, false, 1, 1, rng);
  const auto q = gpu_testing::random_elements<T>(3 * q_heads * head_dim, rng, -1.0, 1.0);
  DecodeBuffers buffers = decode_buffers(this->device(), host, q, t);
  const PagedKvCache cache{
      buffers.k.as<void>(), buffers.v.as<void>(), t.num_blocks, page, kv_heads, head_dim};
  DecodeBatch decode{buffers.tables.as<std::int32_t>(), buffers.lens.as<std::int32_t>(), 3,
                     t.max_blocks};
  paged_attention_decode<T>(this->runtime(), buffers.out.as<T>(), buffers.q.as<T>(), q_heads, cache,
                            decode, 0.1f);
  const auto got = this->template download<T>(buffers.out, q.size());
  const std::size_t row = static_cast<std::size_t>(q_heads) * head_dim;
  std::vector<std::int32_t> good_lens = {40};
  const auto expected = reference::paged_attention_decode(
      gpu_testing::to_doubles(std::vector<T>(q.begin(), q.begin() + row)), host.k, host.v,
      std::span(t.tables).first(t.max_blocks), good_lens, q_heads, kv_heads, head_dim, page,
      t.max_blocks, 0.1);
  EXPECT_TRUE(gpu_testing::all_close(std::span<const T>(got).first(row),
                                     std::span<const double>(expected), 0x1p-12, epsilon<T>()));
  for (std::size_t i = row; i < got.size(); ++i)
    ASSERT_TRUE(std::isnan(to_double(got[i]))) << "element " << i << " of a bad sequence";

  decode.validate = true;
  try {
    paged_attention_decode<T>(this->runtime(), buffers.out.as<T>(), buffers.q.as<T>(), q_heads,
                              cache, decode, 0.1f);
    ADD_FAILURE() << "validated bad tables were launched";
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    EXPECT_EQ(error.summary(), "kjit::ops::paged_attention_decode: block_tables[1][2] is " +
                                   std::to_string(1 << 20) + ", past the cache's " +
                                   std::to_string(t.num_blocks) + " blocks");
  }
}

struct WriteCase {
  int kv_heads, head_dim, rotary_dim;
  RotaryStyle style;
  bool fp8;
};

TYPED_TEST(PagedAttentionGpuTest, ReshapeAndCacheWritesTheReferencesValuesAndNothingElse) {
  using T = TypeParam;
  const WriteCase cases[] = {
      {8, 128, 0, RotaryStyle::neox, false},  {8, 128, 128, RotaryStyle::neox, false},
      {4, 64, 32, RotaryStyle::gptj, false},  {8, 128, 0, RotaryStyle::neox, true},
      {2, 128, 128, RotaryStyle::neox, true}, {1, 80, 34, RotaryStyle::gptj, true},
  };
  std::mt19937 rng(3);
  const int tokens = 37, page = 16, num_blocks = 5, max_position = 512;
  const int slots = num_blocks * page;
  for (const WriteCase &c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "kv_heads " << c.kv_heads << ", head_dim " << c.head_dim << ", rotary_dim "
                 << c.rotary_dim << ", " << (c.style == RotaryStyle::neox ? "NeoX" : "GPT-J")
                 << (c.fp8 ? ", fp8" : ""));
    // key and value are slices of a fused qkv [tokens, (4 + 2) * kv_heads * head_dim].
    const int row = c.kv_heads * c.head_dim;
    const std::int64_t stride = 6 * row;
    const auto qkv = gpu_testing::random_elements<T>(tokens * stride, rng, -2.0, 2.0);
    std::vector<T> key, value;
    for (int t = 0; t < tokens; ++t) {
      key.insert(key.end(), qkv.begin() + t * stride + 4 * row, qkv.begin() + t * stride + 5 * row);
      value.insert(value.end(), qkv.begin() + t * stride + 5 * row, qkv.begin() + (t + 1) * stride);
    }
    std::vector<std::int64_t> slot_mapping(slots);
    std::iota(slot_mapping.begin(), slot_mapping.end(), 0);
    std::shuffle(slot_mapping.begin(), slot_mapping.end(), rng);
    slot_mapping.resize(tokens);
    slot_mapping[4] = -1;    // padding
    slot_mapping[9] = slots; // past the cache: skipped
    std::vector<std::int64_t> positions(tokens);
    std::uniform_int_distribution<int> position(0, max_position - 1);
    for (auto &p : positions)
      p = position(rng);
    positions[11] = max_position; // outside the cache: unrotated
    std::vector<T> cos_sin;
    for (int p = 0; p < max_position; ++p)
      for (int i = 0; i < c.rotary_dim; ++i) {
        const double angle = p * std::pow(10000.0, -2.0 * (i % (c.rotary_dim / 2)) / c.rotary_dim);
        cos_sin.push_back(from_double<T>(i < c.rotary_dim / 2 ? std::cos(angle) : std::sin(angle)));
      }

    const std::size_t element = c.fp8 ? 1 : sizeof(T);
    const std::size_t cache_bytes = static_cast<std::size_t>(slots) * row * element;
    DeviceBuffer k = poisoned_bytes(this->device(), cache_bytes);
    DeviceBuffer v = poisoned_bytes(this->device(), cache_bytes);
    DeviceBuffer qkv_on_device = this->upload(qkv),
                 slots_on_device = to_device(this->device(), slot_mapping);
    DeviceBuffer positions_on_device = to_device(this->device(), positions);
    DeviceBuffer cos_sin_on_device = this->upload(cos_sin.empty() ? std::vector<T>(8) : cos_sin);
    PagedKvCache cache{k.as<void>(), v.as<void>(), num_blocks, page, c.kv_heads, c.head_dim};
    const double k_scale = 0.02, v_scale = 0.05;
    if (c.fp8) {
      cache.format = KvCacheFormat::fp8_e4m3;
      cache.k_scale = static_cast<float>(k_scale);
      cache.v_scale = static_cast<float>(v_scale);
    }
    const KeyRotation<T> rotation{positions_on_device.as<std::int64_t>(), cos_sin_on_device.as<T>(),
                                  max_position, c.rotary_dim, c.style};
    reshape_and_cache<T>(this->runtime(), qkv_on_device.as<T>() + 4 * row,
                         qkv_on_device.as<T>() + 5 * row, cache, slots_on_device.as<std::int64_t>(),
                         tokens, stride, stride, c.rotary_dim > 0 ? &rotation : nullptr);
    const auto got_k = bytes_from_device(this->device(), k, cache_bytes);
    const auto got_v = bytes_from_device(this->device(), v, cache_bytes);

    std::vector<double> expected_k(static_cast<std::size_t>(slots) * row, NAN);
    std::vector<double> expected_v(expected_k.size(), NAN);
    reference::reshape_and_cache<T>(key, value, slot_mapping, c.kv_heads, c.head_dim, expected_k,
                                    expected_v, positions, cos_sin, c.rotary_dim, c.style);
    // A written element: the reference's value rounded once to the cache's format, after a float
    // rotation (two products of |x| <= 2 and |cos|, |sin| <= 1: within 2^-21). fp8: within one
    // e4m3 step (2^-3 relative, 2^-9 absolute below 2^-6) of x / scale. An unwritten one keeps
    // the poison, byte for byte.
    for (int which = 0; which < 2; ++which) {
      const auto &got = which == 0 ? got_k : got_v;
      const auto &expected = which == 0 ? expected_k : expected_v;
      const double scale = which == 0 ? k_scale : v_scale;
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < expected.size() && wrong < 5; ++i) {
        const unsigned char *bytes = got.data() + i * element;
        if (std::isnan(expected[i])) {
          wrong += std::any_of(bytes, bytes + element,
                               [](unsigned char b) { return b != kjit::testing::poison_byte; });
          continue;
        }
        double value = 0, tolerance = 0;
        if (c.fp8) {
          value = decode_e4m3(bytes[0]);
          const double exact = expected[i] / scale;
          tolerance = std::abs(exact) * 0x1p-3 + 0x1p-9;
          wrong += !(std::abs(value - exact) <= tolerance);
        } else {
          T typed;
          std::memcpy(&typed, bytes, sizeof(T));
          value = to_double(typed);
          tolerance = 0x1p-20 + epsilon<T>() * std::abs(expected[i]);
          wrong += !(std::abs(value - expected[i]) <= tolerance);
        }
      }
      EXPECT_EQ(wrong, 0u) << (which == 0 ? "k" : "v") << " cache";
    }
  }
}

// The fp8 write's rounding on the device (one instruction on sm_89 and newer) is encode_e4m3's,
// byte for byte, over every e4m3 value, the midpoints between neighbours (ties to even), values
// past 448 and both signs, with scale 1 (each probe exact in bfloat16).
class PagedAttentionFp8GpuTest : public OpsGpuTest {};
TEST_F(PagedAttentionFp8GpuTest, TheWriteRoundsAsEncodeE4m3) {
  std::vector<BFloat16> probes;
  for (int bits = 0; bits < 128; ++bits) {
    const double x = decode_e4m3(static_cast<std::uint8_t>(bits));
    if (std::isnan(x))
      continue;
    const double next = decode_e4m3(static_cast<std::uint8_t>(bits + 1));
    for (const double probe : {x, std::isnan(next) ? x * 1.5 : (x + next) / 2})
      for (const double sign : {1.0, -1.0})
        probes.push_back(from_double<BFloat16>(sign * probe));
  }
  const int head_dim = 128, page = 16;
  const int tokens = static_cast<int>((probes.size() + head_dim - 1) / head_dim);
  probes.resize(static_cast<std::size_t>(tokens) * head_dim, from_double<BFloat16>(1000.0));
  const Device &device = this->device();
  DeviceBuffer key = to_device(device, probes);
  std::vector<std::int64_t> slot_mapping(tokens);
  std::iota(slot_mapping.begin(), slot_mapping.end(), 0);
  DeviceBuffer slots = to_device(device, slot_mapping);
  DeviceBuffer k = poisoned_bytes(device, probes.size()), v = poisoned_bytes(device, probes.size());
  PagedKvCache cache{k.as<void>(), v.as<void>(), (tokens + page - 1) / page, page, 1, head_dim};
  cache.format = KvCacheFormat::fp8_e4m3;
  reshape_and_cache<BFloat16>(runtime(), key.as<BFloat16>(), key.as<BFloat16>(), cache,
                              slots.as<std::int64_t>(), tokens, head_dim, head_dim, nullptr);
  const auto got = bytes_from_device(device, k, probes.size());
  int wrong = 0;
  for (std::size_t i = 0; i < probes.size(); ++i)
    wrong += got[i] != encode_e4m3(to_double(probes[i]));
  EXPECT_EQ(wrong, 0);
}

} // namespace
} // namespace kjit::ops
