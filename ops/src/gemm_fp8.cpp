#include "kjit/ops/gemm_fp8.hpp"

#include "gemm_fp8_mfma.hpp"
#include "kjit/log.hpp"
#include "kjit/ops/quant.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "plans.hpp"
#include "variants.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace kjit::ops {

namespace {

// gemm_fp8's SCALING parameter.
enum class Scaling { per_tensor = 0, row_wise = 1, block = 2 };

// The template's fixed geometry: 128-row tiles, 128 of K (bytes) per stage, three warpgroups.
constexpr int block_m = 128, block_k = 128, threads = 384;

std::string shape_text(std::int64_t rows, std::int64_t columns) {
  std::string text = "[";
  text.append(std::to_string(rows)).append(", ").append(std::to_string(columns)).append("]");
  return text;
}

// The checks both calls share; `k_multiple` is the multiple K must be, `op` the call's name.
void check_fp8_operands(std::string_view op, const BFloat16 *d, const std::uint8_t *a,
                        const ScaleTensor &scale_a, const std::uint8_t *b,
                        const ScaleTensor &scale_b, int m, int n, int k, int k_multiple) {
  detail::require_pointer(d, op, "d");
  detail::require_pointer(a, op, "a");
  detail::require_pointer(b, op, "b");
  detail::require_pointer(scale_a.data, op, "scale_a");
  detail::require_pointer(scale_b.data, op, "scale_b");
  detail::require(m > 0 && n > 0 && k > 0, op, [&] {
    return "m, n and k must be positive, not " + std::to_string(m) + ", " + std::to_string(n) +
           ", " + std::to_string(k);
  });
  detail::require(k % k_multiple == 0, op, [&] {
    return "k = " + std::to_string(k) + " is not a multiple of " + std::to_string(k_multiple) +
           (k_multiple == block_k ? " (the scale block)" : " (16-byte rows of a and b)");
  });
  detail::require(n % 8 == 0, op,
                  [&] { return "n = " + std::to_string(n) + " is not a multiple of 8"; });
  for (const auto &[pointer, name] :
       {std::pair<const void *, const char *>{a, "a"}, {b, "b"}, {d, "d"}})
    detail::require(detail::aligned(pointer, 16), op,
                    [&] { return std::string(name) + " is not 16-byte aligned"; });
}

void check_scale_shape(std::string_view op, std::string_view name, const ScaleTensor &scale,
                       std::int64_t rows, std::int64_t columns) {
  detail::require(scale.rows == rows && scale.columns == columns, op, [&] {
    return std::string(name) + " is " + shape_text(scale.rows, scale.columns) + ", must be " +
           shape_text(rows, columns);
  });
}

void require_hopper(std::string_view op, const jit::Target &target) {
  if (target.id() != "sm_90a")
    throw Error(Errc::unsupported_target, "kjit::ops::" + std::string(op) + ": target " +
                                              target.id() +
                                              " is not sm_90a (wgmma on fp8 and TMA: H100, H200), "
                                              "gfx942 or gfx950 (fp8 MFMA)");
}

// Per tensor and row-wise: the tile width, of those the template declares, whose waves over
// an H100's 132 multiprocessors take the least time, a tile's time taken as BLOCK_N + 64 (its
// bytes of A and B per 128 of K over 128 x BLOCK_N products: 128 columns run at about 0.8 of
// 256's rate, BENCHMARKS.md); where one row of tiles makes less than a wave, the narrowest
// tiles spread B's stream over the most multiprocessors.
long long waves_cost(int tiles_m, int n, int block_n) {
  const long long tiles = static_cast<long long>(tiles_m) * detail::divide_up(n, block_n);
  return (tiles + 131) / 132 * (block_n + 64);
}

// The widths whose tiles store D through shared memory and the copy engine (EPILOGUE 1), in the
// fp8f helper's rounds 1.02-1.17 of the same tiles from registers at 256 columns (every form)
// and 1.04-1.05 of 176 columns at 4096 x 2112 x 7168 at 192 (per tensor); BENCHMARKS.md. Other
// widths are unmeasured (128 would give up a stage) or take no boxes of 64 columns.
bool stores_through_copy_engine(int block_n) { return block_n == 256 || block_n == 192; }

// Per tensor and row-wise: waves_cost's least, with the tiles that store through the copy engine
// counted at 0.9 of their cost: 4096 x 2112 takes 192 columns (3 waves, the third two-thirds
// full; 176 made 3 full waves from registers, 256 2.2 waves, the third mostly idle).
int wave_fitted_block_n(int tiles_m, int n) {
  int best = 256;
  long long best_cost = 0;
  for (int block_n : {256, 240, 224, 208, 192, 176, 160, 144, 128, 112, 96, 64}) {
    const long long cost =
        waves_cost(tiles_m, n, block_n) * (stores_through_copy_engine(block_n) ? 9 : 10);
    if (best_cost == 0 || cost < best_cost) {
      best = block_n;
      best_cost = cost;
    }
  }
  return best;
}

// The heuristic's variant (BENCHMARKS.md, fp8b and fp8c helpers, has the sweeps behind it). Per
// tensor and row-wise: wave_fitted_block_n, as many stages as fit. Block scales: six stages, each
// k-block's sums promoted while the next one's batch runs (OVERLAP); 128 columns, or 64 where M is
// one row of tiles (twice the tiles), there with the consumers taking turns (PINGPONG: up to 10%
// faster at m = 64 and 128, 2% slower at some; nothing on top of OVERLAP from 4096 rows). The
// widths between (96-160) suit the waves of some shapes, but their promotion picks between two
// scale blocks per column group, which cost more than the waves saved in every shape measured.
// From 4 row tiles, block scales take 256 columns in halves (HALVES in gemm_fp8.hip) where their
// waves cost less than 128's by waves_cost: A's k-block from registers for both
// halves, no turns, no clusters, as many stages as fit (the fastest halves in the fp8d helper's
// rounds at 4096 x 7168 x 16384 and 4096 x 4096 x 7168; at 4096 x 2112 x 7168, a tie by the
// measure, 128 columns ran faster). Clusters of two blocks share B's columns from 4 row tiles in
// every other variant. Every launch is a programmatic dependent one (launch_fp8).
bool block_scales_in_halves(int tiles_m, int n) {
  return tiles_m >= 4 && waves_cost(tiles_m, n, 256) < waves_cost(tiles_m, n, 128);
}

detail::ChosenVariant heuristic_fp8_variant(Scaling scaling, int m, int n) {
  const int tiles_m = detail::divide_up(m, block_m);
  int block_n = 0, stages = 0;
  const bool block = scaling == Scaling::block;
  const bool halves = block && block_scales_in_halves(tiles_m, n);
  if (halves) {
    block_n = 256;
  } else if (block) {
    block_n = tiles_m == 1 ? 64 : 128;
    stages = 6;
  } else {
    block_n = wave_fitted_block_n(tiles_m, n);
  }
  // D through shared memory and the copy engine (EPILOGUE 1, in the 32 KiB that 4 stages leave)
  // at 256 columns in every form and 192 (per tensor and row-wise).
  const bool epilogue = stores_through_copy_engine(block_n);
  static const Template &tmpl = templates::find("gemm_fp8");
  detail::ChosenVariant variant{&tmpl,
                                {{"BLOCK_N", block_n},
                                 {"STAGES", stages},
                                 {"SCALING", static_cast<int>(scaling)},
                                 {"GROUP_M", 8},
                                 {"CLUSTER_M", tiles_m >= 4 && !halves ? 2 : 1},
                                 {"PINGPONG", block && tiles_m == 1 ? 1 : 0},
                                 {"OVERLAP", block && !halves ? 1 : 0},
                                 {"A_REGISTERS", halves ? 1 : 0},
                                 {"EPILOGUE", epilogue ? 1 : 0}}};
  if (stages == 0) // as many as fit, up to the template's 7
    detail::set_deepest_fitting_stages(variant, {7, 6, 5, 4, 3});
  return variant;
}

struct Fp8Plan {
  const Kernel *kernel;
  int block_n, cluster_m;
  bool epilogue; // EPILOGUE 1: D through map_d
  unsigned shared_bytes;
  int grid_limit; // blocks that run at once (one per multiprocessor), a multiple of cluster_m
};

Fp8Plan make_fp8_plan(Runtime &rt, const detail::ChosenVariant &variant) {
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  const int block_n = variant.integer("BLOCK_N");
  const int cluster_m = variant.integer("CLUSTER_M");
  const auto shared_bytes = static_cast<unsigned>(
      variant.tmpl->tuning().shared_bytes(variant.tmpl->bind(variant.params)));
  kernel.allow_shared_bytes(shared_bytes);
  // Clusters are placed whole within a GPC: the driver counts the pairs that fit at once.
  const int grid_limit =
      cluster_m > 1
          ? cluster_m * kernel.max_active_clusters(Dim3(threads), Dim3(cluster_m), shared_bytes)
          : kernel.device().multiprocessors();
  detail::require(grid_limit > 0, "gemm_fp8", [&] {
    return kernel.name() + " fits no cluster of " + std::to_string(cluster_m) + " blocks with " +
           std::to_string(shared_bytes) + " shared bytes each";
  });
  return {&kernel, block_n, cluster_m, variant.integer("EPILOGUE") == 1, shared_bytes, grid_limit};
}

// This thread's plan for the shape: the tuning table's winner (problem {SCALING}, extents m
// rounded up to a power of two, n and k), else the heuristic's. A winner that does not build is
// logged and the heuristic used.
const Fp8Plan &fp8_plan(Runtime &rt, Scaling scaling, int m, int n, int k) {
  struct Key {
    std::uint64_t runtime;
    int scaling;
    std::int64_t m_bucket;
    int n, k;
    bool operator==(const Key &) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key &key) const {
      return detail::hash_key(key.runtime, {static_cast<std::uint64_t>(key.scaling),
                                            static_cast<std::uint64_t>(key.m_bucket),
                                            static_cast<std::uint64_t>(key.n),
                                            static_cast<std::uint64_t>(key.k)});
    }
  };
  thread_local std::unordered_map<Key, Fp8Plan, Hash> plans;
  const Key key{rt.id(), static_cast<int>(scaling), detail::rows_bucket(m), n, k};
  if (auto found = plans.find(key); found != plans.end()) [[likely]]
    return found->second;
  const detail::ChosenVariant heuristic =
      heuristic_fp8_variant(scaling, static_cast<int>(key.m_bucket), n);
  const detail::ChosenVariant chosen =
      detail::gemm_fp8_variant(detail::tuning_lookup(rt), static_cast<int>(scaling), m, n, k);
  return detail::built_or_heuristic(
      chosen, heuristic, detail::gemm_shape_text(m, n, k),
      [&](const detail::ChosenVariant &variant) -> const Fp8Plan & {
        return plans.emplace(key, make_fp8_plan(rt, variant)).first->second;
      });
}

// overlap_previous: a programmatic dependent launch (gemm_fp8.hip's griddepcontrol), its prologue
// behind the stream's previous kernel's tail; off only to measure what it gives.
void launch_fp8(const Fp8Plan &plan, BFloat16 *d, const std::uint8_t *a, const float *scale_a,
                const std::uint8_t *b, const float *scale_b, int m, int n, int k, Stream stream,
                bool overlap_previous = true) {
  const Device &device = plan.kernel->device();
  const auto rows = [](int count) { return static_cast<std::uint64_t>(count); };
  // A's box: half a tile's rows (the kernel skips a half past m).
  const TensorMap map_a = detail::cached_tensor_map(
      device, {TensorMapElement::uint8, a, rows(m), rows(k), rows(k), block_m / 2, block_k});
  // B's box: the columns each block of a cluster copies into both.
  const TensorMap map_b = detail::cached_tensor_map(
      device, {TensorMapElement::uint8, b, rows(n), rows(k), rows(k),
               static_cast<std::uint32_t>(plan.block_n / plan.cluster_m), block_k});
  // EPILOGUE 1's D: boxes of 64 rows x 64 columns (128 bytes).
  const TensorMap map_d =
      plan.epilogue ? detail::cached_tensor_map(device, {TensorMapElement::bfloat16, d, rows(m),
                                                         rows(n), rows(n) * 2, 64, 64})
                    : TensorMap{};
  const long long blocks = static_cast<long long>(detail::divide_up(m, block_m * plan.cluster_m)) *
                           plan.cluster_m * detail::divide_up(n, plan.block_n);
  plan.kernel->launch({.grid = static_cast<unsigned>(std::min<long long>(blocks, plan.grid_limit)),
                       .block = threads,
                       .shared_bytes = plan.shared_bytes,
                       .stream = stream,
                       .cluster = Dim3(static_cast<unsigned>(plan.cluster_m)),
                       .overlap_previous = overlap_previous},
                      reinterpret_cast<void *>(d), scale_a, scale_b, map_a, map_b, map_d, m, n, k);
}

} // namespace

void gemm_fp8_blockscale(Runtime &rt, BFloat16 *d, const std::uint8_t *a, ScaleTensor scale_a,
                         const std::uint8_t *b, ScaleTensor scale_b, int m, int n, int k,
                         Stream stream) {
  constexpr std::string_view op = "gemm_fp8_blockscale";
  check_fp8_operands(op, d, a, scale_a, b, scale_b, m, n, k, block_k);
  check_scale_shape(op, "scale_a", scale_a, m, k / block_k);
  check_scale_shape(op, "scale_b", scale_b, detail::divide_up(n, block_k), k / block_k);
  if (detail::gemm_fp8_mfma_serves(rt.default_device().target()))
    return detail::gemm_fp8_mfma(rt, static_cast<int>(Scaling::block), d, a, scale_a.data, b,
                                 scale_b.data, m, n, k, stream);
  require_hopper(op, rt.default_device().target());
  launch_fp8(fp8_plan(rt, Scaling::block, m, n, k), d, a, scale_a.data, b, scale_b.data, m, n, k,
             stream);
}

void gemm_fp8_scaled(Runtime &rt, BFloat16 *d, const std::uint8_t *a, ScaleTensor scale_a,
                     const std::uint8_t *b, ScaleTensor scale_b, int m, int n, int k,
                     Stream stream) {
  constexpr std::string_view op = "gemm_fp8_scaled";
  check_fp8_operands(op, d, a, scale_a, b, scale_b, m, n, k, 16);
  const bool per_tensor =
      scale_a.rows == 1 && scale_a.columns == 1 && scale_b.rows == 1 && scale_b.columns == 1;
  if (!per_tensor) { // then row-wise, or neither: name what row-wise needs
    check_scale_shape(op, "scale_a", scale_a, m, 1);
    check_scale_shape(op, "scale_b", scale_b, 1, n);
  }
  const Scaling scaling = per_tensor ? Scaling::per_tensor : Scaling::row_wise;
  if (detail::gemm_fp8_mfma_serves(rt.default_device().target()))
    return detail::gemm_fp8_mfma(rt, static_cast<int>(scaling), d, a, scale_a.data, b, scale_b.data,
                                 m, n, k, stream);
  require_hopper(op, rt.default_device().target());
  launch_fp8(fp8_plan(rt, scaling, m, n, k), d, a, scale_a.data, b, scale_b.data, m, n, k, stream);
}

void detail::launch_gemm_fp8_variant(Runtime &rt, const ChosenVariant &variant, BFloat16 *d,
                                     const std::uint8_t *a, const float *scale_a,
                                     const std::uint8_t *b, const float *scale_b, int m, int n,
                                     int k, Stream stream, bool overlap_previous) {
  // Plans by Runtime and variant, as fp8_plan keeps them by Runtime and shape.
  thread_local std::map<std::pair<std::uint64_t, std::string>, Fp8Plan> plans;
  const std::pair key{rt.id(), variant.tmpl->bind(variant.params).expression(Vendor::nvidia)};
  auto found = plans.find(key);
  if (found == plans.end())
    found = plans.emplace(key, make_fp8_plan(rt, variant)).first;
  launch_fp8(found->second, d, a, scale_a, b, scale_b, m, n, k, stream, overlap_previous);
}

ParamValues detail::fp8_gemm_tuning_extents(int m, int n, int k) {
  return {{"k", k}, {"m", rows_bucket(m)}, {"n", n}};
}

detail::ChosenVariant detail::gemm_fp8_variant(const TuningLookup &lookup, int scaling, int m,
                                               int n, int k) {
  return tuned_variant(
      lookup,
      heuristic_fp8_variant(static_cast<Scaling>(scaling), static_cast<int>(rows_bucket(m)), n),
      {{"SCALING", scaling}}, fp8_gemm_tuning_extents(m, n, k));
}

detail::ChosenVariant detail::gemm_fp8_variant(bool block, bool row_wise, int m, int n) {
  return heuristic_fp8_variant(block      ? Scaling::block
                               : row_wise ? Scaling::row_wise
                                          : Scaling::per_tensor,
                               m, n);
}

namespace reference {

std::vector<double> gemm_fp8(std::span<const std::uint8_t> a, std::span<const float> scale_a,
                             std::span<const std::uint8_t> b, std::span<const float> scale_b, int m,
                             int n, int k, bool block, Fp8Encoding encoding) {
  std::vector<double> decoded(256);
  for (int bits = 0; bits < 256; ++bits)
    decoded[bits] = encoding == Fp8Encoding::e4m3fnuz
                        ? decode_e4m3fnuz(static_cast<std::uint8_t>(bits))
                        : decode_e4m3(static_cast<std::uint8_t>(bits));
  const int k_blocks = (k + block_k - 1) / block_k;
  // The scale of A's element (row, i) and of B's (column, i).
  const auto a_scale = [&](int row, int i) -> double {
    if (block)
      return scale_a[static_cast<std::size_t>(row) * k_blocks + i / block_k];
    return scale_a.size() == 1 ? scale_a[0] : scale_a[row];
  };
  const auto b_scale = [&](int column, int i) -> double {
    if (block)
      return scale_b[static_cast<std::size_t>(column / block_k) * k_blocks + i / block_k];
    return scale_b.size() == 1 ? scale_b[0] : scale_b[column];
  };
  std::vector<double> d(static_cast<std::size_t>(m) * n, 0.0);
  for (int row = 0; row < m; ++row)
    for (int column = 0; column < n; ++column) {
      double sum = 0;
      for (int i = 0; i < k; ++i)
        sum += decoded[a[static_cast<std::size_t>(row) * k + i]] * a_scale(row, i) *
               decoded[b[static_cast<std::size_t>(column) * k + i]] * b_scale(column, i);
      d[static_cast<std::size_t>(row) * n + column] = sum;
    }
  return d;
}

} // namespace reference

} // namespace kjit::ops
