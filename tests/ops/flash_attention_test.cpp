#include "kjit/ops/flash_attention.hpp"
#include "ops/src/flash_attention_variant.hpp"
#include "tests/ops/compile_support.hpp"

#include <cmath>
#include <functional>
#include <gtest/gtest.h>
#include <memory>
#include <random>

namespace kjit::ops {
namespace {

using compile_testing::OpsCompileTest;

AttentionShape small_shape(int batch, int total_q, int total_k, int q_heads, int kv_heads,
                           bool causal) {
  return {.batch = batch,
          .total_q = total_q,
          .total_k = total_k,
          .max_seqlen_q = total_q,
          .q_heads = q_heads,
          .kv_heads = kv_heads,
          .head_dim = 64,
          .causal = causal,
          .scale = 0.5f};
}

// The one-line summary of the Error(bad_argument) that `call` throws ("no error" where none).
std::string refusal(const std::function<void()> &call) {
  try {
    call();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    return error.summary();
  }
  return "no error";
}

// Every variant the wrapper launches on sm_90a (both types, head dims, masks, both PERSISTENT
// with STAGE_O 1) and, for bfloat16, every combination of the tunables that the template's
// tuning rule lets a tuner try (those other than PERSISTENT, Q_BUFFERS and STAGE_O with their
// defaults, 1, 1 and 0; PERSISTENT 0 and Q_BUFFERS 2 with the others' defaults).
TEST(FlashAttentionCompile, NoSerialisedWgmmaNoIgnoredSetmaxnregNoSpills) {
  const std::unique_ptr<jit::Compiler> nvrtc = compile_testing::nvrtc_or_null();
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC is not available";
  const Template &tmpl = templates::find("flash_attention");
  int compiled = 0;
  for (const char *type : {"half", "bfloat16"})
    for (int head_dim : {64, 128})
      for (int causal : {0, 1})
        for (int consumers : {2, 3})
          for (int block_n : {64, 128})
            for (int stages : {2, 3})
              for (int pingpong : {0, 1})
                for (int persistent : {0, 1})
                  for (int q_buffers : {1, 2})
                    for (int stage_o : {0, 1}) {
                      const Instance instance = tmpl.bind({{"T", type},
                                                           {"HEAD_DIM", head_dim},
                                                           {"CAUSAL", causal},
                                                           {"CONSUMERS", consumers},
                                                           {"BLOCK_N", block_n},
                                                           {"STAGES", stages},
                                                           {"PINGPONG", pingpong},
                                                           {"PERSISTENT", persistent},
                                                           {"Q_BUFFERS", q_buffers},
                                                           {"STAGE_O", stage_o}});
                      const bool defaults =
                          consumers == 2 && block_n == 128 && stages == 2 && pingpong == 1;
                      // STAGE_O 1: the wrapper's two (both types). Else other tunables with
                      // PERSISTENT 1 (bfloat16); PERSISTENT 0 and Q_BUFFERS 2 at the defaults.
                      const bool wrapper = defaults && q_buffers == 1 + persistent;
                      if (!tmpl.tuning().fits(instance, "sm_90a").empty() ||
                          (stage_o == 1 && !wrapper) ||
                          (stage_o == 0 &&
                           ((type != std::string("bfloat16") && !(defaults && persistent == 1)) ||
                            (persistent == 0 && !defaults) ||
                            (q_buffers == 2 && !(defaults && persistent == 1)))))
                        continue;
                      ++compiled;
                      EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(
                          *nvrtc, instance, jit::Target::parse("sm_90a")));
                    }
  EXPECT_GT(compiled, 8);
}

// PAGED 1 and 2 (k and v pages copied by TMA, or rows by the producer's threads, block tables
// read within the producer's 40 registers): the wrapper's tunables (Q_BUFFERS 2 with PAGED 2),
// both PERSISTENT, and key tiles of 64 (two or four pages).
TEST(FlashAttentionCompile, PagedVariantsCompileCleanly) {
  const std::unique_ptr<jit::Compiler> nvrtc = compile_testing::nvrtc_or_null();
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC is not available";
  const Template &tmpl = templates::find("flash_attention");
  for (const char *type : {"half", "bfloat16"})
    for (int head_dim : {64, 128})
      for (int causal : {0, 1})
        for (int persistent : {0, 1})
          for (int block_n : {64, 128})
            for (int paged : {1, 2}) {
              if (block_n == 64 && (persistent == 0 || type != std::string("bfloat16")))
                continue;
              EXPECT_TRUE(
                  compile_testing::wgmma_compiles_cleanly(*nvrtc,
                                                          tmpl.bind({{"T", type},
                                                                     {"HEAD_DIM", head_dim},
                                                                     {"CAUSAL", causal},
                                                                     {"BLOCK_N", block_n},
                                                                     {"PERSISTENT", persistent},
                                                                     {"PAGED", paged},
                                                                     {"Q_BUFFERS", paged}}),
                                                          jit::Target::parse("sm_90a")))
                  << "PAGED " << paged;
            }
}

// flash_attention_mma, every variant, for sm_80 (the oldest it serves) and sm_90a.
TEST(FlashAttentionCompile, MmaSyncKernelHasNoSpills) {
  const std::unique_ptr<jit::Compiler> nvrtc = compile_testing::nvrtc_or_null();
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC is not available";
  const Template &tmpl = templates::find("flash_attention_mma");
  for (const char *target : {"sm_80", "sm_90a"})
    for (const char *type : {"half", "bfloat16"})
      for (int head_dim : {64, 128})
        for (int causal : {0, 1})
          for (int block_n : {32, 64})
            EXPECT_TRUE(compile_testing::wgmma_compiles_cleanly(*nvrtc,
                                                                tmpl.bind({{"T", type},
                                                                           {"HEAD_DIM", head_dim},
                                                                           {"CAUSAL", causal},
                                                                           {"BLOCK_N", block_n}}),
                                                                jit::Target::parse(target)));
}

// Three consumers have 65536 / 512 = 128 registers a thread, too few for S, P and O of 128-wide
// tiles, and PINGPONG's turns are between two: the rule keeps a tuner from the rest before
// compiling.
TEST(FlashAttentionTuning, RefusesThreeConsumersWithWideTilesOrTurns) {
  const Template &tmpl = templates::find("flash_attention");
  const auto why = [&](int head_dim, int consumers, int block_n, int pingpong) {
    return tmpl.tuning().fits(tmpl.bind({{"HEAD_DIM", head_dim},
                                         {"CONSUMERS", consumers},
                                         {"BLOCK_N", block_n},
                                         {"PINGPONG", pingpong}}),
                              "sm_90a");
  };
  EXPECT_EQ(why(128, 2, 128, 1), "");
  EXPECT_EQ(why(64, 3, 64, 0), "");
  EXPECT_EQ(why(64, 3, 128, 0),
            "three consumers fit only HEAD_DIM and BLOCK_N of 64 in their registers");
  EXPECT_EQ(why(128, 3, 64, 0),
            "three consumers fit only HEAD_DIM and BLOCK_N of 64 in their registers");
  EXPECT_EQ(why(64, 3, 64, 1), "PINGPONG takes turns between two consumers");
}

TEST_F(OpsCompileTest, FlashAttentionNamesItsTargetsBeforeCompilingForOthers) {
  for (const char *target : {"sm_80", "sm_90", "gfx942", "gfx950"})
    EXPECT_TRUE(refused_before_compiling("flash_attention", target, "sm_90a")) << target;
  for (const char *target : {"sm_75", "gfx942", "gfx950"})
    EXPECT_TRUE(refused_before_compiling("flash_attention_mma", target, "sm_80 and newer"))
        << target;
}

TEST(FlashAttentionVariant, WgmmaOnSm90aAndMmaSyncElsewhere) {
  const AttentionShape shape = small_shape(1, 1, 1, 1, 1, true);
  EXPECT_EQ(detail::flash_attention_variant<Half>(jit::Target::parse("sm_90a"), shape).tmpl->name(),
            "flash_attention");
  for (const char *target : {"sm_80", "sm_90", "sm_100"})
    EXPECT_EQ(detail::flash_attention_variant<Half>(jit::Target::parse(target), shape).tmpl->name(),
              "flash_attention_mma")
        << target;
}

// The measured choices (BENCHMARKS.md): a persistent walk without a mask and, under one, for
// sequences up to 4k rows; pages of 32 as TMA boxes, of 16 copied by the producer's threads with
// two q tiles; two q tiles for contiguous keys where the walk is persistent.
TEST(FlashAttentionVariant, PersistentWalkAndPageCopiesFollowTheMeasurements) {
  const auto persistent = [](bool causal, int max_seqlen_q) {
    AttentionShape shape = small_shape(1, 16384, 16384, 16, 16, causal);
    shape.max_seqlen_q = max_seqlen_q;
    return detail::flash_attention_variant<BFloat16>(jit::Target::parse("sm_90a"), shape)
        .integer("PERSISTENT");
  };
  EXPECT_EQ(persistent(false, 16384), 1);
  EXPECT_EQ(persistent(true, 1024), 1);
  EXPECT_EQ(persistent(true, 4096), 1);
  EXPECT_EQ(persistent(true, 4097), 0);
  const AttentionShape shape = small_shape(1, 1, 1, 1, 1, true);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 16).integer("PAGED"), 2);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 16).integer("Q_BUFFERS"), 2);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 32).integer("PAGED"), 1);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 32).integer("Q_BUFFERS"), 1);
  // Two q tiles (and the overlap of items they bring) for a persistent walk, one for a block per
  // tile; the output through shared memory for both, from registers for paged prefill.
  const detail::ChosenVariant walk =
      detail::flash_attention_variant<Half>(jit::Target::parse("sm_90a"), shape);
  EXPECT_EQ(walk.integer("Q_BUFFERS"), 2);
  EXPECT_EQ(walk.integer("STAGE_O"), 1);
  const AttentionShape long_causal = small_shape(1, 16384, 16384, 16, 16, true);
  const detail::ChosenVariant per_tile =
      detail::flash_attention_variant<Half>(jit::Target::parse("sm_90a"), long_causal);
  EXPECT_EQ(per_tile.integer("Q_BUFFERS"), 1);
  EXPECT_EQ(per_tile.integer("STAGE_O"), 1);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 16).integer("STAGE_O"), 0);
  EXPECT_EQ(detail::flash_attention_paged_variant<Half>(shape, 32).tmpl->name(), "flash_attention");
}

TEST(FlashAttentionReference, OneQueryAveragesTheValuesByItsSoftmaxWeights) {
  // Head dim 64: q = e0, keys e0 and 2 e0, scale 0.5: scores 0.5 and 1.
  AttentionShape shape = small_shape(1, 1, 2, 1, 1, false);
  std::vector<float> q(64, 0.f), k(128, 0.f), v(128, 0.f);
  q[0] = 1;
  k[0] = 1;
  k[64] = 2;
  v[0] = 3;
  v[64] = 5;
  const std::vector<int> cu_q = {0, 1}, cu_k = {0, 2};
  std::vector<Half> qh(q.size()), kh(k.size()), vh(v.size());
  for (std::size_t i = 0; i < q.size(); ++i)
    qh[i] = from_double<Half>(q[i]);
  for (std::size_t i = 0; i < k.size(); ++i) {
    kh[i] = from_double<Half>(k[i]);
    vh[i] = from_double<Half>(v[i]);
  }
  const std::vector<double> out = reference::flash_attention<Half>(qh, kh, vh, cu_q, cu_k, shape);
  const double w0 = std::exp(0.5), w1 = std::exp(1.0);
  EXPECT_NEAR(out[0], (3 * w0 + 5 * w1) / (w0 + w1), 1e-12);
  EXPECT_EQ(out[1], 0.0);
}

// Causal masks align to the bottom right: 2 queries over 3 keys, row 0 sees keys 0 and 1; 3
// queries over 1 key, rows 0 and 1 see none (zeros) and row 2 sees it. GQA: q head h reads kv
// head h / 2. v's column 0 is the key's index + 1 (times the kv head's 10), and every score is 0,
// so a row's output is the mean of what it sees.
TEST(FlashAttentionReference, CausalIsBottomRightAlignedAndGroupsShareKvHeads) {
  AttentionShape shape = small_shape(2, 5, 4, 4, 2, true);
  shape.max_seqlen_q = 3;
  const std::vector<int> cu_q = {0, 2, 5}, cu_k = {0, 3, 4};
  std::vector<BFloat16> q(5 * 4 * 64, from_double<BFloat16>(0)), k(4 * 2 * 64, q[0]), v(k);
  for (int token = 0; token < 4; ++token)
    for (int kv_head = 0; kv_head < 2; ++kv_head)
      v[(token * 2 + kv_head) * 64] =
          from_double<BFloat16>((kv_head + 1) * 10 * ((token < 3 ? token : token - 3) + 1));
  const std::vector<double> out = reference::flash_attention<BFloat16>(q, k, v, cu_q, cu_k, shape);
  const auto at = [&](int token, int head) { return out[(token * 4 + head) * 64]; };
  for (int head = 0; head < 4; ++head) {
    const double unit = (head / 2 + 1) * 10;
    EXPECT_DOUBLE_EQ(at(0, head), unit * 1.5) << head; // keys 0, 1
    EXPECT_DOUBLE_EQ(at(1, head), unit * 2.0) << head; // keys 0, 1, 2
    EXPECT_EQ(at(2, head), 0.0) << head;
    EXPECT_EQ(at(3, head), 0.0) << head;
    EXPECT_DOUBLE_EQ(at(4, head), unit) << head; // key 0 of sequence 1
  }
}

TEST(FlashAttentionArguments, BadOnesAreRefusedInOneLineBeforeAnyDeviceIsTouched) {
  Runtime rt;
  alignas(16) BFloat16 buffer[64] = {};
  const int cu[2] = {0, 1};
  const auto summary = [&](const AttentionShape &shape, const void *k = nullptr) {
    try {
      flash_attention<BFloat16>(rt, buffer, buffer, k ? static_cast<const BFloat16 *>(k) : buffer,
                                buffer, cu, cu, shape);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  const AttentionShape good = small_shape(1, 1, 1, 4, 2, false);
  AttentionShape shape = good;
  shape.q_heads = 6;
  shape.kv_heads = 4;
  EXPECT_EQ(summary(shape),
            "kjit::ops::flash_attention: q_heads 6 is not a multiple of kv_heads 4");
  shape = good;
  shape.head_dim = 96;
  EXPECT_EQ(summary(shape), "kjit::ops::flash_attention: head_dim 96 is not supported (64 or 128)");
  shape = good;
  shape.max_seqlen_q = 2;
  EXPECT_EQ(summary(shape), "kjit::ops::flash_attention: max_seqlen_q is 2, must be in [1, 1]");
  shape = good;
  shape.batch = 0;
  EXPECT_EQ(summary(shape), "kjit::ops::flash_attention: batch is 0, must be in [1, 65535]");
  shape = good;
  shape.scale = -1;
  EXPECT_EQ(summary(shape),
            "kjit::ops::flash_attention: scale -1.000000 must be positive and finite");
  EXPECT_EQ(summary(good, reinterpret_cast<const char *>(buffer) + 2),
            "kjit::ops::flash_attention: k is not 16-byte aligned");
  // A PAGED variant (its kernel would read null tables), here gfx942's MFMA one.
  EXPECT_EQ(
      refusal([&] {
        detail::launch_flash_attention<BFloat16>(
            rt,
            detail::flash_attention_paged_variant<BFloat16>(good, 16, jit::Target::parse("gfx942")),
            buffer, buffer, buffer, buffer, cu, cu, good);
      }),
      "kjit::ops::flash_attention: the variant is PAGED: launch it with "
      "launch_flash_attention_paged");
}

// The paged reference gathers each sequence's keys through its table: a cache whose pages are
// a shuffle of contiguous k and v gives the contiguous reference's answer.
TEST(FlashAttentionReference, PagedGathersThroughShuffledTables) {
  constexpr int page = 16, kv_heads = 2, q_heads = 4, head_dim = 64, row = kv_heads * head_dim;
  const std::vector<int> cu_q = {0, 3, 4}, k_lens = {40, 17}, cu_k = {0, 40, 57};
  const std::vector<int> tables = {5, 0, 3, 1, 4, 2}; // [2, 3]: pages 5, 0, 3 and 1, 4
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<Half> q(4 * q_heads * head_dim), k(57 * row), v(57 * row);
  for (auto *values : {&q, &k, &v})
    for (Half &x : *values)
      x = from_double<Half>(uniform(rng));
  std::vector<Half> k_cache(6 * page * row, from_double<Half>(100)), v_cache(k_cache);
  for (int b = 0; b < 2; ++b)
    for (int j = 0; j < k_lens[b]; ++j) {
      const std::size_t to = (tables[b * 3 + j / page] * page + j % page) * row;
      std::copy_n(k.begin() + (cu_k[b] + j) * row, row, k_cache.begin() + to);
      std::copy_n(v.begin() + (cu_k[b] + j) * row, row, v_cache.begin() + to);
    }
  AttentionShape shape = small_shape(2, 4, 57, q_heads, kv_heads, true);
  shape.max_seqlen_q = 3;
  const std::vector<double> expected = reference::flash_attention<Half>(q, k, v, cu_q, cu_k, shape);
  EXPECT_EQ(reference::flash_attention_paged<Half>(q, k_cache, v_cache, cu_q, k_lens, tables,
                                                   q_heads, kv_heads, head_dim, page, true, 0.5f),
            expected);
}

// The table check that flash_attention_paged shares with paged_attention_decode speaks in
// flash_attention_paged's terms (the reference runs the check validate runs on the host copies).
TEST(FlashAttentionReference, PagedRefusesBadTablesInItsOwnTerms) {
  constexpr int page = 16, kv_heads = 1, head_dim = 64, row = kv_heads * head_dim;
  const std::vector<Half> q(2 * row), cache(3 * page * row);
  const std::vector<int> cu_q = {0, 1, 2};
  const auto summary = [&](const std::vector<int> &k_lens, const std::vector<int> &tables) {
    try {
      reference::flash_attention_paged<Half>(q, cache, cache, cu_q, k_lens, tables, 1, kv_heads,
                                             head_dim, page, false, 0.125f);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  EXPECT_EQ(summary({16, 33}, {0, 1, 2, 0}),
            "kjit::ops::flash_attention_paged: k_lens[1] is 33, outside [0, 32]");
  EXPECT_EQ(summary({20, 16}, {0, 3, 2, 0}),
            "kjit::ops::flash_attention_paged: block_tables[0][1] is 3, past the cache's 3 blocks");
}

TEST(FlashAttentionPagedArguments, BadOnesAreRefusedInOneLineBeforeAnyDeviceIsTouched) {
  Runtime rt;
  alignas(16) BFloat16 buffer[64] = {};
  const int ints[4] = {0, 1, 0, 0};
  const PagedKvCache good_cache{
      .k = buffer, .v = buffer, .num_blocks = 4, .page_size = 16, .kv_heads = 2, .head_dim = 64};
  const PagedPrefillBatch good_batch{.cu_seqlens_q = ints,
                                     .k_lens = ints,
                                     .block_tables = ints,
                                     .batch = 1,
                                     .max_blocks = 2,
                                     .total_q = 1,
                                     .max_seqlen_q = 1};
  const auto summary = [&](const PagedKvCache &cache, const PagedPrefillBatch &batch,
                           int q_heads = 4) {
    try {
      flash_attention_paged<BFloat16>(rt, buffer, buffer, q_heads, cache, batch, true, 0.125f);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  EXPECT_EQ(summary(good_cache, good_batch, 5),
            "kjit::ops::flash_attention: q_heads 5 is not a multiple of kv_heads 2");
  PagedKvCache cache = good_cache;
  cache.head_dim = 96;
  EXPECT_EQ(summary(cache, good_batch),
            "kjit::ops::flash_attention: head_dim 96 is not supported (64 or 128)");
  cache = good_cache;
  cache.page_size = 8;
  EXPECT_EQ(summary(cache, good_batch),
            "kjit::ops::flash_attention_paged: page_size 8 is not supported (16 or 32)");
  cache = good_cache;
  cache.format = KvCacheFormat::fp8_e4m3;
  EXPECT_EQ(summary(cache, good_batch), "kjit::ops::flash_attention_paged: the cache holds fp8 "
                                        "e4m3, not the queries' element type");
  cache = good_cache;
  cache.v = nullptr;
  EXPECT_EQ(summary(cache, good_batch), "kjit::ops::flash_attention_paged: cache.v is null");
  cache = good_cache;
  cache.k = reinterpret_cast<char *>(buffer) + 2;
  EXPECT_EQ(summary(cache, good_batch),
            "kjit::ops::flash_attention_paged: cache.k is not 16-byte aligned");
  PagedPrefillBatch batch = good_batch;
  batch.block_tables = nullptr;
  EXPECT_EQ(summary(good_cache, batch), "kjit::ops::flash_attention_paged: block_tables is null");
  batch = good_batch;
  batch.max_blocks = 0;
  EXPECT_EQ(summary(good_cache, batch),
            "kjit::ops::flash_attention_paged: max_blocks is 0, must be in [1, 134217727]");
  // A variant that is not PAGED, here gfx942's contiguous MFMA one.
  EXPECT_EQ(refusal([&] {
              detail::launch_flash_attention_paged<BFloat16>(
                  rt,
                  detail::flash_attention_variant<BFloat16>(jit::Target::parse("gfx942"),
                                                            small_shape(1, 1, 1, 4, 2, true)),
                  buffer, buffer, 4, good_cache, good_batch, true, 0.125f);
            }),
            "kjit::ops::flash_attention_paged: the variant is not a PAGED flash_attention or "
            "flash_attention_mfma of the call's HEAD_DIM and CAUSAL");
}

TEST(FlashAttentionReference, RefusesCuSeqlensThatDoNotMatchTheShape) {
  const AttentionShape shape = small_shape(2, 2, 2, 1, 1, false);
  const std::vector<Half> q(2 * 64), k(q), v(q);
  const auto summary = [&](std::vector<int> cu_q, std::vector<int> cu_k) {
    try {
      reference::flash_attention<Half>(q, k, v, cu_q, cu_k, shape);
    } catch (const Error &error) {
      EXPECT_EQ(error.code(), Errc::bad_argument);
      return error.summary();
    }
    return std::string("no error");
  };
  EXPECT_EQ(summary({0, 2}, {0, 1, 2}),
            "kjit::ops::flash_attention: cu_seqlens_q and cu_seqlens_k hold 2 and 3 entries, not "
            "batch + 1 = 3");
  EXPECT_EQ(summary({0, 2, 1}, {0, 1, 2}),
            "kjit::ops::flash_attention: cu_seqlens_q must rise from 0 to 2");
  EXPECT_EQ(summary({0, 1, 2}, {0, 1, 2}), "no error");
}

} // namespace
} // namespace kjit::ops
