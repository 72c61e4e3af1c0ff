#pragma once
// A paged prefill's host side, shared by flash_attention_paged's GPU test and the emulated MFMA
// kernel's (tests/ops/emulated_flash_attention_mfma.hpp).
#include "kjit/ops/flash_attention.hpp"
#include "tests/ops/gpu_support.hpp"
#include "tests/support/poison.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace kjit::ops::gpu_testing {

// The caches (every slot NaN but the sequences' keys, so that a read of a wrong page or slot
// reaches the output), its tables over shuffled pages (unused entries -1), q and the reference.
template <Element T> struct PagedCase {
  std::vector<int> q_lengths, k_lengths;
  int q_heads, kv_heads, head_dim, page_size;
  bool causal;
  // Made by fill().
  int max_blocks = 0, num_blocks = 0;
  std::vector<int> cu_q = {}, tables = {};
  std::vector<T> q = {}, k_cache = {}, v_cache = {};

  void fill(std::mt19937 &rng) {
    cu_q.assign(1, 0);
    for (int length : q_lengths)
      cu_q.push_back(cu_q.back() + length);
    for (int length : k_lengths)
      max_blocks = std::max(max_blocks, (length + page_size - 1) / page_size + 1);
    num_blocks = static_cast<int>(k_lengths.size()) * max_blocks + 3;
    std::vector<int> pages(num_blocks);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    tables.assign(k_lengths.size() * max_blocks, -1);
    int next = 0;
    for (std::size_t b = 0; b < k_lengths.size(); ++b)
      for (int p = 0; p < (k_lengths[b] + page_size - 1) / page_size; ++p)
        tables[b * max_blocks + p] = pages[next++];
    const std::size_t row = std::size_t(kv_heads) * head_dim;
    k_cache = kjit::testing::poisoned<T>(std::size_t(num_blocks) * page_size * row);
    v_cache = k_cache;
    for (std::size_t b = 0; b < k_lengths.size(); ++b) {
      const auto k = random_elements<T>(k_lengths[b] * row, rng, -1, 1);
      const auto v = random_elements<T>(k_lengths[b] * row, rng, -1, 1);
      for (int j = 0; j < k_lengths[b]; ++j) {
        const std::size_t at =
            (std::size_t(tables[b * max_blocks + j / page_size]) * page_size + j % page_size) * row;
        std::copy_n(k.begin() + j * row, row, k_cache.begin() + at);
        std::copy_n(v.begin() + j * row, row, v_cache.begin() + at);
      }
    }
    q = random_elements<T>(std::size_t(cu_q.back()) * q_heads * head_dim, rng, -1, 1);
  }
  float scale() const { return static_cast<float>(1 / std::sqrt(head_dim)); }
  std::vector<double> expected() const {
    return reference::flash_attention_paged<T>(q, k_cache, v_cache, cu_q, k_lengths, tables,
                                               q_heads, kv_heads, head_dim, page_size, causal,
                                               scale());
  }
};

} // namespace kjit::ops::gpu_testing
