// The body of the emulated MFMA attention tests (emulated_flash_attention_mfma_gfx942_test.cpp,
// emulated_flash_attention_mfma_gfx950_test.cpp): flash_attention_mfma.hip runs on the CPU
// (tests/ops/kernel_emulation.hpp, with the MFMA builtins of tests/ops/emulated_mfma.hpp) for the
// target the including file names, in the variants kjit::ops::flash_attention launches there, on
// ragged batches with GQA, causal and not, with k and v contiguous or in a paged cache (PAGED 1),
// compared with the double-precision reference into a poisoned output. Included after the kernel,
// inside the file's anonymous namespace; EMULATED_SUITE names the test suite.
//
// What this does not prove: that the hardware's MFMA layouts are the documented ones, the
// hardware's rounding inside an MFMA (emulated: one MFMA's products summed in double), LDS bank
// conflicts, timing, and what the compiler does with the source on the device
// (tests/ops/flash_attention_mfma_test.cpp reads the code objects instead).

using ::kjit::ops::AttentionShape;
using ::kjit::ops::BFloat16;
using ::kjit::ops::Element;
using ::kjit::ops::Half;
using ::kjit::ops::gpu_testing::PagedCase;

// The tiles the wrapper picks for HEAD_DIM: four waves of 32 rows; 64 keys a tile at head dim 64,
// 32 at 128 (checked against flash_attention_mfma_variant below).
template <int HEAD_DIM> constexpr int wrapper_block_n = HEAD_DIM == 64 ? 64 : 32;
constexpr int wrapper_waves = 4;

// Sequences of q_lengths rows attending to k_lengths keys, q_heads over kv_heads, through tiles
// of BLOCK_N keys and WAVES waves (by default the wrapper's). Each output is checked against
// epsilon<T>() absolute, twice the bound of rounding the probabilities to T before P V (values lie
// in [-1, 1] and the weights sum to 1), and epsilon<T>() relative, twice the output's rounding to
// T; the float scores, sums and exp2 (modelled 1 ulp off) add far less. The guard band past out
// stays poison.
template <Element T, int HEAD_DIM, int CAUSAL, int BLOCK_N = wrapper_block_n<HEAD_DIM>,
          int WAVES = wrapper_waves>
void check_attention(const std::vector<int> &q_lengths, const std::vector<int> &k_lengths,
                     int q_heads, int kv_heads) {
  using K = typename KernelType<T>::type;
  std::vector<int> cu_q = {0}, cu_k = {0};
  for (std::size_t b = 0; b < q_lengths.size(); ++b) {
    cu_q.push_back(cu_q.back() + q_lengths[b]);
    cu_k.push_back(cu_k.back() + k_lengths[b]);
  }
  const AttentionShape shape{.batch = static_cast<int>(q_lengths.size()),
                             .total_q = cu_q.back(),
                             .total_k = cu_k.back(),
                             .max_seqlen_q = *std::max_element(q_lengths.begin(), q_lengths.end()),
                             .q_heads = q_heads,
                             .kv_heads = kv_heads,
                             .head_dim = HEAD_DIM,
                             .causal = CAUSAL != 0,
                             .scale = 0.5f};
  SCOPED_TRACE(std::string(::kjit::ops::element_name<T>()) + ", head dim " +
               std::to_string(HEAD_DIM) + (CAUSAL ? ", causal" : "") + ", heads " +
               std::to_string(q_heads) + " / " + std::to_string(kv_heads) + ", BLOCK_N " +
               std::to_string(BLOCK_N) + ", WAVES " + std::to_string(WAVES));

  std::mt19937 rng(static_cast<unsigned>(HEAD_DIM * 3 + CAUSAL + q_heads));
  const auto q_values = ::kjit::ops::gpu_testing::random_elements<T>(
      std::size_t(shape.total_q) * q_heads * HEAD_DIM, rng, -1, 1);
  const auto k_values = ::kjit::ops::gpu_testing::random_elements<T>(
      std::size_t(shape.total_k) * kv_heads * HEAD_DIM, rng, -1, 1);
  const auto v_values = ::kjit::ops::gpu_testing::random_elements<T>(k_values.size(), rng, -1, 1);
  Buffer<T> q(q_values), k(k_values), v(v_values);
  Buffer<T> out = Buffer<T>::poisoned(q_values.size());
  const float scale_log2 = shape.scale * 1.4426950408889634f;
  const unsigned row_tiles = unsigned((shape.max_seqlen_q + 32 * WAVES - 1) / (32 * WAVES));
  mfma_emulation::prepare(64 * WAVES);
  ::kjit::emulation::launch(
      {row_tiles, unsigned(q_heads), unsigned(shape.batch)}, {64 * WAVES}, [&] {
        flash_attention_mfma<K, HEAD_DIM, CAUSAL, BLOCK_N, WAVES, 0>(
            out.data(), q.data(), k.data(), v.data(), cu_q.data(), cu_k.data(), shape.total_q,
            shape.total_k, q_heads, q_heads / kv_heads, scale_log2, nullptr, 0, 0);
      });
  const std::vector<double> expected =
      ::kjit::ops::reference::flash_attention<T>(q_values, k_values, v_values, cu_q, cu_k, shape);
  const double eps = ::kjit::ops::epsilon<T>();
  EXPECT_TRUE(::kjit::ops::gpu_testing::all_close(out.values(expected.size()), expected, eps, eps));
  EXPECT_TRUE(out.guard_intact(expected.size()));
}

// Lengths 1 and 3 and past a tile of rows (130) and of keys; a sequence with more rows than keys
// (under CAUSAL its first rows see none) and one with no keys at all.
const std::vector<int> q_lengths = {1, 37, 130, 3}, k_lengths = {5, 20, 150, 0};

// The emulated tiles are the ones the wrapper launches.
TEST(EMULATED_SUITE, TheWrapperPicksTheEmulatedTiles) {
  for (const int head_dim : {64, 128})
    for (const bool causal : {false, true}) {
      const AttentionShape shape{.batch = 1,
                                 .total_q = 1,
                                 .total_k = 1,
                                 .max_seqlen_q = 1,
                                 .q_heads = 1,
                                 .kv_heads = 1,
                                 .head_dim = head_dim,
                                 .causal = causal,
                                 .scale = 0.125f};
      for (const bool paged : {false, true}) {
        const auto variant =
            ::kjit::ops::detail::flash_attention_mfma_variant<BFloat16>(shape, paged);
        EXPECT_EQ(variant.integer("BLOCK_N"),
                  head_dim == 64 ? wrapper_block_n<64> : wrapper_block_n<128>);
        EXPECT_EQ(variant.integer("WAVES"), wrapper_waves);
        EXPECT_EQ(variant.integer("PAGED"), paged ? 1 : 0);
      }
    }
}

// Four q heads: over one KV head (GQA 4) without a mask, over `causal_kv_heads` with one.
template <Element T, int HEAD_DIM> void check_both_masks(int causal_kv_heads) {
  check_attention<T, HEAD_DIM, 0>(q_lengths, k_lengths, 4, 1);
  check_attention<T, HEAD_DIM, 1>(q_lengths, k_lengths, 4, causal_kv_heads);
}

TEST(EMULATED_SUITE, HalfHeadDim64MatchesTheReference) { check_both_masks<Half, 64>(1); }
TEST(EMULATED_SUITE, HalfHeadDim128MatchesTheReference) { check_both_masks<Half, 128>(4); }
TEST(EMULATED_SUITE, BFloat16HeadDim64MatchesTheReference) { check_both_masks<BFloat16, 64>(2); }
TEST(EMULATED_SUITE, BFloat16HeadDim128MatchesTheReference) { check_both_masks<BFloat16, 128>(1); }

// Tiles the tuning rule lets a tuner pick instead: one and two waves, 32-key tiles at head dim 64.
TEST(EMULATED_SUITE, TheOtherTilesMatchTheReference) {
  check_attention<Half, 64, 1, 32, 1>(q_lengths, k_lengths, 2, 1);
  check_attention<BFloat16, 128, 1, 32, 2>(q_lengths, k_lengths, 2, 2);
}

// Paged (PAGED 1, the wrapper's tiles): runs the kernel on `c` (filled) into a poisoned output,
// with `k_lens` as the sequences' key counts, and returns the output; the guard band past it
// stays poison.
template <Element T, int HEAD_DIM, int CAUSAL>
std::vector<T> run_paged(const PagedCase<T> &c, const std::vector<int> &k_lens) {
  using K = typename KernelType<T>::type;
  Buffer<T> q(c.q), k(c.k_cache), v(c.v_cache);
  Buffer<T> out = Buffer<T>::poisoned(c.q.size());
  const int total_q = c.cu_q.back();
  const int max_seqlen_q = *std::max_element(c.q_lengths.begin(), c.q_lengths.end());
  const unsigned row_tiles =
      unsigned((max_seqlen_q + 32 * wrapper_waves - 1) / (32 * wrapper_waves));
  const float scale_log2 = c.scale() * 1.4426950408889634f;
  mfma_emulation::prepare(64 * wrapper_waves);
  ::kjit::emulation::launch(
      {row_tiles, unsigned(c.q_heads), unsigned(c.q_lengths.size())}, {64 * wrapper_waves}, [&] {
        flash_attention_mfma<K, HEAD_DIM, CAUSAL, wrapper_block_n<HEAD_DIM>, wrapper_waves, 1>(
            out.data(), q.data(), k.data(), v.data(), c.cu_q.data(), k_lens.data(), total_q,
            c.num_blocks * c.page_size, c.q_heads, c.q_heads / c.kv_heads, scale_log2,
            c.tables.data(), c.max_blocks, c.page_size);
      });
  EXPECT_TRUE(out.guard_intact(c.q.size()));
  return out.values(c.q.size());
}

// Chunked prefill: each sequence's rows are the last of its keys (lengths 1, not multiples of the
// page, past a tile of rows and of keys, and a sequence with more rows than keys), in pages of
// page_size over shuffled tables whose other slots hold NaN, so that a key read from a wrong page
// or past a sequence reaches the output; within check_attention's bounds.
template <Element T, int HEAD_DIM, int CAUSAL>
void check_paged_attention(int page_size, int q_heads, int kv_heads) {
  SCOPED_TRACE(std::string(::kjit::ops::element_name<T>()) + ", head dim " +
               std::to_string(HEAD_DIM) + (CAUSAL ? ", causal" : "") + ", heads " +
               std::to_string(q_heads) + " / " + std::to_string(kv_heads) + ", page " +
               std::to_string(page_size));
  std::mt19937 rng(static_cast<unsigned>(HEAD_DIM + CAUSAL + page_size));
  PagedCase<T> c{.q_lengths = {1, 37, 130, 9},
                 .k_lengths = {1, 45, 150, 3},
                 .q_heads = q_heads,
                 .kv_heads = kv_heads,
                 .head_dim = HEAD_DIM,
                 .page_size = page_size,
                 .causal = CAUSAL != 0};
  c.fill(rng);
  const std::vector<T> got = run_paged<T, HEAD_DIM, CAUSAL>(c, c.k_lengths);
  const double eps = ::kjit::ops::epsilon<T>();
  EXPECT_TRUE(::kjit::ops::gpu_testing::all_close(got, c.expected(), eps, eps));
}

// Causal with pages of `causal_page` over `causal_kv_heads`, and without a mask with pages of the
// other size over `full_kv_heads` (4 q heads).
template <Element T, int HEAD_DIM>
void check_paged_both_masks(int causal_page, int causal_kv_heads, int full_kv_heads) {
  check_paged_attention<T, HEAD_DIM, 1>(causal_page, 4, causal_kv_heads);
  check_paged_attention<T, HEAD_DIM, 0>(causal_page == 16 ? 32 : 16, 4, full_kv_heads);
}

TEST(EMULATED_SUITE, PagedHalfHeadDim64MatchesTheReference) {
  check_paged_both_masks<Half, 64>(16, 1, 2);
}
TEST(EMULATED_SUITE, PagedHalfHeadDim128MatchesTheReference) {
  check_paged_both_masks<Half, 128>(32, 4, 1);
}
TEST(EMULATED_SUITE, PagedBFloat16HeadDim64MatchesTheReference) {
  check_paged_both_masks<BFloat16, 64>(32, 2, 4);
}
TEST(EMULATED_SUITE, PagedBFloat16HeadDim128MatchesTheReference) {
  check_paged_both_masks<BFloat16, 128>(16, 2, 1);
}

// A sequence whose key count passes its table's capacity, one with a negative count and one whose
// table names a page past the cache get NaN in every output; the others match the reference. Each
// is refused for its one reason alone, and what a kernel that read its pages anyway would find is
// finite (in memory, past the cache's num_blocks), so that such a read fails the test.
TEST(EMULATED_SUITE, PagedRefusedSequencesAreNaNAndTheOthersMatch) {
  std::mt19937 rng(27);
  PagedCase<Half> c{.q_lengths = {3, 20, 5, 40, 7},
                    .k_lengths = {30, 20, 64, 70, 7},
                    .q_heads = 2,
                    .kv_heads = 1,
                    .head_dim = 64,
                    .page_size = 16,
                    .causal = true};
  c.fill(rng);
  const std::vector<double> expected = c.expected();
  std::vector<int> k_lens = c.k_lengths;
  // Sequence 0's table filled with its first page (16 keys, no NaN), so that only its count
  // refuses it (the page past its table would be sequence 1's first, also full).
  for (int p = 1; p < c.max_blocks; ++p)
    c.tables[p] = c.tables[0];
  k_lens[0] = c.max_blocks * c.page_size + 1;
  k_lens[2] = -1;
  c.tables[3 * c.max_blocks + 4] = c.num_blocks; // the last of sequence 3's five pages
  // That page exists in memory past the cache's num_blocks, with finite values: a kernel that
  // read it would give finite outputs.
  const std::size_t page = std::size_t(c.page_size) * c.kv_heads * c.head_dim;
  for (auto *cache : {&c.k_cache, &c.v_cache}) {
    const auto values = ::kjit::ops::gpu_testing::random_elements<Half>(page, rng, -1, 1);
    cache->insert(cache->end(), values.begin(), values.end());
  }
  const std::vector<Half> got = run_paged<Half, 64, 1>(c, k_lens);
  const std::size_t row = std::size_t(c.q_heads) * c.head_dim;
  for (std::size_t b = 0; b < c.q_lengths.size(); ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b));
    const auto first = std::size_t(c.cu_q[b]) * row, last = std::size_t(c.cu_q[b + 1]) * row;
    if (b == 0 || b == 2 || b == 3) {
      EXPECT_TRUE(std::all_of(got.begin() + first, got.begin() + last, [](Half value) {
        return std::isnan(::kjit::ops::to_double(value));
      }));
    } else {
      EXPECT_TRUE(::kjit::ops::gpu_testing::all_close(
          std::span<const Half>(got).subspan(first, last - first),
          std::span<const double>(expected).subspan(first, last - first),
          ::kjit::ops::epsilon<Half>(), ::kjit::ops::epsilon<Half>()));
    }
  }
}
