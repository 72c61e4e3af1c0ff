#include "kjit/ops/paged_attention.hpp"

#include "kjit/log.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "paged_attention_plan.hpp"
#include "paged_tables.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "paged_attention_decode";

// A split reads at least this many tokens: fewer and the merge's traffic and the blocks'
// start-up stop being small beside the split's own reads.
constexpr int min_partition = 256;
// What a block costs beside its tokens (q, the ring's first copies, the final merge), in tokens,
// a split launch's merge (a second kernel, the partial results written and read) as a fraction of
// the decode's time, and each split's share of the merge's reads and of the blocks' start-up, in
// tokens: the values that pick the fastest split count of the H200 sweeps in BENCHMARKS.md at
// batch 64 x 4k (3 splits), 256 x 1k (none) and 1 x 32k (32: two blocks a multiprocessor in one
// wave read as fast as three, and the merge has fewer splits to read).
constexpr int block_overhead = 64;
constexpr double merge_cost = 0.05;
constexpr int split_cost = 32;

int capacity(const PagedKvCache &cache, const DecodeBatch &batch) {
  return batch.max_blocks * cache.page_size; // checked below INT_MAX
}

int max_len(const PagedKvCache &cache, const DecodeBatch &batch) {
  return batch.max_seq_len > 0 ? batch.max_seq_len : capacity(cache, batch);
}

std::string to_string(std::int64_t value) { return std::to_string(value); }

void check_shape(int q_heads, const PagedKvCache &cache, const DecodeBatch &batch) {
  detail::require(batch.batch > 0 && q_heads > 0 && cache.kv_heads > 0 && cache.num_blocks > 0 &&
                      batch.max_blocks > 0,
                  op, "batch, q_heads, kv_heads, num_blocks and max_blocks must be positive");
  detail::require(q_heads % cache.kv_heads == 0, op, [&] {
    return "q_heads " + to_string(q_heads) + " is not a multiple of kv_heads " +
           to_string(cache.kv_heads);
  });
  detail::require(cache.head_dim == 64 || cache.head_dim == 128, op, [&] {
    return "head_dim " + to_string(cache.head_dim) + " is not supported (64 or 128)";
  });
  detail::require(cache.page_size == 16 || cache.page_size == 32, op, [&] {
    return "page_size " + to_string(cache.page_size) + " is not supported (16 or 32)";
  });
  detail::require(std::int64_t{batch.max_blocks} * cache.page_size <= INT_MAX, op,
                  "max_blocks * page_size must be below 2^31 tokens");
  detail::require(batch.max_seq_len >= 0 && batch.max_seq_len <= capacity(cache, batch), op, [&] {
    return "max_seq_len " + to_string(batch.max_seq_len) + " is past the tables' capacity of " +
           to_string(capacity(cache, batch)) + " tokens (max_blocks " +
           to_string(batch.max_blocks) + " x page_size " + to_string(cache.page_size) + ")";
  });
}

} // namespace

namespace detail {

DecodePlan decode_variant(int warp_size, int q_heads, int kv_heads, bool fp8) {
  DecodePlan plan{};
  const int ratio = q_heads / kv_heads;
  plan.chunks = divide_up(ratio, 8);
  plan.group = divide_up(ratio, plan.chunks);
  // WARPS 4, UNROLL 2, LOADS 2: the fastest of the sweep in BENCHMARKS.md ("Paged decode
  // attention") at GQA 4 at every batch measured. A group past 4 heads keeps LOADS 1: q and the
  // output take 2 * GROUP * 8 * LOADS registers a thread.
  plan.warps = 4;
  plan.unroll = 2;
  plan.loads = plan.group <= 4 ? 2 : 1;
  // As deep a ring as 48 KiB holds, up to 4 steps (on the H100 a ring of 64 KiB, 4 steps of
  // GQA 4, read batch 1 x 32k 2.5% slower than 3 steps and the other shapes alike: BENCHMARKS.md;
  // a deeper ring comes from the tuning table, up to decode_ring_limit); a wave-64 target (whose
  // copies are plain loads) takes the shallowest, with one token a step if need be.
  constexpr int limit = 48 * 1024;
  plan.stages = 2;
  if (decode_ring_bytes(plan, warp_size, fp8) > limit)
    plan.unroll = 1;
  if (warp_size == 32)
    while (plan.stages < 4 &&
           decode_ring_bytes(plan, warp_size, fp8) / plan.stages * (plan.stages + 1) <= limit)
      ++plan.stages;
  plan.splits = 1;
  return plan;
}

int decode_ring_bytes(const DecodePlan &plan, int warp_size, bool fp8) {
  return plan.stages * 2 * plan.unroll * plan.loads * plan.warps * warp_size * (fp8 ? 8 : 16);
}

ParamValues decode_tuning_problem(const DecodePlan &plan, int head_dim, int page_size, bool fp8) {
  return {
      {"GROUP", plan.group}, {"HEAD_DIM", head_dim}, {"KV_FP8", fp8 ? 1 : 0}, {"PAGE", page_size}};
}

ParamValues decode_tuning_extents(int batch, int max_len) {
  return {{"batch", rows_bucket(batch)}, {"context", rows_bucket(max_len)}};
}

DecodePlan tuned_decode_variant(const DecodePlan &plan, const std::optional<TimedVariant> &winner,
                                int warp_size, bool nvidia, bool fp8) {
  if (!winner)
    return plan;
  DecodePlan tuned = plan;
  tuned.warps = winner_value(*winner, "WARPS", 0);
  tuned.unroll = winner_value(*winner, "UNROLL", 0);
  tuned.loads = winner_value(*winner, "LOADS", 0);
  tuned.stages = winner_value(*winner, "STAGES", 0);
  const bool complete = tuned.warps > 0 && tuned.unroll > 0 && tuned.loads > 0 && tuned.stages > 0;
  return complete && decode_ring_bytes(tuned, warp_size, fp8) <= decode_ring_limit(nvidia) ? tuned
                                                                                           : plan;
}

int decode_ring_limit(bool nvidia) { return nvidia ? 64 * 1024 : 48 * 1024; }

int decode_shared_bytes(const DecodePlan &plan, bool nvidia, bool fp8, int head_dim) {
  if (!nvidia)
    return 0;
  // Merge: a flag, then each warp's max, sum and head_dim outputs for each head of the group.
  const int merge = 4 + plan.warps * plan.group * (2 + head_dim) * 4;
  return std::max(decode_ring_bytes(plan, 32, fp8), merge);
}

int resident_blocks(int registers, int threads, int shared_bytes) {
  const int warps = divide_up(threads, 32);
  // Registers go to warps in units of 256, from four quarters of 16384.
  const int warp_registers = divide_up(std::max(registers, 1) * 32, 256) * 256;
  const int by_registers = 16384 / warp_registers * 4 / warps;
  const int by_shared = 228 * 1024 / (shared_bytes + 1024);
  return std::max(1, std::min({by_registers, by_shared, 2048 / threads, 32}));
}

int merge_threads(int splits, int head_dim, int warp_size) {
  // attention_decode.hip's MERGE_THREADS; a group of splits is head_dim / 4 threads.
  constexpr int most_threads = 256;
  const int columns = head_dim / 4;
  const int whole = std::max(1, warp_size / columns); // groups that make whole warps
  const int groups = std::min(most_threads / columns, divide_up(splits, whole) * whole);
  return groups * columns;
}

void split_decode(DecodePlan &plan, int multiprocessors, int resident, int batch, int q_heads,
                  int kv_heads, int head_dim, int max_len, bool may_split) {
  const std::int64_t blocks = std::int64_t{batch} * kv_heads * plan.chunks;
  const std::int64_t slots = std::int64_t{std::max(multiprocessors, 1)} * std::max(resident, 1);
  const int len = std::max(max_len, 1);
  // The time of a choice: whole waves of blocks, each its partition plus its overhead.
  const auto cost = [&](int partition, int splits) {
    const std::int64_t waves = (blocks * splits + slots - 1) / slots;
    return splits == 1
               ? static_cast<double>(waves) * (partition + block_overhead)
               : static_cast<double>(waves) * (partition + block_overhead) * (1 + merge_cost) +
                     static_cast<double>(splits) * split_cost;
  };
  plan.splits = 1;
  plan.partition = len;
  double best = cost(len, 1);
  const int most = may_split ? std::min(len / min_partition, 1024) : 1;
  for (int wanted = 2; wanted <= most; ++wanted) {
    // Partitions of whole 64-token steps (a multiple of every page size and step).
    const int partition = divide_up(divide_up(len, wanted), 64) * 64;
    const int splits = divide_up(len, partition);
    if (splits > 1 && cost(partition, splits) < best) {
      best = cost(partition, splits);
      plan.splits = splits;
      plan.partition = partition;
    }
  }
  plan.workspace_bytes = plan.splits > 1
                             ? static_cast<std::size_t>(batch) * q_heads * plan.splits *
                                   (static_cast<std::size_t>(head_dim) + 1) * sizeof(float)
                             : 0;
}

} // namespace detail

namespace {

const Template &decode_template() {
  static const Template &decode = templates::find("paged_attention_decode");
  return decode;
}

// What a decode shape launches through one Runtime: its variant (the tuning table's winner, else
// the heuristic's), the kernel, the blocks a multiprocessor holds and the dynamic shared memory,
// chosen once per thread and then found again on every call; split_decode follows per call.
struct DecodeLaunch {
  detail::DecodePlan plan;
  const Kernel *kernel;
  int resident;
  unsigned shared_bytes;
};

struct DecodeKey {
  std::uint64_t runtime;
  std::string_view element; // element_name<T>()'s: static strings
  bool fp8;
  int head_dim, page_size, q_heads, kv_heads;
  std::int64_t batch_bucket, len_bucket; // the tuning extents
  bool operator==(const DecodeKey &) const = default;
};

struct DecodeKeyHash {
  std::size_t operator()(const DecodeKey &key) const {
    return detail::hash_key(
        key.runtime,
        {std::hash<std::string_view>()(key.element),
         static_cast<std::uint64_t>(key.fp8 * 1024 + key.head_dim * 64 + key.page_size),
         static_cast<std::uint64_t>(key.q_heads) << 32 | static_cast<std::uint32_t>(key.kv_heads),
         static_cast<std::uint64_t>(key.batch_bucket), static_cast<std::uint64_t>(key.len_bucket)});
  }
};

// The launch of `plan`'s variant: its kernel for `element`, compiled (or found), allowed its
// shared memory.
DecodeLaunch make_decode_launch(Runtime &rt, std::string_view element, const PagedKvCache &cache,
                                const detail::DecodePlan &plan) {
  const jit::Target &target = rt.default_device().target();
  const bool fp8 = cache.format == KvCacheFormat::fp8_e4m3;
  const bool nvidia = target.vendor() == Vendor::nvidia;
  const auto variant = [&](std::string_view type) -> const Kernel & {
    return rt.kernel(decode_template(), {{"T", type},
                                         {"KV_FP8", fp8 ? 1 : 0},
                                         {"HEAD_DIM", cache.head_dim},
                                         {"PAGE", cache.page_size},
                                         {"GROUP", plan.group},
                                         {"WARPS", plan.warps},
                                         {"UNROLL", plan.unroll},
                                         {"LOADS", plan.loads},
                                         {"STAGES", plan.stages}});
  };
  const auto shared_bytes =
      static_cast<unsigned>(detail::decode_shared_bytes(plan, nvidia, fp8, cache.head_dim));
  // The split count follows the registers of the bfloat16 variant whatever the element type, so
  // that paged_attention_workspace_bytes, which knows no type, sizes every call's workspace.
  const int warp = target.warp_size();
  const int resident = detail::resident_blocks(
      variant("bfloat16").registers(), plan.warps * warp,
      std::max<int>(shared_bytes, detail::decode_ring_bytes(plan, warp, fp8)));
  const Kernel &kernel = variant(element);
  kernel.allow_shared_bytes(shared_bytes);
  return {plan, &kernel, resident, shared_bytes};
}

// The tuning table's variant for the shape, else the heuristic's. A record whose variant does not
// build is logged and the heuristic used instead: the table is shared, untrusted input.
DecodeLaunch choose_decode(Runtime &rt, std::string_view element, int q_heads,
                           const PagedKvCache &cache, const DecodeBatch &batch) {
  const jit::Target &target = rt.default_device().target();
  const bool fp8 = cache.format == KvCacheFormat::fp8_e4m3;
  const bool nvidia = target.vendor() == Vendor::nvidia;
  const detail::DecodePlan heuristic =
      detail::decode_variant(target.warp_size(), q_heads, cache.kv_heads, fp8);
  const detail::DecodePlan tuned = detail::tuned_decode_variant(
      heuristic,
      detail::tuned_winner(
          rt, decode_template(),
          detail::decode_tuning_problem(heuristic, cache.head_dim, cache.page_size, fp8),
          detail::decode_tuning_extents(batch.batch, max_len(cache, batch))),
      target.warp_size(), nvidia, fp8);
  const bool same = tuned.warps == heuristic.warps && tuned.unroll == heuristic.unroll &&
                    tuned.loads == heuristic.loads && tuned.stages == heuristic.stages;
  try {
    return make_decode_launch(rt, element, cache, tuned);
  } catch (const Error &error) {
    if (same)
      throw;
    log().warn("the tuned paged_attention_decode variant does not build ({}); using the "
               "heuristic's",
               error.summary());
  }
  return make_decode_launch(rt, element, cache, heuristic);
}

// This thread's launch for the call's shape, with its split count.
DecodeLaunch plan_decode(Runtime &rt, std::string_view element, int q_heads,
                         const PagedKvCache &cache, const DecodeBatch &batch, bool may_split) {
  thread_local std::unordered_map<DecodeKey, DecodeLaunch, DecodeKeyHash> launches;
  const int len = max_len(cache, batch);
  const DecodeKey key{rt.id(),
                      element,
                      cache.format == KvCacheFormat::fp8_e4m3,
                      cache.head_dim,
                      cache.page_size,
                      q_heads,
                      cache.kv_heads,
                      detail::rows_bucket(batch.batch),
                      detail::rows_bucket(len)};
  auto found = launches.find(key);
  if (found == launches.end())
    found = launches.emplace(key, choose_decode(rt, element, q_heads, cache, batch)).first;
  DecodeLaunch launch = found->second;
  detail::split_decode(launch.plan, rt.default_device().multiprocessors(), launch.resident,
                       batch.batch, q_heads, cache.kv_heads, cache.head_dim, len, may_split);
  return launch;
}

} // namespace

std::size_t paged_attention_workspace_bytes(Runtime &rt, int q_heads, const PagedKvCache &cache,
                                            const DecodeBatch &batch) {
  check_shape(q_heads, cache, batch);
  return plan_decode(rt, "bfloat16", q_heads, cache, batch, true).plan.workspace_bytes;
}

namespace detail {

void check_page_tables(std::span<const std::int32_t> block_tables,
                       std::span<const std::int32_t> lens, int max_blocks, int page_size,
                       int num_blocks, int max_len, std::string_view op,
                       std::string_view lens_name) {
  require(max_blocks > 0 && page_size > 0 && block_tables.size() == lens.size() * max_blocks, op,
          "block_tables must hold max_blocks entries per sequence");
  const std::int64_t limit = max_len > 0 ? max_len : std::int64_t{max_blocks} * page_size;
  for (std::size_t s = 0; s < lens.size(); ++s) {
    const std::int32_t len = lens[s];
    require(len >= 0 && len <= limit, op, [&] {
      return std::string(lens_name) + "[" + to_string(static_cast<std::int64_t>(s)) + "] is " +
             to_string(len) + ", outside [0, " + to_string(limit) + "]";
    });
    for (int b = 0; b < divide_up(len, page_size); ++b) {
      const std::int32_t page = block_tables[s * max_blocks + b];
      require(page >= 0 && page < num_blocks, op, [&] {
        return "block_tables[" + to_string(static_cast<std::int64_t>(s)) + "][" + to_string(b) +
               "] is " + to_string(page) + ", past the cache's " + to_string(num_blocks) +
               " blocks";
      });
    }
  }
}

void check_device_page_tables(const Device &device, const std::int32_t *block_tables,
                              const std::int32_t *lens, int batch, int max_blocks, int page_size,
                              int num_blocks, int max_len, std::string_view op,
                              std::string_view lens_name) {
  std::vector<std::int32_t> host_tables(static_cast<std::size_t>(batch) * max_blocks);
  std::vector<std::int32_t> host_lens(batch);
  device.synchronize();
  device.copy_to_host(host_tables.data(), block_tables, host_tables.size() * sizeof(std::int32_t));
  device.copy_to_host(host_lens.data(), lens, host_lens.size() * sizeof(std::int32_t));
  check_page_tables(host_tables, host_lens, max_blocks, page_size, num_blocks, max_len, op,
                    lens_name);
}

} // namespace detail

void check_decode_tables(std::span<const std::int32_t> block_tables,
                         std::span<const std::int32_t> seq_lens, int max_blocks, int page_size,
                         int num_blocks, int max_seq_len) {
  detail::check_page_tables(block_tables, seq_lens, max_blocks, page_size, num_blocks, max_seq_len,
                            op, "seq_lens");
}

template <Element T>
void paged_attention_decode(Runtime &rt, T *out, const T *q, int q_heads, const PagedKvCache &cache,
                            const DecodeBatch &batch, float scale, DecodeWorkspace workspace,
                            Stream stream) {
  static_assert(!std::is_same_v<T, float>, "paged_attention_decode takes Half or BFloat16");
  detail::require_pointer(out, op, "out");
  detail::require_pointer(q, op, "q");
  detail::require_pointer(cache.k, op, "k cache");
  detail::require_pointer(cache.v, op, "v cache");
  detail::require_pointer(batch.block_tables, op, "block_tables");
  detail::require_pointer(batch.seq_lens, op, "seq_lens");
  check_shape(q_heads, cache, batch);
  const bool fp8 = cache.format == KvCacheFormat::fp8_e4m3;
  detail::require(std::isfinite(scale), op, "scale is not finite");
  detail::require(!fp8 || (cache.k_scale > 0 && std::isfinite(cache.k_scale) && cache.v_scale > 0 &&
                           std::isfinite(cache.v_scale)),
                  op, "the fp8 cache's k_scale and v_scale must be positive and finite");
  // Every load is 8 elements: 16 bytes (8 for fp8) at multiples of that in each row.
  detail::require(detail::aligned(q, 16) && detail::aligned(out, 16), op,
                  "q and out must be 16-byte aligned");
  detail::require(
      detail::aligned(cache.k, fp8 ? 8 : 16) && detail::aligned(cache.v, fp8 ? 8 : 16), op,
      fp8 ? "the fp8 caches must be 8-byte aligned" : "the caches must be 16-byte aligned");
  const int len = max_len(cache, batch);
  const Device &device = rt.default_device();
  if (batch.validate)
    detail::check_device_page_tables(device, batch.block_tables, batch.seq_lens, batch.batch,
                                     batch.max_blocks, cache.page_size, cache.num_blocks, len, op,
                                     "seq_lens");
  const DecodeLaunch launch =
      plan_decode(rt, element_name<T>(), q_heads, cache, batch, workspace.data != nullptr);
  const detail::DecodePlan &plan = launch.plan;
  detail::require(workspace.bytes >= plan.workspace_bytes, op, [&] {
    return "the workspace holds " + to_string(static_cast<std::int64_t>(workspace.bytes)) +
           " bytes, this shape needs " +
           to_string(static_cast<std::int64_t>(plan.workspace_bytes)) +
           " (paged_attention_workspace_bytes)";
  });
  const Kernel &kernel = *launch.kernel;
  // Scores in the log2 domain; an fp8 cache's scales apply to the scores and the output.
  constexpr float log2e = 1.4426950408889634f;
  const float k_factor = fp8 ? cache.k_scale : 1.0f;
  const float v_factor = fp8 ? cache.v_scale : 1.0f;
  float *partial_out = static_cast<float *>(workspace.data);
  float *partial_lse = plan.splits > 1 ? partial_out + static_cast<std::size_t>(batch.batch) *
                                                           q_heads * plan.splits * cache.head_dim
                                       : nullptr;
  const Dim3 grid(static_cast<unsigned>(cache.kv_heads * plan.chunks),
                  static_cast<unsigned>(batch.batch), static_cast<unsigned>(plan.splits));
  const int warp = device.target().warp_size();
  kernel.launch({.grid = grid,
                 .block = static_cast<unsigned>(plan.warps * warp),
                 .shared_bytes = launch.shared_bytes,
                 .stream = stream},
                out, partial_out, partial_lse, q, static_cast<const void *>(cache.k),
                static_cast<const void *>(cache.v), batch.block_tables, batch.seq_lens,
                scale * log2e * k_factor, v_factor, q_heads, cache.kv_heads, cache.num_blocks,
                batch.max_blocks, plan.partition, len);
  if (plan.splits == 1)
    return;
  static const Template &merge = templates::find("paged_attention_merge");
  rt.kernel(merge, {{"T", element_name<T>()}, {"HEAD_DIM", cache.head_dim}})
      .launch(
          {.grid = static_cast<unsigned>(batch.batch * q_heads),
           .block = static_cast<unsigned>(detail::merge_threads(plan.splits, cache.head_dim, warp)),
           .stream = stream,
           // Its launch behind the decode's tail (attention_decode.hip: griddepcontrol).
           .overlap_previous = detail::nvidia_compute_capability(device.target()) >= 90},
          out, static_cast<const float *>(partial_out), static_cast<const float *>(partial_lse),
          plan.splits);
}

namespace reference {

std::vector<double>
paged_attention_decode(std::span<const double> q, std::span<const double> k_cache,
                       std::span<const double> v_cache, std::span<const std::int32_t> block_tables,
                       std::span<const std::int32_t> seq_lens, int q_heads, int kv_heads,
                       int head_dim, int page_size, int max_blocks, double scale) {
  std::vector<double> out(q.size(), 0.0);
  const int ratio = q_heads / kv_heads;
  for (std::size_t s = 0; s < seq_lens.size(); ++s) {
    const int len = seq_lens[s];
    for (int h = 0; h < q_heads; ++h) {
      const double *query = q.data() + (s * q_heads + h) * head_dim;
      // The row of token t of kv head h / ratio in a cache.
      const auto row = [&](int t) {
        const std::int64_t page = block_tables[s * max_blocks + t / page_size];
        return ((page * page_size + t % page_size) * kv_heads + h / ratio) * head_dim;
      };
      std::vector<double> scores(len);
      double top = -std::numeric_limits<double>::infinity();
      for (int t = 0; t < len; ++t) {
        double dot = 0;
        for (int d = 0; d < head_dim; ++d)
          dot += query[d] * k_cache[row(t) + d];
        scores[t] = dot * scale;
        top = std::max(top, scores[t]);
      }
      double sum = 0;
      for (double &score : scores)
        sum += score = std::exp(score - top);
      double *result = out.data() + (s * q_heads + h) * head_dim;
      for (int t = 0; t < len; ++t)
        for (int d = 0; d < head_dim; ++d)
          result[d] += scores[t] / sum * v_cache[row(t) + d];
    }
  }
  return out;
}

} // namespace reference

template void paged_attention_decode<Half>(Runtime &, Half *, const Half *, int,
                                           const PagedKvCache &, const DecodeBatch &, float,
                                           DecodeWorkspace, Stream);
template void paged_attention_decode<BFloat16>(Runtime &, BFloat16 *, const BFloat16 *, int,
                                               const PagedKvCache &, const DecodeBatch &, float,
                                               DecodeWorkspace, Stream);

} // namespace kjit::ops
