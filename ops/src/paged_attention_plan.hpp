#pragma once
// How paged_attention_decode launches a shape: a pure function of the shape and the device's
// multiprocessor count, so that tests check the split choice without a GPU.
#include <cstddef>

namespace kjit::ops::detail {

struct DecodePlan {
  int group;     // q heads per block (GROUP): the GQA ratio, in chunks of at most 8
  int chunks;    // blocks per kv head: ceil(ratio / group)
  int unroll;    // tokens each thread loads before it uses one (UNROLL)
  int loads;     // 16-byte loads of a row per thread and token (LOADS)
  int warps;     // WARPS
  int splits;    // blocks along the sequence (flash-decoding); 1: out written directly
  int partition; // tokens per split
  std::size_t workspace_bytes; // partial outputs and log-sum-exps; 0 for one split
};

// `max_len`: the longest sequence (max_seq_len). `may_split`: a workspace is given.
DecodePlan decode_plan(int multiprocessors, int batch, int q_heads, int kv_heads, int head_dim,
                       int max_len, bool may_split);

} // namespace kjit::ops::detail
