#include "kjit/ops/flash_attention.hpp"

#include "flash_attention_variant.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/attention.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
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

// What a variant launches with: its kernel, whether it takes tensor maps (flash_attention) or
// pointers (flash_attention_mma), the rows of q a block takes, the keys of a tile, threads and
// dynamic shared bytes.
struct AttentionPlan {
  const Kernel *kernel;
  bool tensor_maps;
  int block_m, block_n, threads;
  unsigned shared_bytes;
  int grid_limit; // flash_attention: blocks at most (PERSISTENT 1: the multiprocessors)
};

AttentionPlan make_plan(Runtime &rt, const detail::ChosenVariant &variant) {
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  if (variant.tmpl->name() == "flash_attention_mma") // four warps of 16 rows, static shared
    return {&kernel, false, 64, variant.integer("BLOCK_N"), 128, 0, 0};
  const int consumers = variant.integer("CONSUMERS"), block_n = variant.integer("BLOCK_N");
  const auto shared_bytes = static_cast<unsigned>(templates::flash_attention_shared_bytes(
      variant.integer("HEAD_DIM"), consumers, block_n, variant.integer("STAGES")));
  kernel.allow_shared_bytes(shared_bytes);
  return {&kernel,
          true,
          64 * consumers,
          block_n,
          128 * (consumers + 1),
          shared_bytes,
          variant.integer("PERSISTENT") ? kernel.device().multiprocessors() : INT_MAX};
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

template <Element T>
void launch_plan(const AttentionPlan &plan, T *out, const T *q, const T *k, const T *v,
                 const int *cu_seqlens_q, const int *cu_seqlens_k, const AttentionShape &shape,
                 Stream stream) {
  const int row_tiles = detail::divide_up(shape.max_seqlen_q, plan.block_m);
  const int group = shape.q_heads / shape.kv_heads;
  const float scale_log2 = shape.scale * 1.4426950408889634f;
  if (!plan.tensor_maps) {
    plan.kernel->launch(
        {.grid = Dim3(static_cast<unsigned>(row_tiles), static_cast<unsigned>(shape.q_heads),
                      static_cast<unsigned>(shape.batch)),
         .block = plan.threads,
         .stream = stream},
        out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape.total_q, shape.total_k, shape.q_heads,
        group, scale_log2);
    return;
  }
  // Items: a tile of rows of one head of one sequence each.
  const long long items = static_cast<long long>(row_tiles) * shape.q_heads * shape.batch;
  detail::require(items <= INT_MAX, op, [&] {
    return std::to_string(items) + " tiles of rows (max_seqlen_q / " +
           std::to_string(plan.block_m) + " x q_heads x batch) exceed " + std::to_string(INT_MAX);
  });
  const Device &device = plan.kernel->device();
  const TensorMapElement element =
      std::is_same_v<T, BFloat16> ? TensorMapElement::bfloat16 : TensorMapElement::float16;
  // [tokens, heads * head_dim] matrices read in boxes of 64 columns: head h's tile starts at
  // column h * head_dim.
  const auto map = [&](const T *base, int tokens, int heads, int box_rows) {
    const auto columns = static_cast<std::uint64_t>(heads) * shape.head_dim;
    return encode_tensor_map(device, {element, base, static_cast<std::uint64_t>(tokens), columns,
                                      columns * 2, static_cast<std::uint32_t>(box_rows), 64});
  };
  const TensorMap map_q = map(q, shape.total_q, shape.q_heads, plan.block_m);
  const TensorMap map_k = map(k, shape.total_k, shape.kv_heads, plan.block_n);
  const TensorMap map_v = map(v, shape.total_k, shape.kv_heads, plan.block_n);
  plan.kernel->launch({.grid = static_cast<unsigned>(std::min<long long>(items, plan.grid_limit)),
                       .block = plan.threads,
                       .shared_bytes = plan.shared_bytes,
                       .stream = stream},
                      out, map_q, map_k, map_v, cu_seqlens_q, cu_seqlens_k, shape.total_q,
                      shape.total_k, shape.q_heads, group, row_tiles, shape.batch, scale_log2);
}

} // namespace

namespace detail {

template <Element T>
ChosenVariant flash_attention_variant(const jit::Target &target, const AttentionShape &shape) {
  if (target.id() != "sm_90a") { // mma.sync; its template refuses targets before sm_80
    static const Template &tmpl = templates::find("flash_attention_mma");
    return {&tmpl,
            {{"T", element_name<T>()},
             {"HEAD_DIM", shape.head_dim},
             {"CAUSAL", shape.causal ? 1 : 0},
             {"BLOCK_N", 64}}};
  }
  // Two consumer warpgroups of 64 rows taking turns, key tiles of 128 and two stages:
  // FlashAttention-3's 128 x 128 tiles for head dim 128. A block per multiprocessor without a
  // mask; under CAUSAL a block per tile of rows, whose costs differ, which the hardware's block
  // scheduler balances and a static walk of the items does not (BENCHMARKS.md).
  static const Template &tmpl = templates::find("flash_attention");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"HEAD_DIM", shape.head_dim},
           {"CAUSAL", shape.causal ? 1 : 0},
           {"CONSUMERS", 2},
           {"BLOCK_N", 128},
           {"STAGES", 2},
           {"PINGPONG", 1},
           {"PERSISTENT", shape.causal ? 0 : 1}}};
}

template <Element T>
void launch_flash_attention(Runtime &rt, const ChosenVariant &variant, T *out, const T *q,
                            const T *k, const T *v, const int *cu_seqlens_q,
                            const int *cu_seqlens_k, const AttentionShape &shape, Stream stream) {
  check_arguments(out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape);
  require(variant.integer("HEAD_DIM") == shape.head_dim &&
              variant.integer("CAUSAL") == (shape.causal ? 1 : 0),
          op, "the variant's HEAD_DIM or CAUSAL is not the call's");
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
  // The plan per thread, by Runtime (its id), type, head dim and mask: a warm call builds no
  // parameter list.
  thread_local std::map<std::tuple<std::uint64_t, int, int, bool>, AttentionPlan> plans;
  const std::tuple key{rt.id(), detail::element_code<T>(), shape.head_dim, shape.causal};
  auto found = plans.find(key);
  if (found == plans.end()) [[unlikely]]
    found = plans
                .emplace(key, make_plan(rt, detail::flash_attention_variant<T>(
                                                rt.default_device().target(), shape)))
                .first;
  launch_plan(found->second, out, q, k, v, cu_seqlens_q, cu_seqlens_k, shape, stream);
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
      std::span<const int>, const AttentionShape &);
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops
