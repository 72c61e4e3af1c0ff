#pragma once
// How paged_attention_decode launches a shape: pure functions of the shape, the target's warp size
// and the device's multiprocessor count, so that tests check the choices without a GPU.
#include <cstddef>

namespace kjit::ops::detail {

struct DecodePlan {
  int group;     // q heads per block (GROUP): the GQA ratio, in chunks of at most 8
  int chunks;    // blocks per kv head: ceil(ratio / group)
  int unroll;    // tokens per thread and step (UNROLL)
  int loads;     // 16-byte loads of a row per thread and token (LOADS)
  int warps;     // WARPS
  int stages;    // steps of K and V in the shared-memory ring (STAGES)
  int splits;    // blocks along the sequence (flash-decoding); 1: out written directly
  int partition; // tokens per split
  std::size_t workspace_bytes; // partial outputs and log-sum-exps; 0 for one split
};

// The kernel's parameters for a GQA ratio on a target of `warp_size` lanes; one split.
DecodePlan decode_variant(int warp_size, int q_heads, int kv_heads, bool fp8);

// Shared memory of the variant's ring (attention_decode.hip's RING_BYTES).
int decode_ring_bytes(const DecodePlan &plan, int warp_size, bool fp8);

// Blocks of `threads` threads, `registers` registers each and `shared_bytes` of shared memory
// that one multiprocessor holds at once (65536 registers, 228 KiB of shared memory with 1 KiB
// reserved per block, 2048 threads, 32 blocks: Hopper's and Ampere's limits).
int resident_blocks(int registers, int threads, int shared_bytes);

// paged_attention_merge's block: head_dim / 4 threads per group of splits, a group per split up
// to 256 threads, in whole warps.
int merge_threads(int splits, int head_dim, int warp_size);

// Splits the sequences (plan.splits, plan.partition, plan.workspace_bytes) so that the blocks,
// `resident` at once on each of `multiprocessors`, run in whole waves of equal blocks. `max_len`:
// the longest sequence (max_seq_len). `may_split`: a workspace is given.
void split_decode(DecodePlan &plan, int multiprocessors, int resident, int batch, int q_heads,
                  int kv_heads, int head_dim, int max_len, bool may_split);

} // namespace kjit::ops::detail
