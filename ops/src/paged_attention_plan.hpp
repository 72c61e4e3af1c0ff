#pragma once
// How paged_attention_decode launches a shape: pure functions of the shape, the target's warp size
// and the device's multiprocessor count, so that tests check the choices without a GPU.
#include "kjit/runtime/tuning_table.hpp"

#include <cstddef>
#include <optional>

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

// The kernel's parameters for a GQA ratio on a target of `warp_size` lanes; one split. Its ring
// takes at most 48 KiB.
DecodePlan decode_variant(int warp_size, int q_heads, int kv_heads, bool fp8);

// The tuning table's key for a decode shape: the problem {GROUP, HEAD_DIM, KV_FP8, PAGE} (not T:
// paged_attention_workspace_bytes, which knows no type, must plan as the call does) and the
// extents {batch, context}, each rounded up to a power of two.
ParamValues decode_tuning_problem(const DecodePlan &plan, int head_dim, int page_size, bool fp8);
ParamValues decode_tuning_extents(int batch, int max_len);

// `plan` with a tuning record's winner's WARPS, UNROLL, LOADS and STAGES; `plan` itself when there
// is no winner, it lacks one of the four, or its ring passes decode_ring_limit (the table is
// untrusted input). The GQA group stays the heuristic's: it is part of the record's problem.
DecodePlan tuned_decode_variant(const DecodePlan &plan, const std::optional<TimedVariant> &winner,
                                int warp_size, bool nvidia, bool fp8);

// Shared memory of the variant's ring (attention_decode.hip's RING_BYTES).
int decode_ring_bytes(const DecodePlan &plan, int warp_size, bool fp8);

// The most a tuned variant's ring may take: on NVIDIA the ring is dynamic shared memory, and
// three blocks of 64 KiB fit a multiprocessor's 228 KiB beside their 1 KiB each; on AMD it is
// static shared memory, within 48 KiB.
int decode_ring_limit(bool nvidia);

// The dynamic shared memory a launch of the variant takes: on NVIDIA the ring or, if larger, the
// warps' states merged after it (attention_decode.hip's Merge); 0 elsewhere, where both are
// static.
int decode_shared_bytes(const DecodePlan &plan, bool nvidia, bool fp8, int head_dim);

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
