#pragma once
// A mixture-of-experts layer, as vLLM's fused_moe computes it: routing, the sort of the
// token-expert pairs by expert, a grouped GEMM over every expert in one launch (the gate and up
// projections with silu_and_mul fused), the down projection, and the weighted sum of each
// token's top-k outputs.
//
//   kjit::ops::moe_topk(rt, weights, ids, logits, tokens, experts, top_k);
//   kjit::ops::fused_moe(rt, out, x, weights, ids, tokens, top_k, layer, workspace, bytes);
//
// Device pointers, row-major and contiguous; asynchronous on `stream` of the Runtime's default
// device. Each throws Error(bad_argument) with one line for a bad argument (named below), what
// Runtime::kernel throws, and nothing else.
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

// How router logits become each token's experts and weights.
struct TopkOptions {
  enum class Scoring { softmax, sigmoid };
  Scoring scoring = Scoring::softmax; // sigmoid: DeepSeek-V3's
  // Grouped top-k (DeepSeek-V3: 8 groups, 4 chosen): the experts fall in `groups` equal groups,
  // ranked by the sum of their two best choices where there is a bias, by their best otherwise;
  // the top-k experts are chosen from the `top_groups` best groups only. 1 and 1: no groups.
  int groups = 1, top_groups = 1;
  bool renormalize = true; // the weights divided by their sum
  float scale = 1.0f;      // times the weights (DeepSeek-V3's routed_scaling_factor)
};

// logits [tokens, experts] to ids [tokens, top_k] (int) and weights [tokens, top_k] (float): the
// top_k experts of each token by score + bias[e] (bias: `experts` floats, or null), equal values
// to the lower index as torch.topk orders them, best first; each weight is the expert's score
// (softmax or sigmoid of its logit, without the bias), renormalised and scaled as `options` say.
// Throws for a null pointer, tokens < 0, experts outside [1, 512], top_k outside [1, 32] or above
// the experts of the chosen groups, groups that do not divide the experts or more than 64, or
// top_groups outside [1, groups].
template <Element T>
void moe_topk(Runtime &rt, float *weights, int *ids, const T *logits, const float *bias, int tokens,
              int experts, int top_k, const TopkOptions &options = {}, Stream stream = nullptr);

// vLLM's topk_softmax: moe_topk with softmax scores, no bias and no groups.
template <Element T>
void topk_softmax(Runtime &rt, float *weights, int *ids, const T *logits, int tokens, int experts,
                  int top_k, bool renormalize, Stream stream = nullptr);

// The token-expert pairs sorted by expert for a grouped GEMM of `block_m`-row tiles. Pair
// p = token * top_k + slot routes to ids[p]. Device arrays of moe_align_rows(...) rows:
//   sorted_pairs[rows]      each row's pair, -1 for padding; an expert's pairs in pair order,
//                           its run padded to a multiple of block_m rows;
//   block_experts[rows / block_m]  the expert of each block of rows;
//   pair_positions[pairs]   each pair's row; -1 for an id outside [0, experts): routed nowhere;
//   totals[2]               the blocks used, and the count of ids out of range.
// Experts without pairs take no block. An id out of range cannot throw from the device: it is
// counted in totals[1] and contributes nothing (reference::moe_align throws for it).
struct MoeAlignment {
  int *sorted_pairs, *block_experts, *pair_positions, *totals;
};
// The most rows the alignment of `pairs` pairs over `experts` experts can take: every expert's
// run rounded up to block_m.
std::size_t moe_align_rows(int pairs, int experts, int block_m);
// Throws for a null pointer, pairs < 0, experts outside [1, 256] or block_m not one of 16, 32,
// 64 and 128.
void moe_align(Runtime &rt, const MoeAlignment &out, const int *ids, int pairs, int experts,
               int block_m, Stream stream = nullptr);

// An expert layer's weights, nn.Linear's layout per expert, all experts in one tensor each:
// w13 [experts, 2 * inter, hidden] (each expert's gate rows, then its up rows: vLLM's w13) and
// w2 [experts, hidden, inter].
template <Element T> struct MoeWeights {
  const T *w13, *w2;
  int experts, hidden, inter;
};

// Expert ids [tokens, top_k] on the host: throws Error(bad_argument) with one line naming the
// first id outside [0, experts) other than -1, the id that routes a slot nowhere (vLLM's
// expert_map marks the experts of other ranks so). Throws too for top_k or experts below 1 and
// ids not a whole number of tokens.
void check_expert_ids(std::span<const int> ids, int top_k, int experts);

// fused_moe's options beyond its tensors.
struct FusedMoeOptions {
  // Copy the ids to the host (after waiting for the device: they may come from moe_topk on any
  // stream) and check_expert_ids them before launching. A debug mode, as DecodeBatch::validate
  // is for attention's tables: without it an id out of range cannot throw from the device, and
  // routes its slot nowhere as -1 does (moe_align counts it).
  bool validate = false;
};

// The device workspace fused_moe needs for `tokens` tokens of top_k experts each.
template <Element T>
std::size_t fused_moe_workspace_bytes(int tokens, int top_k, const MoeWeights<T> &layer);

// out[t] = sum over slots s of weights[t, s] * expert(ids[t, s])(x[t]), with
// expert(e)(v) = w2[e] @ (silu(w_gate[e] @ v) * (w_up[e] @ v)): x and out [tokens, hidden],
// weights (float) and ids [tokens, top_k]; a slot whose id is -1 contributes nothing, and a token
// whose ids are all -1 gets zeros (any other id outside [0, experts) is a caller's error:
// FusedMoeOptions::validate throws for it; without it the slot is routed nowhere likewise).
// Products accumulate in float; the gated intermediate and each expert's output are rounded to T
// once each. Half and bfloat16 on sm_90a (H100, H200), where the grouped GEMM is wgmma's, and on
// gfx942 and gfx950 (MI300, MI350), where it is MFMA's. Throws for a null pointer, tokens < 0,
// top_k outside [1, experts], hidden or inter not positive multiples of 8, a matrix not 16-byte
// aligned, a workspace smaller than fused_moe_workspace_bytes or not 256-byte aligned, out
// overlapping x, a device that is none of sm_90a, gfx942 and gfx950, or with `options.validate`
// an id as check_expert_ids says (nothing launched then).
template <Element T>
void fused_moe(Runtime &rt, T *out, const T *x, const float *weights, const int *ids, int tokens,
               int top_k, const MoeWeights<T> &layer, void *workspace, std::size_t workspace_bytes,
               Stream stream = nullptr, const FusedMoeOptions &options = {});

// The same layer with e4m3 weights (e4m3fn bytes, encode_e4m3 makes them) and DeepSeek-V3's
// float block scales, one per 128 x 128 block of each expert's matrix:
// w13 [experts, 2 * inter, hidden] with w13_scales [experts, ceil(2 inter / 128), hidden / 128],
// w2 [experts, hidden, inter] with w2_scales [experts, ceil(hidden / 128), inter / 128]; weight
// (e, r, c) is decode_e4m3(byte) * scales[e, r / 128, c / 128].
struct MoeScales {
  const float *data;
  int experts, rows, columns; // the shape the caller gives them, checked
};
struct MoeWeightsFp8 {
  const std::uint8_t *w13, *w2;
  MoeScales w13_scales, w2_scales;
  int experts, hidden, inter;
};

template <Element T>
std::size_t fused_moe_workspace_bytes(int tokens, int top_k, const MoeWeightsFp8 &layer);

// fused_moe with FP8 weights: each GEMM's activations (the tokens' rows, then the gated
// intermediate rounded to T) are quantised to e4m3 per 1 x 128 block of a row (scale amax / 448)
// and multiplied by the e4m3 weights on the tensor cores, each 128 of K summed apart and added to
// float sums times both scales (DeepGEMM's promotion). x, out: T, half or bfloat16. Throws as
// fused_moe does, and for hidden or inter not a positive multiple of 128 (the scale block), scales
// of another shape or not 4-byte aligned, or e4m3 weights not 16-byte aligned. Ids and
// `options.validate` as in fused_moe.
template <Element T>
void fused_moe(Runtime &rt, T *out, const T *x, const float *weights, const int *ids, int tokens,
               int top_k, const MoeWeightsFp8 &layer, void *workspace, std::size_t workspace_bytes,
               Stream stream = nullptr, const FusedMoeOptions &options = {});

namespace reference {

// moe_topk on the host (scores in double): ids and weights, [tokens, top_k] each.
struct Routing {
  std::vector<int> ids;
  std::vector<double> weights;
};
template <Element T>
Routing moe_topk(std::span<const T> logits, std::span<const float> bias, int tokens, int experts,
                 int top_k, const TopkOptions &options = {});

// moe_align on the host; throws Error(bad_argument) for an id outside [0, experts).
struct Alignment {
  std::vector<int> sorted_pairs, block_experts, pair_positions;
};
Alignment moe_align(std::span<const int> ids, int experts, int block_m);

// fused_moe in double precision for the given tokens of x (all where `tokens_to_check` is
// empty): out [tokens_to_check.size(), hidden], and for each element the scale of fused_moe's
// roundings, sum over slots of |weight| * sum_j |gated_j| * |w2[e][h, j]| (the gated
// intermediate is rounded to T before the down projection).
struct Layer {
  std::vector<double> out, magnitude;
};
template <Element T>
Layer fused_moe(std::span<const T> x, std::span<const float> weights, std::span<const int> ids,
                int top_k, std::span<const T> w13, std::span<const T> w2, int experts, int hidden,
                int inter, std::span<const int> tokens_to_check);

// fused_moe with FP8 weights in double precision: the weights decoded and scaled exactly, the
// tokens' rows quantised per 1 x 128 block as the device quantises them (scale amax / 448,
// nearest-even e4m3), the gated intermediate kept in double. `magnitude` is fused_moe's. The
// device's further error is the gated intermediate's e4m3 quantisation: at most 2^-4 of each
// |gated_j| (half of e4m3's 3-bit step), so at most 2^-4 * magnitude in an output.
// w13_scales and w2_scales are host copies, [experts, ceil(2 inter / 128), hidden / 128] and
// [experts, ceil(hidden / 128), inter / 128].
template <Element T>
Layer fused_moe_fp8(std::span<const T> x, std::span<const float> weights, std::span<const int> ids,
                    int top_k, std::span<const std::uint8_t> w13, std::span<const float> w13_scales,
                    std::span<const std::uint8_t> w2, std::span<const float> w2_scales, int experts,
                    int hidden, int inter, std::span<const int> tokens_to_check);

} // namespace reference

} // namespace kjit::ops
