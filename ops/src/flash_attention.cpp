#include "kjit/ops/flash_attention.hpp"

#include "flash_attention_mfma.hpp"
#include "flash_attention_variant.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/attention.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "paged_tables.hpp"
#include "plans.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "flash_attention";

void check_shape(const AttentionShape &shape) {
  detail::require_range(shape.batch, 1, 65535, op, "batch");
  detail::require_range(shape.total_q, 1, INT_MAX, op, "total_q");
  detail::require_range(shape.total_k, 1, INT_MAX, op, "total_k");
  detail::require_range(shape.max_seqlen_q, 1, shape.total_q, op, "max_seqlen_q");
  detail::require_range(shape.kv_heads, 1, 65535, op, "kv_heads");
  detail::require_range(shape.q_heads, 1, 65535, op, "q_heads");
  detail::require(shape.q_heads % shape.kv_heads == 0, op, [&] {
    return "q_heads " + std::to_string(shape.q_heads) + " is not a multiple of kv_heads " +
           std::to_string(shape.kv_heads);
  });
  detail::require(shape.head_dim == 64 || shape.head_dim == 128, op, [&] {
    return "head_dim " + std::to_string(shape.head_dim) + " is not supported (64 or 128)";
  });
  detail::require(std::isfinite(shape.scale) && shape.scale > 0, op, [&] {
    return "scale " + std::to_string(shape.scale) + " must be positive and finite";
  });
}

// Whether flash_attention() takes PERSISTENT 1 (a block per multiprocessor walks the items):
// without a mask, and under CAUSAL for sequences up to 4k rows, where the kernel's walk (pairing
// costly tiles with cheap ones) gave 1.04-1.08x a block per tile at 1k and 4k, against 0.75x at
// 16k, where the hardware's scheduler balances the tiles better (H200, BENCHMARKS.md).
bool persistent_walk(const AttentionShape &shape) {
  return !shape.causal || shape.max_seqlen_q <= 4096;
}

// What a variant launches with: its kernel, whether it takes tensor maps (flash_attention) or
// pointers (flash_attention_mma), the rows of q a block takes, the keys of a tile, threads and
// dynamic shared bytes.
struct AttentionPlan {
  const Kernel *kernel;
  bool tensor_maps;
  int block_m, block_n, threads;
  unsigned shared_bytes;
  int grid_limit;      // flash_attention: blocks at most (PERSISTENT 1: the multiprocessors)
  bool page_arguments; // flash_attention_mfma: the pages' arguments follow the pointer kernel's
};

AttentionPlan make_plan(Runtime &rt, const detail::ChosenVariant &variant) {
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  if (variant.tmpl->name() == "flash_attention_mma") // four warps of 16 rows, static shared
    return {&kernel, false, 64, variant.integer("BLOCK_N"), 128, 0, 0, false};
  if (variant.tmpl->name() == "flash_attention_mfma") { // pointers too, static LDS
    const detail::MfmaAttentionGeometry geometry = detail::flash_attention_mfma_geometry(variant);
    return {&kernel, false, geometry.block_m, geometry.block_n, geometry.threads, 0, 0, true};
  }
  const int consumers = variant.integer("CONSUMERS"), block_n = variant.integer("BLOCK_N");
  const auto shared_bytes = static_cast<unsigned>(templates::flash_attention_shared_bytes(
      variant.integer("HEAD_DIM"), consumers, block_n, variant.integer("STAGES"),
      variant.integer("Q_BUFFERS"), variant.integer("STAGE_O")));
  kernel.allow_shared_bytes(shared_bytes);
  return {&kernel,
          true,
          64 * consumers,
          block_n,
          128 * (consumers + 1),
          shared_bytes,
          variant.integer("PERSISTENT") ? kernel.device().multiprocessors() : INT_MAX,
          false};
}

template <Element T>
void check_arguments(T *out, const T *q, const T *k, const T *v, const int *cu_seqlens_q,
                     const int *cu_seqlens_k, const AttentionShape &shape) {
  detail::require_pointer(out, op, "out");
  detail::require_pointer(q, op, "q");
  detail::require_pointer(k, op, "k");
  detail::require_pointer(v, op, "v");
  detail::require_pointer(cu_seqlens_q, op, "cu_seqlens_q");
  detail::require_pointer(cu_seqlens_k, op, "cu_seqlens_k");
  check_shape(shape);
  // Tensor maps need 16-byte aligned bases; the kernel stores out in 4-byte pairs.
  for (const auto &[pointer, name] :
       {std::pair<const void *, const char *>{q, "q"}, {k, "k"}, {v, "v"}, {out, "out"}})
    detail::require(detail::aligned(pointer, 16), op,
                    [&] { return std::string(name) + " is not 16-byte aligned"; });
}

// The kernel's paged arguments: none for contiguous k and v.
struct PageArguments {
  const int *block_tables = nullptr;
  int max_blocks = 0, page_size = 0;
  const void *k_cache = nullptr, *v_cache = nullptr;
};

template <Element T> TensorMapElement tensor_map_element() {
  return std::is_same_v<T, BFloat16> ? TensorMapElement::bfloat16 : TensorMapElement::float16;
}

// [rows, heads * head_dim] matrices read in boxes of box_rows x 64 columns: head h's tile starts at
// column h * head_dim.
template <Element T>
TensorMap head_map(const Device &device, const T *base, std::int64_t rows, int heads, int head_dim,
                   int box_rows) {
  const auto columns = static_cast<std::uint64_t>(heads) * head_dim;
  return encode_tensor_map(device,
                           {tensor_map_element<T>(), base, static_cast<std::uint64_t>(rows),
                            columns, columns * 2, static_cast<std::uint32_t>(box_rows), 64});
}

// Launches the wgmma kernel (a tensor-map plan) over its items: a tile of rows of one head of one
// sequence each.
template <Element T>
void launch_wgmma(const AttentionPlan &plan, T *out, const TensorMap &map_q, const TensorMap &map_k,
                  const TensorMap &map_v, const int *cu_seqlens_q, const int *cu_seqlens_k,
                  const AttentionShape &shape, const PageArguments &pages, Stream stream) {
  const int row_tiles = detail::divide_up(shape.max_seqlen_q, plan.block_m);
  const long long items = static_cast<long long>(row_tiles) * shape.q_heads * shape.batch;
  detail::require(items <= INT_MAX, op, [&] {
    return std::to_string(items) + " tiles of rows (max_seqlen_q / " +
           std::to_string(plan.block_m) + " x q_heads x batch) exceed " + std::to_string(INT_MAX);
  });
  plan.kernel->launch({.grid = static_cast<unsigned>(std::min<long long>(items, plan.grid_limit)),
                       .block = plan.threads,
                       .shared_bytes = plan.shared_bytes,
                       .stream = stream},
                      out, map_q, map_k, map_v, cu_seqlens_q, cu_seqlens_k, shape.total_q,
                      shape.total_k, shape.q_heads, shape.q_heads / shape.kv_heads, row_tiles,
                      shape.batch, shape.scale * 1.4426950408889634f, pages.block_tables,
                      pages.max_blocks, pages.page_size, static_cast<const T *>(pages.k_cache),
                      static_cast<const T *>(pages.v_cache));
}

template <Element T>
void launch_plan(const AttentionPlan &plan, T *out, const T *q, const T *k, const T *v,
                 const int *cu_seqlens_q, const int *cu_seqlens_k, const AttentionShape &shape,
                 Stream stream, const PageArguments &pages = {}) {
  if (!plan.tensor_maps) {
    const int row_tiles = detail::divide_up(shape.max_seqlen_q, plan.block_m);
    const LaunchConfig config{.grid = Dim3(static_cast<unsigned>(row_tiles),
                                           static_cast<unsigned>(shape.q_heads),
                                           static_cast<unsigned>(shape.batch)),
                              .block = plan.threads,
                              .stream = stream};
    const int group = shape.q_heads / shape.kv_heads;
    const float scale_log2 = shape.scale * 1.4426950408889634f;
    if (plan.page_arguments)
      plan.kernel->launch(config, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape.total_q,
                          shape.total_k, shape.q_heads, group, scale_log2, pages.block_tables,
                          pages.max_blocks, pages.page_size);
    else
      plan.kernel->launch(config, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape.total_q,
                          shape.total_k, shape.q_heads, group, scale_log2);
    return;
  }
  const Device &device = plan.kernel->device();
  launch_wgmma(plan, out,
               head_map(device, q, shape.total_q, shape.q_heads, shape.head_dim, plan.block_m),
               head_map(device, k, shape.total_k, shape.kv_heads, shape.head_dim, plan.block_n),
               head_map(device, v, shape.total_k, shape.kv_heads, shape.head_dim, plan.block_n),
               cu_seqlens_q, cu_seqlens_k, shape, {}, stream);
}

} // namespace

namespace detail {

template <Element T>
ChosenVariant flash_attention_variant(const jit::Target &target, const AttentionShape &shape) {
  if (target.vendor() == Vendor::amd) // MFMA; its template refuses targets but gfx942 and gfx950
    return flash_attention_mfma_variant<T>(shape);
  if (target.id() != "sm_90a") { // mma.sync; its template refuses targets before sm_80
    static const Template &tmpl = templates::find("flash_attention_mma");
    return {&tmpl,
            {{"T", element_name<T>()},
             {"HEAD_DIM", shape.head_dim},
             {"CAUSAL", shape.causal ? 1 : 0},
             {"BLOCK_N", 64}}};
  }
  // Two consumer warpgroups of 64 rows taking turns, key tiles of 128 and two stages:
  // FlashAttention-3's 128 x 128 tiles for head dim 128, PERSISTENT as persistent_walk says, and
  // for a persistent walk two q tiles, with which each item's last products overlap the next
  // item's first scores (BENCHMARKS.md, issue 27 pre4), and the output through shared memory
  // and bulk copies at every row (STAGE_O: 1.02-1.04x stores from registers, a block per tile
  // at 16k causal too; issue 27 pre5).
  static const Template &tmpl = templates::find("flash_attention");
  const bool persistent = persistent_walk(shape);
  return {&tmpl,
          {{"T", element_name<T>()},
           {"HEAD_DIM", shape.head_dim},
           {"CAUSAL", shape.causal ? 1 : 0},
           {"CONSUMERS", 2},
           {"BLOCK_N", 128},
           {"STAGES", 2},
           {"PINGPONG", 1},
           {"PERSISTENT", persistent ? 1 : 0},
           {"PAGED", 0},
           {"Q_BUFFERS", persistent ? 2 : 1},
           {"STAGE_O", 1}}};
}

template <Element T>
void launch_flash_attention(Runtime &rt, const ChosenVariant &variant, T *out, const T *q,
                            const T *k, const T *v, const int *cu_seqlens_q,
                            const int *cu_seqlens_k, const AttentionShape &shape, Stream stream) {
  check_arguments(out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape);
  require(variant.integer("HEAD_DIM") == shape.head_dim &&
              variant.integer("CAUSAL") == (shape.causal ? 1 : 0),
          op, "the variant's HEAD_DIM or CAUSAL is not the call's");
  const auto *paged = variant.params.find("PAGED"); // flash_attention_mma has none
  require(!paged || paged->integer() == 0, op,
          "the variant is PAGED: launch it with launch_flash_attention_paged");
  // Plans by Runtime and variant.
  thread_local std::map<std::pair<std::uint64_t, std::string>, AttentionPlan> plans;
  const std::pair key{rt.id(), variant.tmpl->bind(variant.params).expression(Vendor::nvidia)};
  auto found = plans.find(key);
  if (found == plans.end())
    found = plans.emplace(key, make_plan(rt, variant)).first;
  launch_plan(found->second, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape, stream);
}

} // namespace detail

template <Element T>
void flash_attention(Runtime &rt, T *out, const T *q, const T *k, const T *v,
                     const int *cu_seqlens_q, const int *cu_seqlens_k, const AttentionShape &shape,
                     Stream stream) {
  check_arguments(out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape);
  // The plan per thread, by Runtime (its id), type, head dim, mask and walk: a warm call builds
  // no parameter list.
  thread_local std::map<std::tuple<std::uint64_t, int, int, bool, bool>, AttentionPlan> plans;
  const std::tuple key{rt.id(), detail::element_code<T>(), shape.head_dim, shape.causal,
                       persistent_walk(shape)};
  auto found = plans.find(key);
  if (found == plans.end()) [[unlikely]]
    found = plans
                .emplace(key, make_plan(rt, detail::flash_attention_variant<T>(
                                                rt.default_device().target(), shape)))
                .first;
  launch_plan(found->second, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape, stream);
}

namespace {

constexpr std::string_view paged_op = "flash_attention_paged";

// What the kernel sees of a paged prefill: the cache as num_blocks * page_size rows of k and v.
AttentionShape paged_shape(int q_heads, const PagedKvCache &cache, const PagedPrefillBatch &batch,
                           bool causal, float scale) {
  return {.batch = batch.batch,
          .total_q = batch.total_q,
          .total_k = static_cast<int>(std::min<std::int64_t>(
              INT_MAX, std::int64_t{cache.num_blocks} * std::max(cache.page_size, 0))),
          .max_seqlen_q = batch.max_seqlen_q,
          .q_heads = q_heads,
          .kv_heads = cache.kv_heads,
          .head_dim = cache.head_dim,
          .causal = causal,
          .scale = scale};
}

template <Element T>
void check_paged_arguments(T *out, const T *q, const PagedKvCache &cache,
                           const PagedPrefillBatch &batch, const AttentionShape &shape) {
  detail::require_pointer(out, paged_op, "out");
  detail::require_pointer(q, paged_op, "q");
  detail::require_pointer(cache.k, paged_op, "cache.k");
  detail::require_pointer(cache.v, paged_op, "cache.v");
  detail::require_pointer(batch.cu_seqlens_q, paged_op, "cu_seqlens_q");
  detail::require_pointer(batch.k_lens, paged_op, "k_lens");
  detail::require_pointer(batch.block_tables, paged_op, "block_tables");
  detail::require(cache.format == KvCacheFormat::model, paged_op,
                  "the cache holds fp8 e4m3, not the queries' element type");
  detail::require(cache.page_size == 16 || cache.page_size == 32, paged_op, [&] {
    return "page_size " + std::to_string(cache.page_size) + " is not supported (16 or 32)";
  });
  detail::require_range(cache.num_blocks, 1, INT_MAX / cache.page_size, paged_op, "num_blocks");
  detail::require_range(batch.max_blocks, 1, INT_MAX / cache.page_size, paged_op, "max_blocks");
  check_shape(shape);
  for (const auto &[pointer, name] : {std::pair<const void *, const char *>{q, "q"},
                                      {cache.k, "cache.k"},
                                      {cache.v, "cache.v"},
                                      {out, "out"}})
    detail::require(detail::aligned(pointer, 16), paged_op,
                    [&] { return std::string(name) + " is not 16-byte aligned"; });
}

// Checks a paged prefill's arguments (with `validate`, its tables too) and launches `plan`, a
// PAGED variant's.
template <Element T>
void launch_paged(const AttentionPlan &plan, T *out, const T *q, int q_heads,
                  const PagedKvCache &cache, const PagedPrefillBatch &batch,
                  const AttentionShape &shape, Stream stream) {
  const Device &device = plan.kernel->device();
  if (batch.validate)
    detail::check_device_page_tables(device, batch.block_tables, batch.k_lens, batch.batch,
                                     batch.max_blocks, cache.page_size, cache.num_blocks, 0,
                                     paged_op, "k_lens");
  const auto *k = static_cast<const T *>(cache.k), *v = static_cast<const T *>(cache.v);
  if (!plan.tensor_maps) // flash_attention_mfma: the caches' pointers, k_lens as cu_seqlens_k
    return launch_plan(plan, out, q, k, v, batch.cu_seqlens_q, batch.k_lens, shape, stream,
                       {batch.block_tables, batch.max_blocks, cache.page_size});
  // The caches as [num_blocks * page_size, kv_heads * head_dim] matrices in boxes of a page.
  launch_wgmma(plan, out, head_map(device, q, shape.total_q, q_heads, shape.head_dim, plan.block_m),
               head_map(device, k, shape.total_k, cache.kv_heads, shape.head_dim, cache.page_size),
               head_map(device, v, shape.total_k, cache.kv_heads, shape.head_dim, cache.page_size),
               batch.cu_seqlens_q, batch.k_lens, shape,
               {batch.block_tables, batch.max_blocks, cache.page_size, k, v}, stream);
}

} // namespace

namespace detail {

template <Element T>
ChosenVariant flash_attention_paged_variant(const AttentionShape &shape, int page_size,
                                            const jit::Target &target) {
  if (target.vendor() == Vendor::amd) // MFMA; its template refuses targets but gfx942 and gfx950
    return flash_attention_mfma_variant<T>(shape, true);
  // The wgmma kernel's (on other targets Runtime::kernel refuses it, naming sm_90a). Pages of 32
  // copied as TMA boxes (PAGED 1: 1.33-1.36x the producer's row copies), of 16 by the producer's
  // threads (PAGED 2: 1.02-1.09x TMA's twice as many boxes) with two q tiles, so that the thread
  // that copies q does not hold up the others' next tile (Q_BUFFERS 2: 1.04-1.09x one tile where
  // a block walks several items, which pages of 32 do not gain; H200, BENCHMARKS.md; PAGED
  // variants do not carry an item's last products into the next item, as the contiguous kernel
  // does with two q tiles).
  ChosenVariant variant = flash_attention_variant<T>(jit::Target::parse("sm_90a"), shape);
  const bool row_copies = page_size < 32;
  variant.params.set("PAGED", row_copies ? 2 : 1);
  variant.params.set("Q_BUFFERS", row_copies ? 2 : 1);
  variant.params.set("STAGE_O", 0); // not measured for pages
  return variant;
}

template <Element T>
void launch_flash_attention_paged(Runtime &rt, const ChosenVariant &variant, T *out, const T *q,
                                  int q_heads, const PagedKvCache &cache,
                                  const PagedPrefillBatch &batch, bool causal, float scale,
                                  Stream stream) {
  const AttentionShape shape = paged_shape(q_heads, cache, batch, causal, scale);
  check_paged_arguments(out, q, cache, batch, shape);
  require((variant.tmpl->name() == "flash_attention" ||
           variant.tmpl->name() == "flash_attention_mfma") &&
              variant.integer("PAGED") != 0 && variant.integer("HEAD_DIM") == shape.head_dim &&
              variant.integer("CAUSAL") == (causal ? 1 : 0),
          paged_op,
          "the variant is not a PAGED flash_attention or flash_attention_mfma of the call's "
          "HEAD_DIM and CAUSAL");
  thread_local std::map<std::pair<std::uint64_t, std::string>, AttentionPlan> plans;
  const std::pair key{rt.id(), variant.tmpl->bind(variant.params).expression(Vendor::nvidia)};
  auto found = plans.find(key);
  if (found == plans.end())
    found = plans.emplace(key, make_plan(rt, variant)).first;
  launch_paged(found->second, out, q, q_heads, cache, batch, shape, stream);
}

} // namespace detail

template <Element T>
void flash_attention_paged(Runtime &rt, T *out, const T *q, int q_heads, const PagedKvCache &cache,
                           const PagedPrefillBatch &batch, bool causal, float scale,
                           Stream stream) {
  const AttentionShape shape = paged_shape(q_heads, cache, batch, causal, scale);
  check_paged_arguments(out, q, cache, batch, shape);
  // The plan per thread, by Runtime, type, head dim, mask, walk and page size.
  thread_local std::map<std::tuple<std::uint64_t, int, int, bool, bool, int>, AttentionPlan> plans;
  const std::tuple key{rt.id(),      detail::element_code<T>(), shape.head_dim,
                       shape.causal, persistent_walk(shape),    cache.page_size};
  auto found = plans.find(key);
  if (found == plans.end()) [[unlikely]]
    found =
        plans
            .emplace(key, make_plan(rt, detail::flash_attention_paged_variant<T>(
                                            shape, cache.page_size, rt.default_device().target())))
            .first;
  launch_paged(found->second, out, q, q_heads, cache, batch, shape, stream);
}

namespace reference {

template <Element T>
std::vector<double> flash_attention(std::span<const T> q, std::span<const T> k,
                                    std::span<const T> v, std::span<const int> cu_seqlens_q,
                                    std::span<const int> cu_seqlens_k,
                                    const AttentionShape &shape) {
  check_shape(shape);
  const std::size_t batch = static_cast<std::size_t>(shape.batch), hd = shape.head_dim;
  detail::require(cu_seqlens_q.size() == batch + 1 && cu_seqlens_k.size() == batch + 1, op, [&] {
    return "cu_seqlens_q and cu_seqlens_k hold " + std::to_string(cu_seqlens_q.size()) + " and " +
           std::to_string(cu_seqlens_k.size()) +
           " entries, not batch + 1 = " + std::to_string(batch + 1);
  });
  const auto check_offsets = [&](std::span<const int> cu, int total, const char *name) {
    bool ordered = cu.front() == 0 && cu.back() == total;
    for (std::size_t b = 0; b < batch; ++b)
      ordered = ordered && cu[b] <= cu[b + 1];
    detail::require(ordered, op, [&] {
      return std::string(name) + " must rise from 0 to " + std::to_string(total);
    });
  };
  check_offsets(cu_seqlens_q, shape.total_q, "cu_seqlens_q");
  check_offsets(cu_seqlens_k, shape.total_k, "cu_seqlens_k");
  const std::size_t q_row = shape.q_heads * hd, k_row = shape.kv_heads * hd;
  detail::require(q.size() == shape.total_q * q_row && k.size() == shape.total_k * k_row &&
                      v.size() == k.size(),
                  op,
                  "q, k and v do not hold total_q x q_heads x head_dim and total_k x kv_heads x "
                  "head_dim elements");
  std::vector<double> out(q.size(), 0.0);
  const int group = shape.q_heads / shape.kv_heads;
  std::vector<double> weights;
  for (std::size_t b = 0; b < batch; ++b) {
    const int q0 = cu_seqlens_q[b], n = cu_seqlens_q[b + 1] - q0;
    const int k0 = cu_seqlens_k[b], m = cu_seqlens_k[b + 1] - k0;
    for (int h = 0; h < shape.q_heads; ++h) {
      const std::size_t kv_column = static_cast<std::size_t>(h / group) * hd;
      for (int i = 0; i < n; ++i) {
        const int keys = shape.causal ? std::min(m, std::max(0, i + m - n + 1)) : m;
        const T *query = q.data() + (q0 + i) * q_row + h * hd;
        weights.assign(keys, 0.0);
        double largest = -INFINITY;
        for (int j = 0; j < keys; ++j) {
          const T *key = k.data() + (k0 + j) * k_row + kv_column;
          double dot = 0;
          for (std::size_t d = 0; d < hd; ++d)
            dot += to_double(query[d]) * to_double(key[d]);
          weights[j] = dot * shape.scale;
          largest = std::max(largest, weights[j]);
        }
        double total = 0;
        for (double &w : weights)
          total += (w = std::exp(w - largest));
        double *row = out.data() + (q0 + i) * q_row + h * hd;
        for (int j = 0; j < keys; ++j) {
          const T *value = v.data() + (k0 + j) * k_row + kv_column;
          for (std::size_t d = 0; d < hd; ++d)
            row[d] += weights[j] / total * to_double(value[d]);
        }
      }
    }
  }
  return out;
}

template <Element T>
std::vector<double>
flash_attention_paged(std::span<const T> q, std::span<const T> k_cache, std::span<const T> v_cache,
                      std::span<const int> cu_seqlens_q, std::span<const int> k_lens,
                      std::span<const int> block_tables, int q_heads, int kv_heads, int head_dim,
                      int page_size, bool causal, float scale) {
  const std::size_t batch = k_lens.size(), row = static_cast<std::size_t>(kv_heads) * head_dim;
  detail::require(batch > 0 && block_tables.size() % batch == 0 && page_size > 0 &&
                      k_cache.size() == v_cache.size() && k_cache.size() % (page_size * row) == 0,
                  paged_op, "the caches or the tables do not match the shape");
  const int max_blocks = static_cast<int>(block_tables.size() / batch);
  const int num_blocks = static_cast<int>(k_cache.size() / (page_size * row));
  detail::check_page_tables(block_tables, k_lens, max_blocks, page_size, num_blocks, 0, paged_op,
                            "k_lens");
  // Each sequence's keys gathered in order, as flash_attention's contiguous k and v.
  std::vector<T> k, v;
  std::vector<int> cu_seqlens_k = {0};
  for (std::size_t b = 0; b < batch; ++b) {
    for (int j = 0; j < k_lens[b]; ++j) {
      const std::size_t at =
          (static_cast<std::size_t>(block_tables[b * max_blocks + j / page_size]) * page_size +
           j % page_size) *
          row;
      k.insert(k.end(), k_cache.begin() + at, k_cache.begin() + at + row);
      v.insert(v.end(), v_cache.begin() + at, v_cache.begin() + at + row);
    }
    cu_seqlens_k.push_back(cu_seqlens_k.back() + k_lens[b]);
  }
  int max_seqlen_q = 1;
  for (std::size_t b = 0; b < batch; ++b)
    max_seqlen_q = std::max(max_seqlen_q, cu_seqlens_q[b + 1] - cu_seqlens_q[b]);
  const AttentionShape shape{.batch = static_cast<int>(batch),
                             .total_q = cu_seqlens_q.back(),
                             .total_k = cu_seqlens_k.back(),
                             .max_seqlen_q = max_seqlen_q,
                             .q_heads = q_heads,
                             .kv_heads = kv_heads,
                             .head_dim = head_dim,
                             .causal = causal,
                             .scale = scale};
  if (k.empty()) // no keys at all: every row sees none
    return std::vector<double>(q.size(), 0.0);
  return reference::flash_attention<T>(q, k, v, cu_seqlens_q, cu_seqlens_k, shape);
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void flash_attention<T>(Runtime &, T *, const T *, const T *, const T *, const int *,   \
                                   const int *, const AttentionShape &, Stream);                   \
  template detail::ChosenVariant detail::flash_attention_variant<T>(const jit::Target &,           \
                                                                    const AttentionShape &);       \
  template void detail::launch_flash_attention<T>(Runtime &, const detail::ChosenVariant &, T *,   \
                                                  const T *, const T *, const T *, const int *,    \
                                                  const int *, const AttentionShape &, Stream);    \
  template std::vector<double> reference::flash_attention<T>(                                      \
      std::span<const T>, std::span<const T>, std::span<const T>, std::span<const int>,            \
      std::span<const int>, const AttentionShape &);                                               \
  template void flash_attention_paged<T>(Runtime &, T *, const T *, int, const PagedKvCache &,     \
                                         const PagedPrefillBatch &, bool, float, Stream);          \
  template detail::ChosenVariant detail::flash_attention_paged_variant<T>(                         \
      const AttentionShape &, int, const jit::Target &);                                           \
  template void detail::launch_flash_attention_paged<T>(                                           \
      Runtime &, const detail::ChosenVariant &, T *, const T *, int, const PagedKvCache &,         \
      const PagedPrefillBatch &, bool, float, Stream);                                             \
  template std::vector<double> reference::flash_attention_paged<T>(                                \
      std::span<const T>, std::span<const T>, std::span<const T>, std::span<const int>,            \
      std::span<const int>, std::span<const int>, int, int, int, int, bool, float);
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops
