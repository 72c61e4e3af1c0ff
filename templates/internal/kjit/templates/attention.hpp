#pragma once
// The flash_attention template's shared memory, for its tuning rule (library.cpp) and its launch
// (ops/src/flash_attention.cpp): one formula, as the kernel lays it out.
#include <cstdint>

namespace kjit::templates {

// q_buffers tiles of q's 64 * consumers rows and `stages` tiles of block_n keys of k and of v,
// each head_dim 16-bit elements wide; with stage_o each consumer's 64 rows of out, rows 16 bytes
// apart within a group of 8 (the kernel's StagedRows); the slack that aligns them to 1024 bytes
// (the 128-byte swizzle's period); the mbarriers (q's full and empty ones per buffer, k's and v's
// per stage).
constexpr std::int64_t flash_attention_shared_bytes(std::int64_t head_dim, std::int64_t consumers,
                                                    std::int64_t block_n, std::int64_t stages,
                                                    std::int64_t q_buffers, std::int64_t stage_o) {
  const std::int64_t row_bytes = head_dim * 2;
  const std::int64_t staged_rows = stage_o ? consumers * 8 * (8 * row_bytes + 7 * 16) : 0;
  return q_buffers * 64 * consumers * row_bytes + 2 * stages * block_n * row_bytes + staged_rows +
         1024 + (2 * q_buffers + 4 * stages) * 8;
}

} // namespace kjit::templates
