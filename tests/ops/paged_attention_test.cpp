// paged_attention_decode and reshape_and_cache on the CPU: the templates compile for both
// vendors, the wrappers refuse bad input in one line, the split plan, and the references against
// arithmetic done by hand.
#include "kjit/ops/paged_attention.hpp"
#include "ops/src/paged_attention_plan.hpp"
#include "tests/ops/compile_support.hpp"
#include "tests/support/temp_dir.hpp"

#include <cmath>
#include <gtest/gtest.h>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

TEST_F(OpsCompileTest, PagedDecodeVariantsCompileForAmdAndNvidia) {
  for (const char *target : {"gfx90a", "sm_80", "sm_90"}) {
    SCOPED_TRACE(target);
    for (const char *type : {"half", "bfloat16"})
      for (int fp8 : {0, 1})
        EXPECT_TRUE(compiles("paged_attention_decode", {{"T", type}, {"KV_FP8", fp8}}, target));
    EXPECT_TRUE(compiles("paged_attention_decode",
                         {{"HEAD_DIM", 64}, {"PAGE", 32}, {"GROUP", 8}, {"UNROLL", 2}}, target));
    EXPECT_TRUE(compiles("paged_attention_decode",
                         {{"GROUP", 1}, {"WARPS", 2}, {"LOADS", 2}, {"STAGES", 2}}, target));
    EXPECT_TRUE(compiles("paged_attention_merge", {{"HEAD_DIM", 64}}, target));
    EXPECT_TRUE(compiles("reshape_and_cache", {{"T", "half"}}, target));
    EXPECT_TRUE(compiles("reshape_and_cache",
                         {{"KV_FP8", 1}, {"ROPE", 1}, {"ROTARY_DIM", 128}, {"VEC", 8}}, target));
    EXPECT_TRUE(compiles("reshape_and_cache",
                         {{"HEAD_DIM", 80}, {"ROPE", 2}, {"ROTARY_DIM", 34}, {"VEC", 1}}, target));
  }
}

// On AMD the ring is static shared memory (on NVIDIA dynamic: the wrapper sizes the launch).
TEST_F(OpsCompileTest, PagedDecodeRefusesARingPastStaticSharedMemoryOnAmd) {
  // 4 stages of 2 tokens' 2 loads of K and V for 256 threads: 64 KiB.
  EXPECT_TRUE(
      refuses_to_compile("paged_attention_decode",
                         {{"WARPS", 8}, {"UNROLL", 2}, {"LOADS", 2}, {"STAGES", 4}, {"GROUP", 1}},
                         "gfx90a", "the ring must fit 48 KiB of static shared memory"));
}

// The variants decode_variant picks for NVIDIA, compiled for sm_90a: no spills, no stack frame
// (the ring's copies and the accumulators stay in registers).
TEST(PagedDecodeCompile, TheWrappersVariantsHaveNoSpillsOnSm90a) {
  const std::unique_ptr<jit::Compiler> nvrtc = compile_testing::nvrtc_or_null();
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC is not available";
  const Template &tmpl = templates::find("paged_attention_decode");
  for (const int ratio : {1, 4, 8, 12})
    for (const int fp8 : {0, 1})
      for (const int head_dim : {64, 128}) {
        const detail::DecodePlan plan = detail::decode_variant(32, ratio * 2, 2, fp8 != 0);
        EXPECT_TRUE(
            compile_testing::wgmma_compiles_cleanly(*nvrtc, tmpl.bind({{"T", "bfloat16"},
                                                                       {"KV_FP8", fp8},
                                                                       {"HEAD_DIM", head_dim},
                                                                       {"GROUP", plan.group},
                                                                       {"WARPS", plan.warps},
                                                                       {"UNROLL", plan.unroll},
                                                                       {"LOADS", plan.loads},
                                                                       {"STAGES", plan.stages}})));
      }
}

// The write keeps every token's item in registers (kv_cache.hip's TOKENS): none may spill.
TEST(KvCacheCompile, TheWritesVariantsHaveNoSpillsOnSm90a) {
  const std::unique_ptr<jit::Compiler> nvrtc = compile_testing::nvrtc_or_null();
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC is not available";
  const Template &tmpl = templates::find("reshape_and_cache");
  for (const int fp8 : {0, 1})
    for (const int rope : {0, 1, 2})
      EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
          *nvrtc, tmpl.bind({{"T", "bfloat16"},
                             {"KV_FP8", fp8},
                             {"ROPE", rope},
                             {"ROTARY_DIM", rope != 0 ? 128 : 0},
                             {"VEC", rope == 2 ? 4 : 8}})));
}

TEST_F(OpsCompileTest, KvCacheTemplateRefusesARotationWiderThanTheHead) {
  EXPECT_TRUE(refuses_to_compile("reshape_and_cache",
                                 {{"HEAD_DIM", 64}, {"ROPE", 1}, {"ROTARY_DIM", 128}}, "sm_90",
                                 "ROTARY_DIM: even, <= HEAD_DIM"));
}

// A valid call's arguments (host pointers: the checks run before any device is touched), for
// the tests to spoil one at a time.
struct DecodeCall {
  alignas(16) std::uint16_t q[4 * 128] = {}, out[4 * 128] = {};
  alignas(16) std::uint16_t k[16 * 128] = {}, v[16 * 128] = {};
  std::int32_t tables[1] = {}, lens[1] = {1};
  int q_heads = 4;
  PagedKvCache cache{
      .k = k, .v = v, .num_blocks = 1, .page_size = 16, .kv_heads = 1, .head_dim = 128};
  DecodeBatch batch{.block_tables = tables, .seq_lens = lens, .batch = 1, .max_blocks = 1};

  // The one-line message of the Error(bad_argument) the call throws, or what went wrong.
  std::string refusal(Runtime &rt) {
    try {
      paged_attention_decode(rt, reinterpret_cast<BFloat16 *>(out),
                             reinterpret_cast<const BFloat16 *>(q), q_heads, cache, batch, 1.0f);
    } catch (const Error &error) {
      if (error.code() != Errc::bad_argument)
        return "not bad_argument: " + error.summary();
      return error.summary();
    }
    return "no error";
  }
};

TEST(PagedDecodeArguments, BadOnesAreRefusedInOneLineBeforeAnyDeviceIsTouched) {
  Runtime rt;
  const std::string prefix = "kjit::ops::paged_attention_decode: ";
  {
    DecodeCall call;
    call.q_heads = 6;
    call.cache.kv_heads = 4;
    EXPECT_EQ(call.refusal(rt), prefix + "q_heads 6 is not a multiple of kv_heads 4");
  }
  {
    DecodeCall call;
    call.cache.head_dim = 96;
    EXPECT_EQ(call.refusal(rt), prefix + "head_dim 96 is not supported (64 or 128)");
  }
  {
    DecodeCall call;
    call.cache.page_size = 8;
    EXPECT_EQ(call.refusal(rt), prefix + "page_size 8 is not supported (16 or 32)");
  }
  {
    DecodeCall call;
    call.batch.max_seq_len = 17;
    EXPECT_EQ(call.refusal(rt), prefix + "max_seq_len 17 is past the tables' capacity of 16 "
                                         "tokens (max_blocks 1 x page_size 16)");
  }
  {
    DecodeCall call;
    call.batch.block_tables = nullptr;
    EXPECT_EQ(call.refusal(rt), prefix + "block_tables is null");
  }
  {
    DecodeCall call;
    call.cache.format = KvCacheFormat::fp8_e4m3;
    call.cache.k_scale = 0.0f;
    EXPECT_EQ(call.refusal(rt),
              prefix + "the fp8 cache's k_scale and v_scale must be positive and finite");
  }
  {
    DecodeCall call;
    call.cache.k = reinterpret_cast<std::uint16_t *>(call.k) + 1;
    EXPECT_EQ(call.refusal(rt), prefix + "the caches must be 16-byte aligned");
  }
  {
    DecodeCall call;
    call.batch.batch = 0;
    EXPECT_EQ(call.refusal(rt),
              prefix + "batch, q_heads, kv_heads, num_blocks and max_blocks must be positive");
  }
  {
    DecodeCall call;
    EXPECT_EQ(call.refusal(rt).find(prefix), std::string::npos)
        << "a valid call gets past the checks (to the device, absent here or not)";
  }
}

TEST(PagedDecodeTables, TheHostCheckNamesTheFirstBadEntry) {
  const auto refusal = [](std::vector<std::int32_t> tables, std::vector<std::int32_t> lens,
                          int max_seq_len = 0) {
    try {
      check_decode_tables(tables, lens, 2, 16, 4, max_seq_len);
    } catch (const Error &error) {
      return error.code() == Errc::bad_argument ? error.summary() : "not bad_argument";
    }
    return std::string("no error");
  };
  const std::string prefix = "kjit::ops::paged_attention_decode: ";
  // Entries past a sequence's length are never read, so they may hold anything.
  EXPECT_EQ(refusal({3, 99, 0, 1}, {16, 32}), "no error");
  EXPECT_EQ(refusal({3, 99, 0, 1}, {17, 32}),
            prefix + "block_tables[0][1] is 99, past the cache's 4 blocks");
  EXPECT_EQ(refusal({3, 0, 0, -1}, {1, 20}),
            prefix + "block_tables[1][1] is -1, past the cache's 4 blocks");
  EXPECT_EQ(refusal({0, 0, 0, 0}, {1, 33}), prefix + "seq_lens[1] is 33, outside [0, 32]");
  EXPECT_EQ(refusal({0, 0, 0, 0}, {-1, 3}), prefix + "seq_lens[0] is -1, outside [0, 32]");
  EXPECT_EQ(refusal({0, 0, 0, 0}, {1, 20}, 16), prefix + "seq_lens[1] is 20, outside [0, 16]");
}

TEST(PagedDecodePlan, TheVariantFillsTheRingItsTargetHolds) {
  // GQA 4 on NVIDIA: 2 loads of 16 bytes a row per thread, 2 tokens a step, 3 steps of 16 KiB
  // (a fourth read no faster on the H100); dynamic shared memory, the ring's.
  const detail::DecodePlan gqa4 = detail::decode_variant(32, 32, 8, false);
  EXPECT_EQ(gqa4.group, 4);
  EXPECT_EQ(gqa4.chunks, 1);
  EXPECT_EQ(gqa4.loads, 2);
  EXPECT_EQ(gqa4.unroll, 2);
  EXPECT_EQ(gqa4.stages, 3);
  EXPECT_EQ(detail::decode_ring_bytes(gqa4, 32, false), 48 * 1024);
  EXPECT_EQ(detail::decode_shared_bytes(gqa4, true, false, 128), 48 * 1024);
  // fp8 halves the bytes: 4 stages.
  EXPECT_EQ(detail::decode_variant(32, 32, 8, true).stages, 4);
  // A wave of 64 (plain loads, no asynchrony): the shallowest ring, one token a step, static.
  const detail::DecodePlan amd = detail::decode_variant(64, 32, 8, false);
  EXPECT_EQ(amd.stages, 2);
  EXPECT_EQ(amd.unroll, 1);
  EXPECT_LE(detail::decode_ring_bytes(amd, 64, false), 48 * 1024);
  EXPECT_EQ(detail::decode_shared_bytes(amd, false, false, 128), 0);
  // GQA ratios past 8 are cut into equal chunks of at most 8 heads; MQA too.
  const detail::DecodePlan twelve = detail::decode_variant(32, 96, 8, false);
  EXPECT_EQ(twelve.chunks, 2);
  EXPECT_EQ(twelve.group, 6);
  const detail::DecodePlan mqa = detail::decode_variant(32, 32, 1, false);
  EXPECT_EQ(mqa.chunks, 4);
  EXPECT_EQ(mqa.group, 8);
  EXPECT_EQ(mqa.loads, 1);
  EXPECT_EQ(mqa.stages, 4);
}

// After the ring, the same shared memory holds the warps' states: a launch takes the larger.
TEST(PagedDecodePlan, TheLaunchTakesTheRingOrTheWarpsStatesWhicheverIsLarger) {
  detail::DecodePlan shallow = detail::decode_variant(32, 32, 1, false); // GROUP 8
  shallow.unroll = 1;
  shallow.stages = 2;
  EXPECT_EQ(detail::decode_ring_bytes(shallow, 32, false), 8 * 1024);
  // A flag, then 4 warps' max, sum and 128 outputs for 8 heads.
  EXPECT_EQ(detail::decode_shared_bytes(shallow, true, false, 128), 4 + 4 * 8 * 130 * 4);
}

// The tuning table's record for a decode shape replaces the heuristic's tunables: stored in a
// table, found by the key the wrapper builds, accepted by the template, and then planned.
TEST(PagedDecodePlan, ARecordedWinnerChangesTheChosenVariant) {
  const Template &tmpl = templates::find("paged_attention_decode");
  const detail::DecodePlan heuristic = detail::decode_variant(32, 32, 8, false);
  const TuningKey key =
      TuningKey::of(tmpl, detail::decode_tuning_problem(heuristic, 128, 16, false),
                    detail::decode_tuning_extents(1, 32768), {"sm_90a", 132, "H200"}, "nvrtc 13");
  kjit::testing::TempDir root;
  const TuningTable table(root.path());
  const TimedVariant winner{{{"WARPS", 4}, {"UNROLL", 1}, {"LOADS", 2}, {"STAGES", 4}}, 30.0};
  table.store({key, winner, {}, 0});
  const std::optional<TuningRecord> found = table.find(key);
  ASSERT_TRUE(found);
  EXPECT_EQ(winner_problem(tmpl, *found), "");
  const detail::DecodePlan tuned =
      detail::tuned_decode_variant(heuristic, found->winner, 32, true, false);
  EXPECT_EQ(tuned.unroll, 1);
  EXPECT_EQ(tuned.stages, 4);
  EXPECT_EQ(tuned.group, heuristic.group);
  EXPECT_EQ(heuristic.unroll, 2);
  EXPECT_EQ(heuristic.stages, 3);
  // Another batch's bucket or another context's is another record.
  EXPECT_FALSE(table.find(
      TuningKey::of(tmpl, detail::decode_tuning_problem(heuristic, 128, 16, false),
                    detail::decode_tuning_extents(64, 4096), {"sm_90a", 132, "H200"}, "nvrtc 13")));
  EXPECT_EQ(detail::decode_tuning_extents(3, 30000),
            (ParamValues{{"batch", 4}, {"context", 32768}}));
}

TEST(PagedDecodePlan, AWinnerThatIsIncompleteOrPastTheRingsLimitIsNotUsed) {
  const detail::DecodePlan heuristic = detail::decode_variant(32, 32, 8, false);
  const auto unchanged = [&](const detail::DecodePlan &plan) {
    return plan.warps == heuristic.warps && plan.unroll == heuristic.unroll &&
           plan.loads == heuristic.loads && plan.stages == heuristic.stages;
  };
  EXPECT_TRUE(unchanged(detail::tuned_decode_variant(heuristic, std::nullopt, 32, true, false)));
  EXPECT_TRUE(unchanged(detail::tuned_decode_variant(
      heuristic, TimedVariant{{{"WARPS", 4}, {"UNROLL", 1}, {"LOADS", 2}}, 1}, 32, true, false)));
  // 8 warps of 4 steps of 2 tokens' 2 loads: 128 KiB, past the 64 KiB a ring may take.
  const TimedVariant wide{{{"WARPS", 8}, {"UNROLL", 2}, {"LOADS", 2}, {"STAGES", 4}}, 1};
  EXPECT_TRUE(unchanged(detail::tuned_decode_variant(heuristic, wide, 32, true, false)));
  // A ring of 64 KiB: NVIDIA's dynamic shared memory holds it; AMD's static 48 KiB do not.
  const TimedVariant deep{{{"WARPS", 4}, {"UNROLL", 2}, {"LOADS", 2}, {"STAGES", 4}}, 1};
  EXPECT_EQ(detail::tuned_decode_variant(heuristic, deep, 32, true, false).stages, 4);
  EXPECT_TRUE(unchanged(detail::tuned_decode_variant(heuristic, deep, 32, false, false)));
}

TEST(PagedDecodePlan, ResidentBlocksAreLimitedByRegistersSharedMemoryAndThreads) {
  EXPECT_EQ(detail::resident_blocks(168, 128, 48 * 1024), 3); // 21 warps' worth of registers
  EXPECT_EQ(detail::resident_blocks(64, 128, 48 * 1024), 4);  // 228 KiB / 49 KiB
  EXPECT_EQ(detail::resident_blocks(32, 128, 0), 16);         // 2048 threads
  EXPECT_EQ(detail::resident_blocks(255, 1024, 0), 1);        // never less than one
}

detail::DecodePlan split(int resident, int batch, int max_len, bool may_split = true) {
  detail::DecodePlan plan = detail::decode_variant(32, 32, 8, false);
  detail::split_decode(plan, 132, resident, batch, 32, 8, 128, max_len, may_split);
  return plan;
}

TEST(PagedDecodePlan, SplitsSoThatTheBlocksRunInWholeWaves) {
  // Batch 1 at 32k: 8 blocks; split into one wave of two blocks a multiprocessor (of the 396
  // places of 132 x 3): a third block each would read no faster and leave more splits to merge.
  const detail::DecodePlan one = split(3, 1, 32768);
  EXPECT_EQ(one.splits, 32);
  EXPECT_GE(std::int64_t{one.splits} * one.partition, 32768);
  EXPECT_LT(std::int64_t{one.splits - 1} * one.partition, 32768) << "no split is empty";
  EXPECT_EQ(one.partition % 64, 0);
  EXPECT_EQ(one.workspace_bytes, std::size_t{32} * one.splits * (128 + 1) * 4);
  // A batch whose blocks fill the places exactly once (99 x 8 = 2 x 396): no split.
  const detail::DecodePlan whole = split(2, 99, 4096);
  EXPECT_EQ(whole.splits, 1);
  EXPECT_EQ(whole.partition, 4096);
  EXPECT_EQ(whole.workspace_bytes, 0u);
  // Batch 64 at 4k: 512 blocks would leave the second of two waves 29% full; splits cut the
  // waste to under 10% (of whole waves against the blocks' share of the places): 3 splits, the
  // fastest on the H200.
  const detail::DecodePlan b64 = split(3, 64, 4096);
  EXPECT_EQ(b64.splits, 3);
  const std::int64_t blocks = std::int64_t{512} * b64.splits;
  const std::int64_t waves = (blocks + 395) / 396;
  EXPECT_GT(static_cast<double>(blocks) / (waves * 396), 0.9);
  // Batch 256 at 1k: 2048 blocks in 5.2 waves; halving them into 10.3 waves saves less than the
  // merge and the blocks' start-up cost (the H200's sweep: no split 92%, 2 splits 74-87%).
  EXPECT_EQ(split(3, 256, 1024).splits, 1);
  // Without a workspace, one split whatever the shape.
  EXPECT_EQ(split(3, 1, 32768, false).splits, 1);
  // Short sequences are not split below 256 tokens a split.
  EXPECT_EQ(split(3, 1, 300).splits, 1);
}

TEST(PagedDecodePlan, TheMergeHasAGroupOfThreadsPerSplitInWholeWarps) {
  EXPECT_EQ(detail::merge_threads(3, 128, 32), 96);   // 3 groups of 32 columns
  EXPECT_EQ(detail::merge_threads(32, 128, 32), 256); // at most 8 groups
  EXPECT_EQ(detail::merge_threads(3, 128, 64), 128);  // wave 64: groups in pairs
  EXPECT_EQ(detail::merge_threads(3, 64, 32), 64);    // 16 columns: groups in pairs
  EXPECT_EQ(detail::merge_threads(3, 64, 64), 64);    // wave 64: groups in fours
  EXPECT_EQ(detail::merge_threads(100, 64, 64), 256); // at most 16 groups of 16
}

// Two q heads sharing one kv head of head_dim 2, pages of 2 tokens, scale 1. The sequence's
// tokens 0 and 1 lie on page 1, token 2 on page 0. With q = (1, 0) and keys (ln w_t, 0) the
// softmax weights are w_t / sum w: w = (1, 3, 4) gives (1/8, 3/8, 1/2).
TEST(PagedDecodeReference, IsTheSoftmaxWeightedSumOfTheValuesOfTheSequencesPages) {
  const std::vector<double> k = {/* page 0 */ std::log(4.0),
                                 0,
                                 0,
                                 0,
                                 /* page 1 */ 0,
                                 0,
                                 std::log(3.0),
                                 0};
  const std::vector<double> v = {/* page 0 */ 0, 16, 0, 0, /* page 1 */ 8, 0, 0, 8};
  const std::vector<double> q = {1, 0, /* head 1: scores all 0, equal weights */ 0, 0};
  const std::vector<std::int32_t> tables = {1, 0};
  const std::vector<std::int32_t> lens = {3};
  const auto out = reference::paged_attention_decode(q, k, v, tables, lens, 2, 1, 2, 2, 2, 1.0);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_NEAR(out[0], 8.0 / 8, 1e-12);
  EXPECT_NEAR(out[1], 3.0 + 8.0, 1e-12); // 3/8 * 8 + 1/2 * 16
  EXPECT_NEAR(out[2], 8.0 / 3, 1e-12);
  EXPECT_NEAR(out[3], 24.0 / 3, 1e-12);
  // A sequence of length 1 attends to its one token; of length 0, to nothing (zeros).
  const std::vector<std::int32_t> one = {1};
  EXPECT_EQ(reference::paged_attention_decode(q, k, v, tables, one, 2, 1, 2, 2, 2, 1.0),
            (std::vector<double>{8, 0, 8, 0}));
  const std::vector<std::int32_t> none = {0};
  EXPECT_EQ(reference::paged_attention_decode(q, k, v, tables, none, 2, 1, 2, 2, 2, 1.0),
            (std::vector<double>{0, 0, 0, 0}));
}

TEST(KvCacheReference, WritesEachTokenToItsSlotAndSkipsPaddingAndSlotsPastTheCache) {
  // One kv head of 4; three slots. Token 1 is padding (-1), token 2 names slot 3 (past the cache).
  const std::vector<float> key = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  const std::vector<float> value = {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, 0, 0, 0, 0};
  std::vector<Half> k16, v16;
  for (float x : key)
    k16.push_back(from_double<Half>(x));
  for (float x : value)
    v16.push_back(from_double<Half>(x));
  const std::vector<std::int64_t> slots = {2, -1, 3, 0};
  std::vector<double> k_cache(12, 99), v_cache(12, 99);
  reference::reshape_and_cache<Half>(k16, v16, slots, 1, 4, k_cache, v_cache);
  EXPECT_EQ(k_cache, (std::vector<double>{13, 14, 15, 16, 99, 99, 99, 99, 1, 2, 3, 4}));
  EXPECT_EQ(v_cache, (std::vector<double>{0, 0, 0, 0, 99, 99, 99, 99, -1, -2, -3, -4}));
  // With RoPE (NeoX, rotary_dim 2): position 1 rotates the pair (x0, x1) by 90 degrees.
  const std::vector<Half> cos_sin = {from_double<Half>(1), from_double<Half>(0),
                                     from_double<Half>(0), from_double<Half>(1)};
  const std::vector<std::int64_t> positions = {1, 0, 0, 0};
  std::vector<double> rotated(12, 99), values(12, 99);
  reference::reshape_and_cache<Half>(k16, v16, slots, 1, 4, rotated, values, positions, cos_sin, 2,
                                     RotaryStyle::neox);
  EXPECT_EQ(std::vector<double>(rotated.begin() + 8, rotated.end()),
            (std::vector<double>{-2, 1, 3, 4}));
}

TEST(KvCacheArguments, BadOnesAreRefusedInOneLine) {
  Runtime rt;
  alignas(16) std::uint16_t key[128] = {}, value[128] = {}, k[16 * 128] = {}, v[16 * 128] = {};
  std::int64_t slots[1] = {};
  PagedKvCache cache{
      .k = k, .v = v, .num_blocks = 1, .page_size = 16, .kv_heads = 1, .head_dim = 128};
  const auto refusal = [&](const PagedKvCache &c, std::int64_t key_stride,
                           const KeyRotation<Half> *rotation) {
    try {
      reshape_and_cache(rt, reinterpret_cast<const Half *>(key),
                        reinterpret_cast<const Half *>(value), c, slots, 1, key_stride, 0,
                        rotation);
    } catch (const Error &error) {
      return error.code() == Errc::bad_argument ? error.summary() : "not bad_argument";
    }
    return std::string("no error");
  };
  const std::string prefix = "kjit::ops::reshape_and_cache: ";
  PagedKvCache odd = cache;
  odd.head_dim = 100;
  EXPECT_EQ(refusal(odd, 0, nullptr),
            prefix + "head_dim 100 is not supported (a multiple of 8 in [8, 1024])");
  EXPECT_EQ(refusal(cache, 64, nullptr), prefix + "key_stride 64 and value_stride 128 must be at "
                                                  "least kv_heads * head_dim = 128");
  std::int64_t positions[1] = {};
  alignas(16) std::uint16_t cos_sin[128] = {};
  const KeyRotation<Half> wide{positions, reinterpret_cast<const Half *>(cos_sin), 1, 130};
  EXPECT_EQ(refusal(cache, 0, &wide),
            prefix + "rotary_dim 130 must be even and in [2, head_dim = 128]");
  PagedKvCache fp8 = cache;
  fp8.format = KvCacheFormat::fp8_e4m3;
  fp8.v_scale = -1;
  EXPECT_EQ(refusal(fp8, 0, nullptr),
            prefix + "the fp8 cache's k_scale and v_scale must be positive and finite");
}

} // namespace
} // namespace kjit::ops
