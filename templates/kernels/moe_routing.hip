// The routing of a mixture-of-experts layer and the gathers around its grouped GEMM:
//
//   moe_topk<T, EXPERTS, TOPK, SCORING, GROUPS, TOPK_GROUP>(weights, ids, logits, bias, tokens,
//                                                          renormalize, scale)
//       router logits [tokens, EXPERTS] to the TOPK experts of each token (ids [tokens, TOPK])
//       and their weights. SCORING 0: softmax (vLLM's topk_softmax); 1: sigmoid (DeepSeek-V3).
//       The choice ranks score + bias[e] (bias may be null); the weights are the scores without
//       it, divided by their sum where `renormalize`, times `scale`. GROUPS > 1: the experts
//       fall in GROUPS equal groups, ranked by the sum of their two best choices (with a bias)
//       or their best (without); only the TOPK_GROUP best groups are chosen from (DeepSeek-V3's
//       grouped top-k). Equal values go to the lower index, as torch.topk gives them.
//   moe_align<EXPERTS, BLOCK_M>(sorted_pairs, block_experts, pair_positions, totals, ids, pairs,
//                               schedule)
//       the token-expert pairs (pair p = token * top_k + slot, ids[p] its expert) sorted by
//       expert, stably, each expert's run padded to a multiple of BLOCK_M rows: sorted_pairs[row]
//       is a pair or -1 (padding); block_experts[b] the expert of rows [b BLOCK_M, (b+1) BLOCK_M);
//       pair_positions[p] the pair's row (-1: its id lies outside [0, EXPERTS), routed nowhere);
//       totals[0] the blocks, totals[1] the ids out of range. Experts without pairs take no
//       block. EXPERTS blocks of 1024 threads; `schedule` (may be null) gets two zeros.
//   moe_gather<T, VEC, ROWS, CACHE>(x_sorted, x, sorted_pairs, totals, top_k, hidden, block_m)
//       row r of x_sorted is the token row of sorted pair r (a padding row is left as it was):
//       the grouped GEMM's A, contiguous per expert. One block per ROWS rows.
//   moe_combine<T, VEC>(out, y_sorted, weights, pair_positions, top_k, hidden)
//       out[t] = sum over slots s of weights[t, s] * y_sorted[row of pair (t, s)], in float,
//       rounded once; a token routed nowhere is zero. One block per token.

namespace kjit_moe {

__device__ inline float minus_infinity() { return -__int_as_float(0x7f800000); }

template <typename T> __device__ inline T shuffle(T value, int lane) {
#if KJIT_HIP
  return __shfl(value, lane, KJIT_WARP_SIZE);
#else
  return __shfl_sync(0xffffffffu, value, lane, KJIT_WARP_SIZE);
#endif
}

// The lanes of the warp holding the same value as this one, as a mask, and how many of them
// come before this lane. CUDA matches in one instruction; HIP compares with every lane.
struct Peers {
  int before;
  bool last; // no lane after this one holds the value
};
__device__ inline Peers peers(int value) {
  const int lane = threadIdx.x % KJIT_WARP_SIZE;
#if KJIT_HIP
  int before = 0;
  bool last = true;
#pragma unroll 4
  for (int i = 0; i < KJIT_WARP_SIZE; ++i) {
    const int other = shuffle(value, i);
    before += other == value && i < lane;
    last = last && !(other == value && i > lane);
  }
  return {before, last};
#else
  const unsigned same = __match_any_sync(0xffffffffu, value);
  return {__popc(same & ((1u << lane) - 1)), (same >> lane >> 1) == 0};
#endif
}

// A warp's exclusive prefix sum: the sum of the values of the lanes before this one, and of all.
struct Ranked {
  int before, total;
};
__device__ inline Ranked rank_sum(int value) {
  const int lane = threadIdx.x % KJIT_WARP_SIZE;
  int before = 0, total = value; // total: of this lane's aligned group of `mask` lanes
#pragma unroll
  for (int mask = 1; mask < KJIT_WARP_SIZE; mask *= 2) {
    const int other = kjit::shuffle_xor(total, mask);
    if (lane & mask) // the other group comes before this lane's
      before += other;
    total += other;
  }
  return {before, total};
}
// The lanes before this one whose predicate holds, and all such lanes.
__device__ inline Ranked rank(bool predicate) {
#if KJIT_HIP
  return rank_sum(predicate ? 1 : 0);
#else
  const int lane = threadIdx.x % KJIT_WARP_SIZE;
  const unsigned bits = __ballot_sync(0xffffffffu, predicate);
  return {__popc(bits & ((1u << lane) - 1)), __popc(bits)};
#endif
}

// The warp's lanes meet: its shared-memory writes before are seen by its reads after.
__device__ inline void warp_sync() {
#if KJIT_HIP
  __builtin_amdgcn_wave_barrier();
#else
  __syncwarp();
#endif
}

// A candidate of a warp-wide arg-max: the higher value wins, the lower index among equals.
struct Candidate {
  float value;
  int index;
  float weight; // what the winner carries out (its score)
};
__device__ inline bool beats(const Candidate &a, const Candidate &b) {
  return a.value > b.value || (a.value == b.value && a.index < b.index);
}
__device__ inline Candidate warp_best(Candidate c) {
#pragma unroll
  for (int mask = KJIT_WARP_SIZE / 2; mask > 0; mask /= 2) {
    const Candidate other{kjit::shuffle_xor(c.value, mask), kjit::shuffle_xor(c.index, mask),
                          kjit::shuffle_xor(c.weight, mask)};
    if (beats(other, c))
      c = other;
  }
  return c;
}

} // namespace kjit_moe

// One warp per token; lane l holds experts l, l + W, l + 2W, ... (W the warp's width).
template <typename T, int EXPERTS, int TOPK, int SCORING, int GROUPS, int TOPK_GROUP>
__global__ void moe_topk(float *KJIT_RESTRICT weights, int *KJIT_RESTRICT ids,
                         const T *KJIT_RESTRICT logits, const float *KJIT_RESTRICT bias, int tokens,
                         int renormalize, float scale) {
  using namespace kjit_moe;
  constexpr int W = KJIT_WARP_SIZE, PER = (EXPERTS + W - 1) / W, GROUP = EXPERTS / GROUPS;
  static_assert(EXPERTS % GROUPS == 0 && TOPK_GROUP <= GROUPS, "equal groups, chosen among them");
  const int token = blockIdx.x * (blockDim.x / W) + threadIdx.x / W, lane = threadIdx.x % W;
  if (token >= tokens)
    return;
  const T *row = logits + static_cast<long long>(token) * EXPERTS;
  float score[PER], choice[PER];
  float largest = minus_infinity();
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int e = lane + i * W;
    score[i] = e < EXPERTS ? kjit::to_float(row[e]) : minus_infinity();
    largest = fmaxf(largest, score[i]);
  }
  if (SCORING == 0) {
    largest = kjit::warp_max(largest);
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      score[i] = expf(score[i] - largest); // 0 past the experts
      sum += score[i];
    }
    sum = kjit::warp_sum(sum);
#pragma unroll
    for (int i = 0; i < PER; ++i)
      score[i] /= sum;
  } else {
#pragma unroll
    for (int i = 0; i < PER; ++i)
      score[i] = 1.0f / (1.0f + expf(-score[i]));
  }
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int e = lane + i * W;
    choice[i] = e < EXPERTS ? score[i] + (bias != nullptr ? bias[e] : 0.0f) : minus_infinity();
  }
  if (GROUPS > 1) {
    // Each group's rank, the same in every lane: its best choice (and second best, with a bias).
    float group_rank[GROUPS];
#pragma unroll
    for (int g = 0; g < GROUPS; ++g) {
      float best = minus_infinity(), second = minus_infinity();
#pragma unroll
      for (int i = 0; i < PER; ++i)
        if ((lane + i * W) / GROUP == g && lane + i * W < EXPERTS) {
          second = fmaxf(second, fminf(best, choice[i]));
          best = fmaxf(best, choice[i]);
        }
#pragma unroll
      for (int mask = W / 2; mask > 0; mask /= 2) {
        const float other_best = kjit::shuffle_xor(best, mask);
        const float other_second = kjit::shuffle_xor(second, mask);
        second = fmaxf(fmaxf(second, other_second), fminf(best, other_best));
        best = fmaxf(best, other_best);
      }
      group_rank[g] = bias != nullptr && GROUP > 1 ? best + second : best;
    }
    bool chosen[GROUPS] = {};
#pragma unroll
    for (int round = 0; round < TOPK_GROUP; ++round) {
      int winner = -1;
#pragma unroll
      for (int g = 0; g < GROUPS; ++g)
        if (!chosen[g] && (winner < 0 || group_rank[g] > group_rank[winner]))
          winner = g;
      chosen[winner] = true;
    }
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int e = lane + i * W;
      if (e < EXPERTS && !chosen[e / GROUP])
        choice[i] = minus_infinity();
    }
  }
  float picked_weight[TOPK];
  int picked[TOPK];
  float sum = 0.0f;
  unsigned taken = 0; // bit i: this lane's expert lane + i W has been picked
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    Candidate best{minus_infinity(), 1 << 30, 0.0f};
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const Candidate mine{choice[i], lane + i * W, score[i]};
      if (lane + i * W < EXPERTS && !(taken >> i & 1u) && beats(mine, best))
        best = mine;
    }
    best = warp_best(best);
    picked[k] = best.index;
    picked_weight[k] = best.weight;
    sum += best.weight;
    // The winner leaves the race (a value of minus infinity could still tie with a masked expert).
#pragma unroll
    for (int i = 0; i < PER; ++i)
      if (lane + i * W == best.index)
        taken |= 1u << i;
  }
  if (lane != 0)
    return;
  const float factor = (renormalize ? 1.0f / sum : 1.0f) * scale;
#pragma unroll
  for (int k = 0; k < TOPK; ++k) {
    ids[static_cast<long long>(token) * TOPK + k] = picked[k];
    weights[static_cast<long long>(token) * TOPK + k] = picked_weight[k] * factor;
  }
}

// One block per expert (EXPERTS blocks), each over every pair: the pairs are cut into one
// contiguous segment per warp. Each block counts the pairs of every expert (for the runs' starts)
// and the pairs of its own expert in each warp's segment; each warp's share of the block's run
// follows the earlier warps'; then each warp walks its segment in order, a warp-width at a time,
// and a pair of the block's expert goes after those of the lanes before it: the order within an
// expert is the pairs'. Block 0 also writes the totals and the positions of the pairs routed
// nowhere. Every block reads the ids (from L2 after the first): a single block's serial walk was
// 0.05 ms at 24,576 pairs on an H100, this 0.010 (BENCHMARKS.md, moe7). `schedule`, where not
// null, gets two zeros (fused_moe's grouped GEMMs' tile counters, moe_wgmma.hip) in place of a
// memset each.
template <int EXPERTS, int BLOCK_M, int COUNT = 1>
__global__ void __launch_bounds__(1024)
    moe_align(int *KJIT_RESTRICT sorted_pairs, int *KJIT_RESTRICT block_experts,
              int *KJIT_RESTRICT pair_positions, int *KJIT_RESTRICT totals,
              const int *KJIT_RESTRICT ids, int pairs, int *KJIT_RESTRICT schedule) {
  using namespace kjit_moe;
  constexpr int W = KJIT_WARP_SIZE, WARPS = 1024 / W, UNROLL = 8;
  constexpr int PER = (EXPERTS + W - 1) / W; // experts per lane in the starts' scan
  __shared__ int count[EXPERTS];             // the pairs of each expert
  __shared__ int start[EXPERTS + 1];         // the first row of each expert's run
  __shared__ int before[WARPS]; // this expert's pairs in each warp's segment, then earlier
  __shared__ int invalid;
  const int expert = blockIdx.x, warp = threadIdx.x / W, lane = threadIdx.x % W;
  for (int i = threadIdx.x; i < EXPERTS; i += blockDim.x)
    count[i] = 0;
  if (threadIdx.x == 0)
    invalid = 0;
  if (expert == 0 && schedule != nullptr && threadIdx.x < 2)
    schedule[threadIdx.x] = 0;
  __syncthreads();
  const int segment = (pairs + WARPS - 1) / WARPS, begin = warp * segment,
            end = min(pairs, begin + segment);
  int mine = 0; // this expert's pairs in the warp's segment (the same in every lane)
  // Whole warps (the ranks and peers() take every lane), UNROLL loads in flight.
  for (int first = begin; first < end; first += W * UNROLL) {
    int e[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int p = first + u * W + lane;
      e[u] = p < end ? ids[p] : -1;
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const bool in = first + u * W + lane < end, valid = in && e[u] >= 0 && e[u] < EXPERTS;
#if !KJIT_HIP // one atomic per expert and step: the last of its peers adds their count
      if (COUNT == 0) {
        const Peers same = peers(valid ? e[u] : -1);
        if (valid && same.last)
          atomicAdd(&count[e[u]], same.before + 1);
      } else
#endif
        // one atomic a pair (HIP: matching 64 lanes by shuffles costs more than it saves)
        if (valid)
          atomicAdd(&count[e[u]], 1);
      if (expert == 0 && in && !valid)
        atomicAdd(&invalid, 1);
      mine += rank(valid && e[u] == expert).total;
    }
  }
  if (lane == 0)
    before[warp] = mine;
  __syncthreads();
  // The runs' starts (each lane's PER experts after the earlier lanes') and the warps' shares of
  // this expert's run (WARPS <= W). Every warp scans both (the CPU emulation meets the whole
  // block at each shuffle); warp 0 writes the starts, warp 1 the shares.
  int rows = 0;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int e = lane * PER + i;
    rows += e < EXPERTS ? (count[e] + BLOCK_M - 1) / BLOCK_M * BLOCK_M : 0;
  }
  const Ranked earlier = rank_sum(rows), share = rank_sum(lane < WARPS ? before[lane] : 0);
  __syncthreads(); // every warp has read before[] before warp 1 rewrites it
  if (warp == 0) {
    int row = earlier.before;
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int e = lane * PER + i;
      if (e < EXPERTS) {
        start[e] = row;
        row += (count[e] + BLOCK_M - 1) / BLOCK_M * BLOCK_M;
      }
    }
    if (lane == 0) {
      start[EXPERTS] = earlier.total;
      if (expert == 0) {
        totals[0] = earlier.total / BLOCK_M;
        totals[1] = invalid;
      }
    }
  } else if (warp == 1 && lane < WARPS) {
    before[lane] = share.before;
  }
  __syncthreads();
  const int first_row = start[expert], used = count[expert], last_row = start[expert + 1];
  if (used == 0 && expert != 0) // no pairs to place (block 0 still marks the ones routed nowhere)
    return;
  int row = first_row + before[warp];
  for (int first = begin; first < end; first += W * UNROLL) {
    int e[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int p = first + u * W + lane;
      e[u] = p < end ? ids[p] : -1;
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int p = first + u * W + lane;
      const bool in = p < end, match = in && e[u] == expert;
      const Ranked r = rank(match);
      if (match) {
        sorted_pairs[row + r.before] = p;
        pair_positions[p] = row + r.before;
      } else if (expert == 0 && in && !(e[u] >= 0 && e[u] < EXPERTS)) {
        pair_positions[p] = -1;
      }
      row += r.total;
    }
  }
  for (int r = first_row + used + threadIdx.x; r < last_row; r += blockDim.x)
    sorted_pairs[r] = -1;
  for (int b = first_row / BLOCK_M + threadIdx.x; b < last_row / BLOCK_M; b += blockDim.x)
    block_experts[b] = expert;
}

// ROWS rows a block, blockDim.x / ROWS threads a row, each thread's UNROLL loads in flight before
// its stores (one block of 128 threads a row, two loads each, left the copy short of the
// bandwidth: BENCHMARKS.md). A padding row is not written: the grouped GEMM reads it into its own
// padding row of C only, which nothing reads (moe_wgmma.hip, SKIP_PADDING). CACHE 1: streaming
// stores on NVIDIA with 16-byte vectors (st.global.cs, evict-first: the gate-up GEMM reads each
// row once, and the tokens' rows, each read top_k times, should stay in L2); HIP, and CACHE 0,
// store plainly.
template <int CACHE, typename T, int VEC>
__device__ inline void store_gathered(T *to, const kjit::Vec<T, VEC> &v) {
#if !KJIT_HIP
  if constexpr (CACHE == 1 && sizeof(v) == 16) {
    __stcs(reinterpret_cast<uint4 *>(to), *reinterpret_cast<const uint4 *>(&v));
    return;
  }
#endif
  kjit::store_vec(to, v);
}

template <typename T, int VEC, int ROWS = 1, int CACHE = 0>
__global__ void moe_gather(T *KJIT_RESTRICT x_sorted, const T *KJIT_RESTRICT x,
                           const int *KJIT_RESTRICT sorted_pairs, const int *KJIT_RESTRICT totals,
                           int top_k, int hidden, int block_m) {
  constexpr int UNROLL = 8;
  const int threads = blockDim.x / ROWS, lane = threadIdx.x % threads;
  const int row = blockIdx.x * ROWS + threadIdx.x / threads;
  if (row >= totals[0] * block_m)
    return;
  const int pair = sorted_pairs[row];
  if (pair < 0)
    return;
  T *to = x_sorted + static_cast<long long>(row) * hidden;
  const T *from = x + static_cast<long long>(pair / top_k) * hidden;
  for (int first = lane * VEC; first < hidden; first += threads * VEC * UNROLL) {
    kjit::Vec<T, VEC> v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = first + u * threads * VEC;
      if (i < hidden)
        v[u] = kjit::load_vec<VEC>(from + i);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = first + u * threads * VEC;
      if (i < hidden)
        store_gathered<CACHE>(to + i, v[u]);
    }
  }
}

template <typename T, int VEC>
__global__ void moe_combine(T *KJIT_RESTRICT out, const T *KJIT_RESTRICT y_sorted,
                            const float *KJIT_RESTRICT weights,
                            const int *KJIT_RESTRICT pair_positions, int top_k, int hidden) {
  const long long token = blockIdx.x;
  for (int i = threadIdx.x * VEC; i < hidden; i += blockDim.x * VEC) {
    float sum[VEC] = {};
    for (int slot = 0; slot < top_k; ++slot) {
      const int row = pair_positions[token * top_k + slot];
      if (row < 0)
        continue;
      const float w = weights[token * top_k + slot];
      float y[VEC];
      kjit::to_floats(kjit::load_vec<VEC>(y_sorted + static_cast<long long>(row) * hidden + i), y);
#pragma unroll
      for (int j = 0; j < VEC; ++j)
        sum[j] += w * y[j];
    }
    kjit::Vec<T, VEC> v;
    kjit::from_floats(sum, v);
    kjit::store_vec(out + token * hidden + i, v);
  }
}

// fused_moe at one token (decode), without the grouped GEMM's sort, padding and tiles: the
// few experts' weights are streamed once, each row by one warp, as a matrix-vector product reads
// them (BENCHMARKS.md, "fused_moe: a decode path for one token"). moe_decode_gate_up: for pair p =
// token * top_k + slot routed to expert e = ids[p] (nowhere where e is outside [0, experts)),
//   gated[p, j] = silu(x[token] . w13[e * 2 inter + j]) * (x[token] . w13[e * 2 inter + inter + j])
// one warp per (p, j); the rows of w13 are hidden long.
template <typename T, int VEC>
__global__ void moe_decode_gate_up(T *KJIT_RESTRICT gated, const T *KJIT_RESTRICT x,
                                   const T *KJIT_RESTRICT w13, const int *KJIT_RESTRICT ids,
                                   int pairs, int top_k, int experts, int hidden, int inter) {
  constexpr int W = KJIT_WARP_SIZE;
  const long long output = static_cast<long long>(blockIdx.x) * (blockDim.x / W) + threadIdx.x / W;
  const int lane = threadIdx.x % W;
  if (output >= static_cast<long long>(pairs) * inter)
    return;
  const int pair = static_cast<int>(output / inter), j = static_cast<int>(output % inter);
  const int e = ids[pair];
  if (e < 0 || e >= experts) // routed nowhere: moe_decode_down skips the slot
    return;
  const T *row = x + static_cast<long long>(pair / top_k) * hidden;
  const T *gate = w13 + (static_cast<long long>(e) * 2 * inter + j) * hidden;
  const T *up = gate + static_cast<long long>(inter) * hidden;
  float g = 0.0f, u = 0.0f;
#pragma unroll 4
  for (int i = lane * VEC; i < hidden; i += W * VEC) {
    float a[VEC], b[VEC], c[VEC];
    kjit::to_floats(kjit::load_vec<VEC>(row + i), a);
    kjit::to_floats(kjit::load_vec<VEC>(gate + i), b);
    kjit::to_floats(kjit::load_vec<VEC>(up + i), c);
#pragma unroll
    for (int v = 0; v < VEC; ++v) {
      g += a[v] * b[v];
      u += a[v] * c[v];
    }
  }
  g = kjit::warp_sum(g);
  u = kjit::warp_sum(u);
  if (lane == 0)
    gated[output] = kjit::from_float<T>(g / (1.0f + __expf(-g)) * u);
}

// The down projection and the weighted combine in one pass (moe_combine's sum, without a sorted
// copy of each slot's output): one block per (token, i), its threads over the top_k slots' rows
// of w2 (inter long) together, so that each thread has few loads in series and a multiprocessor
// holds many blocks' loads in flight (a warp per output, 16 warps a multiprocessor at the
// fine-grained layer's 2048 outputs, was no faster than the grouped path: BENCHMARKS.md):
//   out[token, i] = sum over slots s routed somewhere of
//                   weights[p] * (gated[p] . w2[ids[p] * hidden + i]),  p = token * top_k + s
template <typename T, int VEC>
__global__ void moe_decode_down(T *KJIT_RESTRICT out, const T *KJIT_RESTRICT gated,
                                const T *KJIT_RESTRICT w2, const float *KJIT_RESTRICT weights,
                                const int *KJIT_RESTRICT ids, int tokens, int top_k, int experts,
                                int hidden, int inter) {
  constexpr int W = KJIT_WARP_SIZE;
  __shared__ float partial[1024 / W];
  const long long output = blockIdx.x;
  const int token = static_cast<int>(output / hidden), i = static_cast<int>(output % hidden);
  const int chunks = inter / VEC; // of one slot's row
  float sum = 0.0f;
#pragma unroll 4
  for (int c = threadIdx.x; c < top_k * chunks; c += blockDim.x) {
    const int slot = c / chunks, at = (c - slot * chunks) * VEC;
    const long long pair = static_cast<long long>(token) * top_k + slot;
    const int e = ids[pair];
    if (e < 0 || e >= experts)
      continue;
    float a[VEC], b[VEC];
    kjit::to_floats(kjit::load_vec<VEC>(gated + pair * inter + at), a);
    kjit::to_floats(kjit::load_vec<VEC>(w2 + (static_cast<long long>(e) * hidden + i) * inter + at),
                    b);
    float dot = 0.0f;
#pragma unroll
    for (int v = 0; v < VEC; ++v)
      dot += a[v] * b[v];
    sum += weights[pair] * dot;
  }
  sum = kjit::warp_sum(sum);
  if (threadIdx.x % W == 0)
    partial[threadIdx.x / W] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x) / W; ++w)
      sum += partial[w];
    out[output] = kjit::from_float<T>(sum);
  }
}
