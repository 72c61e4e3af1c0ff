// Paged attention for decode (one query token per sequence), over vLLM's and FlashInfer's NHD
// paged cache: k_cache and v_cache are [blocks, PAGE, kv_heads, HEAD_DIM], the page of a
// sequence's token t is block_tables[seq * max_blocks + t / PAGE], and a sequence attends to its
// first seq_lens[seq] tokens:
//
//   out[seq, h] = sum_t softmax_t(scale * q[seq, h] . k[t, h / ratio]) v[t, h / ratio]
//
// with ratio = q_heads / kv_heads (GQA; MQA is kv_heads 1). KV_FP8 1 reads e4m3fn bytes, each
// multiplied by its tensor's scale (folded into q_scale_log2 and v_scale by the host).
//
// Kernel paged_attention_decode: one block per (kv head, group of GROUP of its q heads, sequence,
// split), so that the kv head's K and V are read once for GROUP query heads (the host makes GROUP
// the whole ratio up to 8). Each token's row of HEAD_DIM elements is read by TPT = HEAD_DIM /
// (8 LOADS) threads, 8 elements (16 bytes, 8 for fp8) per load and LOADS loads each, so a warp
// reads whole rows of several tokens per load; a step is UNROLL tokens per thread. More LOADS:
// fewer shuffles and exp2s per byte, more registers. Scores are kept in the log2 domain (q is
// pre-multiplied by scale * log2(e)), so the online softmax (running max, sum and output, per
// thread group, rescaled in a step where the max grows) needs exp2 alone. Warps merge their states
// in shared memory at the end.
//
// The K and V bytes travel through a ring of STAGES steps in shared memory, filled by
// asynchronous copies (cp.async on NVIDIA sm_80 and newer) STAGES - 1 steps ahead of the step
// being computed, so that a block keeps (STAGES - 1) steps of loads in flight without holding
// them in registers: a decode is a stream of the cache, bound by the bytes in flight per
// multiprocessor (on NVIDIA the ring is dynamic shared memory, so it may pass 48 KiB). Each
// thread copies the slots it later reads itself, so the ring needs no barrier, only the thread's
// own wait for its copies. Elsewhere (AMD) the copy is a plain load and store, and the ring a
// staging buffer in static shared memory.
//
// Split-KV (flash-decoding): gridDim.z splits of `partition` tokens each. With one split the block
// writes out; with several it writes its normalised partial output and its log2-sum-exp to the
// workspace, and paged_attention_merge combines a head's splits. On NVIDIA sm_90 the merge is a
// programmatic dependent launch: each decode block lets it start once its first copies are out
// (kjit::let_dependents_start), and it waits for the decode's partial results
// (kjit::wait_for_previous_grid), so that its launch happens behind the decode's tail.
//
// Inputs the host cannot see (device-side tables) are checked here, never trusted: a sequence
// whose length is negative or past `len_limit` (the table's capacity, or what the splits cover),
// or that names a page outside [0, num_blocks), reads nothing past the cache and gets NaN in every
// output element of its heads. A sequence of length 0 gets zeros.

namespace kjit_paged {

constexpr int VEC = 8; // elements of a row per thread and load

// Neither compiler defines INFINITY and NAN for device code on every release.
__device__ inline float infinity() { return __int_as_float(0x7f800000); }
__device__ inline float not_a_number() { return __int_as_float(0x7fc00000); }

// 8 elements of a K or V row as floats. fp8 e4m3fn without an fp8 type (hiprtc has none) and in
// integer instructions alone (a conversion instruction per element would cost as much as the
// element's GROUP multiply-adds): a byte's sign moved to the float's sign bit and its exponent and
// mantissa to the bottom of the float's exponent and the top of its mantissa make a float of the
// e4m3 value times 2^-120 exactly, subnormals included (as float subnormals, which the kernel's
// multiply-adds keep: no flush to zero). FP8_UNIT undoes the 2^-120 on the scores and the output.
constexpr float FP8_UNIT = 0x1p120f;
template <int KV_FP8, typename C> __device__ inline void load_row(const C *p, float (&f)[VEC]) {
  if (KV_FP8) {
    const kjit::Vec<unsigned, 2> bytes = kjit::load_vec<2>(reinterpret_cast<const unsigned *>(p));
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      // Byte i at the top, then an arithmetic shift: the sign fills bits 31..27 and the byte's
      // other 7 bits land at 26..20; the mask keeps the sign and those 7.
      const int top = static_cast<int>(bytes.at[i / 4] << (24 - 8 * (i % 4)));
      f[i] = __int_as_float((top >> 4) & static_cast<int>(0x87f00000u));
    }
  } else {
    kjit::to_floats(kjit::load_vec<VEC>(p), f);
  }
}

template <typename T, int KV_FP8> struct CacheElement { typedef T type; };
template <typename T> struct CacheElement<T, 1> { typedef unsigned char type; };

// The asynchronous copy of one Vec (8 or 16 bytes) from global to shared memory, zeros when not
// `valid` (the source is then not read), grouped by commit() and awaited by wait<N>() (all but the
// N most recent groups have landed, and are visible to this thread).
#if KJIT_CUDA && __CUDA_ARCH__ >= 800
template <typename V> __device__ inline void copy_async(V *to, const V *from, bool valid) {
  static_assert(sizeof(V) == 8 || sizeof(V) == 16, "cp.async moves 4, 8 or 16 bytes");
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(to));
  const unsigned bytes = valid ? sizeof(V) : 0u; // the rest of the Vec is filled with zeros
  if (sizeof(V) == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address), "l"(from),
                 "r"(bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(address), "l"(from),
                 "r"(bytes)
                 : "memory");
}
__device__ inline void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ inline void wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#else
template <typename V> __device__ inline void copy_async(V *to, const V *from, bool valid) {
  *to = valid ? *from : V{};
}
__device__ inline void commit() {}
template <int N> __device__ inline void wait() {}
#endif

constexpr int MERGE_THREADS = 256; // paged_attention_merge's largest block

} // namespace kjit_paged

// On NVIDIA, three blocks a multiprocessor where a thread's state fits beside them: q and the
// output (GROUP * LOADS * 8 floats each) and about 4 values a head (max, sum, scores), up to 80
// a tensor. The registers then stay within 168 without spills on sm_90a (GQA 4 with LOADS 2, 6
// with LOADS 1, 1), as before the table entries were looked up a step ahead, which alone took
// GQA 4 to 204 (two blocks); GROUP 8 would spill. (HIP reads the second argument as waves per
// execution unit: 1, its default.)
#if KJIT_CUDA
#define KJIT_DECODE_MIN_BLOCKS(GROUP, LOADS) ((GROUP) * ((LOADS)*8 + 4) <= 80 ? 3 : 1)
#else
#define KJIT_DECODE_MIN_BLOCKS(GROUP, LOADS) 1
#endif
template <typename T, int KV_FP8, int HEAD_DIM, int PAGE, int GROUP, int WARPS, int UNROLL,
          int LOADS, int STAGES>
__global__ void __launch_bounds__(WARPS *KJIT_WARP_SIZE, KJIT_DECODE_MIN_BLOCKS(GROUP, LOADS))
    paged_attention_decode(T *KJIT_RESTRICT out, float *KJIT_RESTRICT partial_out,
                           float *KJIT_RESTRICT partial_lse, const T *KJIT_RESTRICT q,
                           const void *k_cache_bytes, const void *v_cache_bytes,
                           const int *KJIT_RESTRICT block_tables, const int *KJIT_RESTRICT seq_lens,
                           float q_scale_log2, float v_scale, int q_heads, int kv_heads,
                           int num_blocks, int max_blocks, int partition, int len_limit) {
  using namespace kjit_paged;
  typedef typename CacheElement<T, KV_FP8>::type C;
  typedef kjit::Vec<C, VEC> Chunk;     // one load: 16 bytes, 8 for fp8
  constexpr int DIMS = LOADS * VEC;    // elements of a row per thread, in LOADS loads
  constexpr int TPT = HEAD_DIM / DIMS; // threads per token row
  static_assert(HEAD_DIM % DIMS == 0 && KJIT_WARP_SIZE % TPT == 0, "HEAD_DIM: 64 or 128");
  static_assert(STAGES >= 2, "the ring needs a step in flight beside the one computed");
  constexpr int THREADS = WARPS * KJIT_WARP_SIZE;
  constexpr int LANES = THREADS / TPT;      // tokens the block reads per UNROLL slice of a step
  constexpr int STEP = UNROLL * LANES;      // tokens per step
  constexpr int SLOTS = 2 * UNROLL * LOADS; // a thread's Chunks per step: K, then V
  // The ring, and after the loop the warps' states for the final merge, in one buffer.
  struct Merge {
    int any_bad;
    float m[WARPS][GROUP], l[WARPS][GROUP], acc[WARPS][GROUP][HEAD_DIM];
  };
#if KJIT_CUDA
  // Dynamic shared memory of the host's paged_attention_shared_bytes (this ring or the Merge,
  // whichever is larger), which may pass 48 KiB: the bytes in flight per block bound the stream.
  extern __shared__ __align__(16) unsigned char storage[];
#else
  // AMD (and the CPU emulator): static, within 48 KiB.
  constexpr int RING_BYTES = STAGES * SLOTS * THREADS * static_cast<int>(sizeof(Chunk));
  constexpr int BYTES =
      RING_BYTES > static_cast<int>(sizeof(Merge)) ? RING_BYTES : static_cast<int>(sizeof(Merge));
  static_assert(BYTES <= 48 * 1024, "the ring must fit 48 KiB of static shared memory");
  alignas(16) __shared__ unsigned char storage[BYTES];
#endif
  // Slot (stage, s) of thread t: consecutive threads read consecutive Chunks (no bank conflict).
  Chunk *ring = reinterpret_cast<Chunk *>(storage);
  Merge &merge = *reinterpret_cast<Merge *>(storage);
  const C *k_cache = static_cast<const C *>(k_cache_bytes);
  const C *v_cache = static_cast<const C *>(v_cache_bytes);

  const int ratio = q_heads / kv_heads;
  const int chunks = (ratio + GROUP - 1) / GROUP;
  const int kv_head = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const int seq = blockIdx.y, split = blockIdx.z, splits = gridDim.z;
  const int first_head = kv_head * ratio + chunk * GROUP;
  const int heads_here = ratio - chunk * GROUP < GROUP ? ratio - chunk * GROUP : GROUP;
  const int lane = threadIdx.x / TPT, sub = threadIdx.x % TPT;

  const int len = seq_lens[seq];
  bool bad = len < 0 || len > len_limit;
  const int begin = split * partition;
  const int end = bad ? begin : len < begin + partition ? len : begin + partition;
  // The tokens whose pages may be read before the length has arrived: the table holds len_limit
  // tokens' entries (the host checks it), so the first steps' table loads go out beside seq_lens'.
  const int reach = len_limit < begin + partition ? len_limit : begin + partition;

  const int *table = block_tables + static_cast<long long>(seq) * max_blocks;
  const long long token_stride = static_cast<long long>(kv_heads) * HEAD_DIM;
  const long long column = static_cast<long long>(kv_head) * HEAD_DIM + sub * VEC;
  // The table entries of this thread's tokens of the next step to fetch, loaded a step before
  // their copies start: the copies then never wait for a table load.
  int pages[UNROLL];
  const auto look_up = [&](int step) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int token = step + u * LANES + lane;
      pages[u] = token < reach ? table[token / PAGE] : 0;
    }
  };
  // Starts the copies of the step at `step` (whose entries look_up loaded) into ring stage
  // `stage`, then looks up the next step's; a token past `end` or on a bad page is zeros (its
  // weight is 0, and 0 * NaN would be NaN).
  const auto fetch = [&](int stage, int step) {
    Chunk *slots = ring + stage * SLOTS * THREADS + threadIdx.x;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int token = step + u * LANES + lane;
      int page = pages[u];
      bool valid = token < end;
      if (page < 0 || page >= num_blocks) {
        bad = bad || valid; // an entry past the sequence is never read, whatever it holds
        valid = false;
        page = 0;
      }
      const long long at =
          (static_cast<long long>(page) * PAGE + token % PAGE) * token_stride + column;
      const Chunk *k = reinterpret_cast<const Chunk *>(k_cache + at);
      const Chunk *v = reinterpret_cast<const Chunk *>(v_cache + at);
#pragma unroll
      for (int c = 0; c < LOADS; ++c) {
        copy_async(slots + (u * LOADS + c) * THREADS, k + c * TPT, valid);
        copy_async(slots + ((UNROLL + u) * LOADS + c) * THREADS, v + c * TPT, valid);
      }
    }
    commit();
    look_up(step + STEP);
  };
  // The first STAGES - 1 steps' copies go out before q is read.
  look_up(begin);
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s)
    fetch(s, begin + s * STEP);
  kjit::let_dependents_start();

  // Chunk c of a thread holds elements (c * TPT + sub) * VEC ... + VEC of the row, so that each
  // load of the TPT threads of a token reads TPT * VEC contiguous elements.
  float qf[GROUP][DIMS];
#pragma unroll
  for (int j = 0; j < GROUP; ++j) {
#pragma unroll
    for (int c = 0; c < LOADS; ++c) {
      float part[VEC] = {};
      if (j < heads_here) {
        const T *row = q + (static_cast<long long>(seq) * q_heads + first_head + j) * HEAD_DIM;
        kjit::to_floats(kjit::load_vec<VEC>(row + (c * TPT + sub) * VEC), part);
      }
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        qf[j][c * VEC + e] = part[e] * q_scale_log2;
    }
  }

  // The running state of this thread's token lane: max and sum of the scores (log2 domain) and
  // the output's DIMS elements, for each head of the group. -1e30 rather than -inf as the start,
  // so that a lane that saw no token rescales by exp2(0), never by exp2(-inf + inf).
  float m[GROUP], l[GROUP], acc[GROUP][DIMS];
#pragma unroll
  for (int j = 0; j < GROUP; ++j) {
    m[j] = -1e30f;
    l[j] = 0.0f;
#pragma unroll
    for (int e = 0; e < DIMS; ++e)
      acc[j][e] = 0.0f;
  }

  int stage = 0;
  for (int step = begin; step < end; step += STEP) {
    // This step's copies have landed once at most STAGES - 2 younger groups are pending. Then
    // the copies STAGES - 1 steps ahead go into the stage the previous step read (this thread's
    // own reads of it are done: they were issued before, and the asm's memory clobbers keep them
    // there).
    wait<STAGES - 2>();
    fetch(stage == 0 ? STAGES - 1 : stage - 1, step + (STAGES - 1) * STEP);
    const Chunk *slots = ring + stage * SLOTS * THREADS + threadIdx.x;
    float s[UNROLL][GROUP];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float kf[DIMS];
#pragma unroll
      for (int c = 0; c < LOADS; ++c)
        load_row<KV_FP8>(slots[(u * LOADS + c) * THREADS].at,
                         *reinterpret_cast<float(*)[VEC]>(kf + c * VEC));
      const bool valid = step + u * LANES + lane < end;
#pragma unroll
      for (int j = 0; j < GROUP; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < DIMS; ++e)
          dot += qf[j][e] * kf[e];
#pragma unroll
        for (int mask = TPT / 2; mask > 0; mask /= 2)
          dot += kjit::shuffle_xor(dot, mask);
        s[u][j] = valid ? (KV_FP8 ? dot * FP8_UNIT : dot) : -kjit_paged::infinity();
      }
    }
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
      float top = m[j];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        top = fmaxf(top, s[u][j]);
      // The state is rescaled only when the running max grows, which after a sequence's first
      // tokens is rare: most steps skip DIMS multiplications a head.
      if (top > m[j]) {
        const float alpha = kjit::fast_exp2(m[j] - top);
        m[j] = top;
        l[j] *= alpha;
#pragma unroll
        for (int e = 0; e < DIMS; ++e)
          acc[j][e] *= alpha;
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u)
        s[u][j] = kjit::fast_exp2(s[u][j] - top);
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      float vf[DIMS];
#pragma unroll
      for (int c = 0; c < LOADS; ++c)
        load_row<KV_FP8>(slots[((UNROLL + u) * LOADS + c) * THREADS].at,
                         *reinterpret_cast<float(*)[VEC]>(vf + c * VEC));
#pragma unroll
      for (int j = 0; j < GROUP; ++j) {
        l[j] += s[u][j];
#pragma unroll
        for (int e = 0; e < DIMS; ++e)
          acc[j][e] += s[u][j] * vf[e];
      }
    }
    stage = stage == STAGES - 1 ? 0 : stage + 1;
  }

  // The token lanes of a warp that hold the same columns (equal `sub`) merge by shuffles.
#pragma unroll
  for (int mask = TPT; mask < KJIT_WARP_SIZE; mask *= 2) {
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
      const float other_m = kjit::shuffle_xor(m[j], mask);
      const float other_l = kjit::shuffle_xor(l[j], mask);
      const float top = fmaxf(m[j], other_m);
      const float a = kjit::fast_exp2(m[j] - top), b = kjit::fast_exp2(other_m - top);
      m[j] = top;
      l[j] = l[j] * a + other_l * b;
#pragma unroll
      for (int e = 0; e < DIMS; ++e)
        acc[j][e] = acc[j][e] * a + kjit::shuffle_xor(acc[j][e], mask) * b;
    }
  }

  // Then the warps, through shared memory once every thread's copies (the last, empty steps' too)
  // have landed and every thread is past the ring: warp w's first TPT lanes hold its state.
  wait<0>();
  __syncthreads();
  if (threadIdx.x == 0)
    merge.any_bad = 0;
  const int warp = threadIdx.x / KJIT_WARP_SIZE;
  if (threadIdx.x % KJIT_WARP_SIZE < TPT) {
#pragma unroll
    for (int j = 0; j < GROUP; ++j) {
      if (sub == 0) {
        merge.m[warp][j] = m[j];
        merge.l[warp][j] = l[j];
      }
#pragma unroll
      for (int c = 0; c < LOADS; ++c)
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          merge.acc[warp][j][(c * TPT + sub) * VEC + e] = acc[j][c * VEC + e];
    }
  }
  __syncthreads();
  if (bad)
    merge.any_bad = 1;
  __syncthreads();
  const bool failed = merge.any_bad != 0;
  for (int i = threadIdx.x; i < heads_here * HEAD_DIM; i += blockDim.x) {
    const int j = i / HEAD_DIM, d = i % HEAD_DIM;
    float top = merge.m[0][j];
#pragma unroll
    for (int w = 1; w < WARPS; ++w)
      top = fmaxf(top, merge.m[w][j]);
    float sum = 0.0f, value = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float weight = kjit::fast_exp2(merge.m[w][j] - top);
      sum += merge.l[w][j] * weight;
      value += merge.acc[w][j][d] * weight;
    }
    const float result = failed       ? kjit_paged::not_a_number()
                         : sum > 0.0f ? (KV_FP8 ? value * FP8_UNIT : value) / sum * v_scale
                                      : 0.0f;
    const long long row = static_cast<long long>(seq) * q_heads + first_head + j;
    if (splits == 1) {
      out[row * HEAD_DIM + d] = kjit::from_float<T>(result);
    } else {
      const long long at = row * splits + split;
      partial_out[at * HEAD_DIM + d] = result;
      if (d == 0)
        partial_lse[at] = failed       ? kjit_paged::not_a_number()
                          : sum > 0.0f ? top + log2f(sum)
                                       : -kjit_paged::infinity();
    }
  }
}

// Combines the splits of each (sequence, q head) row, a block per row: out = sum_s w_s partial_s /
// sum_s w_s with w_s = 2^(lse_s - max lse). A split that saw no token (lse -inf) weighs 0; a NaN
// (a bad table) makes the row NaN. The merge is latency-bound (at batch 1, a few dozen rows of a
// few kilobytes each), so its loads go out at once: the block's threads are HEAD_DIM / 4 columns
// of 4 floats times blockDim.x / (HEAD_DIM / 4) groups of splits (the host gives as many groups
// as splits, up to MERGE_THREADS threads), and each thread loads its first AHEAD splits' values
// before the block reduces the max over the log2-sum-exps; the groups' sums then meet in shared
// memory. (A block of HEAD_DIM threads, each summing its column over every split with 8 splits'
// loads in flight, took 4.6 us for 32 splits at batch 1 on the H200, this 3.7; but with 256
// threads for 3 splits, 9.8 us at batch 64 against 4.7.)
template <typename T, int HEAD_DIM>
__global__ void __launch_bounds__(kjit_paged::MERGE_THREADS)
    paged_attention_merge(T *KJIT_RESTRICT out, const float *KJIT_RESTRICT partial_out,
                          const float *KJIT_RESTRICT partial_lse, int splits) {
  using namespace kjit_paged;
  constexpr int COLUMNS = HEAD_DIM / 4;
  constexpr int MOST_GROUPS = MERGE_THREADS / COLUMNS;
  constexpr int AHEAD = 8;
  kjit::wait_for_previous_grid(); // the decode's partial results
  const long long row = blockIdx.x;
  const int groups = static_cast<int>(blockDim.x) / COLUMNS;
  const int column = threadIdx.x % COLUMNS, group = threadIdx.x / COLUMNS;
  const float *lse = partial_lse + row * splits;
  const float *part = partial_out + row * splits * HEAD_DIM + column * 4;
  kjit::Vec<float, 4> early[AHEAD];
  float early_lse[AHEAD];
#pragma unroll
  for (int k = 0; k < AHEAD; ++k) {
    const int s = group + k * groups;
    if (s < splits) {
      early[k] = kjit::load_vec<4>(part + static_cast<long long>(s) * HEAD_DIM);
      early_lse[k] = lse[s];
    }
  }
  float top = -infinity(), failed = 0.0f;
  for (int s = threadIdx.x; s < splits; s += blockDim.x) {
    const float x = lse[s];
    if (x != x)
      failed = 1.0f;
    else
      top = fmaxf(top, x);
  }
  top = kjit::block_max(top);
  failed = kjit::block_max(failed);
  float sum = 0.0f, value[4] = {};
  const auto add = [&](float x, const kjit::Vec<float, 4> &p) {
    const float weight = x == -infinity() ? 0.0f : kjit::fast_exp2(x - top);
    sum += weight;
#pragma unroll
    for (int e = 0; e < 4; ++e)
      value[e] += weight * p.at[e];
  };
#pragma unroll
  for (int k = 0; k < AHEAD; ++k)
    if (group + k * groups < splits)
      add(early_lse[k], early[k]);
  for (int s = group + AHEAD * groups; s < splits; s += groups)
    add(lse[s], kjit::load_vec<4>(part + static_cast<long long>(s) * HEAD_DIM));
  __shared__ float values[MOST_GROUPS][HEAD_DIM], sums[MOST_GROUPS];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    values[group][column * 4 + e] = value[e];
  if (column == 0)
    sums[group] = sum;
  __syncthreads();
  // The block may be narrower than a row (3 groups of 32 columns: 96 threads for 128 elements).
  for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {
    float total = 0.0f, result = 0.0f;
    for (int g = 0; g < groups; ++g) {
      total += sums[g];
      result += values[g][d];
    }
    out[row * HEAD_DIM + d] = kjit::from_float<T>(failed != 0.0f ? not_a_number()
                                                  : total > 0.0f ? result / total
                                                                 : 0.0f);
  }
}
