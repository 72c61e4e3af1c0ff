#include "kjit/ops/gemm.hpp"

#include "kjit/log.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "plans.hpp"
#include "variants.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <variant>

namespace kjit::ops {

namespace {

constexpr std::string_view op = "gemm";

// 128 x 128 tiles reuse each staged element twice as often as 64 x 64 ones, but only pay when
// there are enough of them to keep every multiprocessor busy (an H200 has 132, an MI250X GCD
// 110): below about two per multiprocessor, the smaller tiles' extra blocks win.
bool large_tiles_pay(int m, int n) {
  return static_cast<long long>(detail::divide_up(m, 128)) * detail::divide_up(n, 128) >= 256;
}

void check_operands(const void *c, const void *a, const void *b, int m, int n, int k) {
  detail::require_pointer(c, op, "c");
  detail::require_pointer(a, op, "a");
  detail::require_pointer(b, op, "b");
  detail::require(m > 0 && n > 0 && k > 0, op, [&] {
    return "m, n and k must be positive, not " + std::to_string(m) + ", " + std::to_string(n) +
           ", " + std::to_string(k);
  });
}

// The grid of blocks of block_m x block_n over C: columns in x, rows in y (at most 65535).
Dim3 grid_for(int m, int n, int block_m, int block_n) {
  const int grid_rows = detail::divide_up(m, block_m);
  detail::require(grid_rows <= 65535, op, [&] {
    return "m = " + std::to_string(m) + " needs more than 65535 rows of blocks";
  });
  return Dim3(detail::divide_up(n, block_n), grid_rows);
}

bool amd_matrix_cores(const jit::Target &target) {
  return target.arch() == "gfx942" || target.arch() == "gfx950";
}

// gemm_mma on NVIDIA (32-lane warps), gemm_mfma on AMD (64-lane wavefronts).
template <Element T>
void gemm_on_tensor_cores(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k,
                          Stream stream) {
  const bool amd = rt.default_device().target().vendor() == Vendor::amd;
  const detail::ChosenVariant variant =
      amd ? detail::gemm_mfma_variant<T>(m, n) : detail::gemm_mma_variant<T>(m, n);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  const int block = variant.integer("BLOCK_M");
  const int workers = amd ? 64 * variant.integer("WAVES_M") * variant.integer("WAVES_N")
                          : 32 * variant.integer("WARPS_M") * variant.integer("WARPS_N");
  kernel.launch({.grid = grid_for(m, n, block, block), .block = workers, .stream = stream}, c, a, b,
                m, n, k);
}

// gemm_wgmma's tile geometry (see the template): 128 rows of C per tile (BLOCK_M's default; 64
// for narrow tiles), K in steps of 64 (one 128-byte swizzle row), three warpgroups.
constexpr int wgmma_block_m = 128, wgmma_block_k = 64, wgmma_threads = 384;

bool aligned16(const void *pointer) { return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0; }

// Tensor maps, per matrix (address, shape, box) and device: a warm call encodes none. Kept for
// the process's life; a freed and reused address with the same shape still describes the same
// bytes.
class TensorMapCache {
public:
  TensorMap get(const Device &device, const TensorMapShape &shape) {
    const Key key{device.ordinal(),  static_cast<int>(device.backend()),
                  shape.base,        shape.rows,
                  shape.columns,     shape.box_rows,
                  shape.box_columns, static_cast<int>(shape.element)};
    std::lock_guard lock(mutex_);
    auto found = maps_.find(key);
    if (found != maps_.end())
      return found->second;
    if (maps_.size() >= capacity) // many one-off buffers: start over rather than grow
      maps_.clear();
    return maps_.emplace(key, encode_tensor_map(device, shape)).first->second;
  }

private:
  static constexpr std::size_t capacity = 4096;
  using Key = std::tuple<int, int, const void *, std::uint64_t, std::uint64_t, std::uint32_t,
                         std::uint32_t, int>;
  std::mutex mutex_;
  std::map<Key, TensorMap> maps_;
};

TensorMapCache &tensor_maps() {
  static TensorMapCache cache;
  return cache;
}

} // namespace

TensorMap detail::cached_tensor_map(const Device &device, const TensorMapShape &shape) {
  return tensor_maps().get(device, shape);
}

namespace {

// Raises the kernel's shared-memory limit and reads how many blocks run at once, one per
// multiprocessor (the device's count; for clusters the driver's count of whole clusters that
// fit, which the GPCs' sizes can make fewer), for the persistent grid. Once per plan: plans are
// kept per Runtime (by its id, never by an address a later Kernel could reuse).
int prepared_grid_limit(const Kernel &kernel, unsigned shared_bytes, int cluster) {
  kernel.allow_shared_bytes(shared_bytes);
  const int limit =
      cluster > 1 ? cluster * kernel.max_active_clusters(wgmma_threads, Dim3(cluster), shared_bytes)
                  : kernel.device().multiprocessors();
  detail::require(limit > 0, op, [&] {
    return kernel.name() + " fits no cluster of " + std::to_string(cluster) + " blocks with " +
           std::to_string(shared_bytes) + " shared bytes each";
  });
  return limit;
}

// What one GEMM shape launches through one Runtime: chosen once (the tuning table's winner, else
// the heuristic), then found again on every call of the shape without building parameter lists
// or asking the Runtime or the table. Each thread keeps its own plans, as the row-wise operators
// do (plans.hpp).
struct GemmPlanKey {
  std::uint64_t runtime;
  int element; // Element's size and kind: float 4, half 2, bfloat16 3
  bool b_kmajor;
  bool skinny_serves; // the pointers and sizes allow linear_skinny
  bool splitk_serves; // and linear_splitk
  bool wgmma_serves;  // and gemm_wgmma
  std::int64_t m_bucket;
  int n, k;
  bool operator==(const GemmPlanKey &) const = default;
};

struct GemmPlanKeyHash {
  std::size_t operator()(const GemmPlanKey &key) const {
    return detail::hash_key(key.runtime,
                            {static_cast<std::uint64_t>(key.element * 8 + key.b_kmajor * 4 +
                                                        key.skinny_serves * 2 + key.splitk_serves),
                             static_cast<std::uint64_t>(key.m_bucket),
                             static_cast<std::uint64_t>(key.n), static_cast<std::uint64_t>(key.k)});
  }
};

// Each kernel's launch data, from its variant's parameters: a plan holds one of them.
struct SkinnyLaunch { // linear_skinny: a block's rows of W (columns of C) and tokens
  int rows_per_block, m_tile, threads;
};
struct SplitkLaunch { // linear_splitk: the same, and the blocks of a cluster that split K
  int rows_per_block, m_tile, splits, threads;
};
struct WgmmaLaunch { // gemm_wgmma: wgmma_threads threads, a persistent grid
  int block_m, block_n, cluster_m, cluster_n, split_k;
  bool swap_ab; // W as the kernel's A, the activations as its B: C's transpose
  unsigned shared_bytes;
  int grid_limit; // blocks, a multiple of the cluster's
};

struct GemmPlan {
  const Kernel *kernel;
  std::variant<SkinnyLaunch, SplitkLaunch, WgmmaLaunch> launch;
};

// detail::heuristic_gemm_variant for the key's shape and kernels.
template <Element T> detail::ChosenVariant heuristic_variant(const GemmPlanKey &key) {
  return detail::heuristic_gemm_variant<T>(static_cast<int>(key.m_bucket), key.n, key.k,
                                           key.b_kmajor, key.skinny_serves, key.splitk_serves,
                                           key.wgmma_serves);
}

// The variant for the key's shape: the fastest of the tuning table's winners for linear_skinny
// and linear_splitk (where they serve) and gemm_wgmma, else the heuristic's.
template <Element T>
detail::ChosenVariant choose_gemm_variant(Runtime &rt, const GemmPlanKey &key) {
  const int m = static_cast<int>(key.m_bucket);
  const ParamValues extents = detail::gemm_tuning_extents(m, key.n, key.k, key.b_kmajor);
  const ParamValues problem = {{"T", element_name<T>()}};
  std::optional<detail::ChosenVariant> best;
  double best_us = 0;
  const auto consider = [&](bool serves, const detail::ChosenVariant &variant) {
    if (!serves)
      return;
    const std::optional<TimedVariant> winner =
        detail::tuned_winner(rt, *variant.tmpl, problem, extents);
    if (winner && (!best || winner->time_us < best_us)) {
      best = detail::with_winner(variant, *winner);
      best_us = winner->time_us;
    }
  };
  consider(key.skinny_serves, detail::linear_skinny_variant<T>(m, key.n, key.k));
  consider(key.splitk_serves, detail::linear_splitk_variant<T>(m, key.n, key.k));
  consider(key.wgmma_serves, detail::gemm_wgmma_variant<T>(m, key.n, key.k, key.b_kmajor));
  return best ? *best : heuristic_variant<T>(key);
}

template <Element T> GemmPlan make_gemm_plan(Runtime &rt, const detail::ChosenVariant &variant) {
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  const std::string &name = variant.tmpl->name();
  if (name == "linear_skinny")
    return {&kernel, SkinnyLaunch{.rows_per_block = 16 * variant.integer("ROW_BLOCKS"),
                                  .m_tile = variant.integer("M_TILE"),
                                  .threads = 32 * variant.integer("WARPS")}};
  if (name == "linear_splitk")
    return {&kernel, SplitkLaunch{.rows_per_block =
                                      16 * variant.integer("ROW_BLOCKS") * variant.integer("WARPS"),
                                  .m_tile = variant.integer("M_TILE"),
                                  .splits = variant.integer("SPLITS"),
                                  .threads = 32 * variant.integer("WARPS")}};
  const int block_n = variant.integer("BLOCK_N");
  const int cluster_m = variant.integer("CLUSTER_M"), cluster_n = variant.integer("CLUSTER_N");
  const int split_k = variant.integer("SPLIT_K");
  // As bound: a variant may leave BLOCK_M at its default.
  const auto bound = variant.tmpl->bind(variant.params);
  const auto shared_bytes = static_cast<unsigned>(variant.tmpl->tuning().shared_bytes(bound));
  const auto block_m = static_cast<int>(bound.values().get("BLOCK_M").integer());
  return {&kernel, WgmmaLaunch{.block_m = block_m,
                               .block_n = block_n,
                               .cluster_m = cluster_m,
                               .cluster_n = cluster_n,
                               .split_k = split_k,
                               .swap_ab = variant.integer("SWAP_AB") == 1,
                               .shared_bytes = shared_bytes,
                               .grid_limit = prepared_grid_limit(kernel, shared_bytes,
                                                                 cluster_m * cluster_n * split_k)}};
}

// This thread's plan for the shape, chosen and compiled on its first call. A record the table
// holds that does not build (a value the template refuses, a compile failure) is logged and the
// heuristic used instead: the table is shared, untrusted input.
template <Element T>
const GemmPlan &gemm_plan(Runtime &rt, int m, int n, int k, bool b_kmajor, bool skinny_serves,
                          bool splitk_serves, bool wgmma_serves) {
  thread_local std::unordered_map<GemmPlanKey, GemmPlan, GemmPlanKeyHash> plans;
  const GemmPlanKey key{rt.id(),
                        detail::element_code<T>(),
                        b_kmajor,
                        skinny_serves,
                        splitk_serves,
                        wgmma_serves,
                        detail::rows_bucket(m),
                        n,
                        k};
  auto found = plans.find(key);
  if (found != plans.end()) [[likely]]
    return found->second;
  return detail::built_or_heuristic(
      choose_gemm_variant<T>(rt, key), heuristic_variant<T>(key),
      detail::gemm_shape_text(key.m_bucket, key.n, key.k),
      [&](const detail::ChosenVariant &variant) -> const GemmPlan & {
        return plans.emplace(key, make_gemm_plan<T>(rt, variant)).first->second;
      });
}

template <Element T>
void launch_gemm_plan(const GemmPlan &plan, T *c, const T *a, const T *b, int m, int n, int k,
                      bool b_kmajor, Stream stream) {
  if (const auto *skinny = std::get_if<SkinnyLaunch>(&plan.launch)) {
    plan.kernel->launch({.grid = Dim3(detail::divide_up(n, skinny->rows_per_block),
                                      detail::divide_up(m, skinny->m_tile)),
                         .block = skinny->threads,
                         .stream = stream},
                        c, a, b, m, n, k);
    return;
  }
  if (const auto *splitk = std::get_if<SplitkLaunch>(&plan.launch)) {
    const unsigned splits = static_cast<unsigned>(splitk->splits);
    plan.kernel->launch({.grid = Dim3(splits * detail::divide_up(n, splitk->rows_per_block),
                                      detail::divide_up(m, splitk->m_tile)),
                         .block = splitk->threads,
                         .stream = stream,
                         .cluster = Dim3(splits)},
                        c, a, b, m, n, k);
    return;
  }
  const WgmmaLaunch &wgmma = std::get<WgmmaLaunch>(plan.launch);
  const TensorMapElement element =
      std::is_same_v<T, BFloat16> ? TensorMapElement::bfloat16 : TensorMapElement::float16;
  const Device &device = plan.kernel->device();
  const auto row_bytes = [](int columns) { return static_cast<std::uint64_t>(columns) * 2; };
  const TensorMap map_c = tensor_maps().get(
      device, {element, c, std::uint64_t(m), std::uint64_t(n), row_bytes(n), 64, 64});
  if (wgmma.swap_ab) { // C^T = W A^T: W is the kernel's A, the activations its K-major B
    detail::require(b_kmajor, op, "SWAP_AB takes a K-major B (linear()'s W)");
    std::swap(a, b);
    std::swap(m, n);
  }
  // A's tile is copied in boxes of 64 rows (halves of a block's own 128-row tile, or of the tile a
  // pair along N shares; a 64-row tile's halves, 32 rows, in such a pair); a block of a pair along
  // M copies half of the K-major B's tile (an MN-major B's 64-column boxes are split by count).
  const auto a_box_rows =
      static_cast<std::uint32_t>(wgmma.cluster_n > 1 ? wgmma.block_m / 2 : wgmma_block_m / 2);
  const TensorMap map_a = tensor_maps().get(
      device, {element, a, std::uint64_t(m), std::uint64_t(k), row_bytes(k), a_box_rows, 64});
  const TensorMap map_b =
      b_kmajor
          ? tensor_maps().get(device, {element, b, std::uint64_t(n), std::uint64_t(k), row_bytes(k),
                                       std::uint32_t(wgmma.block_n / wgmma.cluster_m), 64})
          : tensor_maps().get(device, {element, b, std::uint64_t(k), std::uint64_t(n), row_bytes(n),
                                       wgmma_block_k, 64});
  const int cluster = wgmma.cluster_m * wgmma.cluster_n * wgmma.split_k;
  const long long pairs =
      static_cast<long long>(detail::divide_up(m, wgmma.block_m * wgmma.cluster_m)) *
      detail::divide_up(n, wgmma.block_n * wgmma.cluster_n);
  const auto blocks = static_cast<unsigned>(std::min<long long>(pairs * cluster, wgmma.grid_limit));
  plan.kernel->launch(
      {.grid = blocks,
       .block = wgmma_threads,
       .shared_bytes = wgmma.shared_bytes,
       .stream = stream,
       .cluster = Dim3(static_cast<unsigned>(cluster)),
       // Its start behind the previous kernel's tail (gemm_wgmma.hip: griddepcontrol).
       .overlap_previous = true},
      c, map_c, map_a, map_b, m, n, k);
}

} // namespace

namespace detail {

template <Element T>
void launch_gemm_variant(Runtime &rt, const ChosenVariant &variant, T *c, const T *a, const T *b,
                         int m, int n, int k, bool b_kmajor, Stream stream) {
  for (const auto &[name, size] : {std::pair{"SHAPE_M", m}, {"SHAPE_N", n}, {"SHAPE_K", k}}) {
    const Value *compiled = variant.params.find(name);
    const std::int64_t fixed = compiled != nullptr ? compiled->integer() : 0;
    require(fixed == 0 || fixed == size, op, [&] {
      return std::string(name) + " = " + std::to_string(fixed) +
             " was compiled in; the call's is " + std::to_string(size);
    });
  }
  // Plans by Runtime and variant, as gemm_plan keeps them by Runtime and shape.
  thread_local std::map<std::pair<std::uint64_t, std::string>, GemmPlan> plans;
  const std::pair key{rt.id(), variant.tmpl->bind(variant.params).expression(Vendor::nvidia)};
  auto found = plans.find(key);
  if (found == plans.end())
    found = plans.emplace(key, make_gemm_plan<T>(rt, variant)).first;
  launch_gemm_plan(found->second, c, a, b, m, n, k, b_kmajor, stream);
}

template <Element T>
ChosenVariant heuristic_gemm_variant(int m, int n, int k, bool b_kmajor, bool skinny_serves,
                                     bool splitk_serves, bool wgmma_serves) {
  if (!wgmma_serves && splitk_serves && m > linear_skinny_rows)
    return linear_splitk_variant<T>(m, n, k);
  if (!wgmma_serves && skinny_serves)
    return linear_skinny_variant<T>(m, n, k);
  return gemm_wgmma_variant<T>(m, n, k, b_kmajor);
}

template <Element T> ChosenVariant linear_skinny_variant(int m, int n, int /*k*/) {
  // Every token of a block in one pass over W, 16 rows of W per block (the most blocks). A step's
  // loads all issue before its mma, so their registers grow with the tokens and the unrolling,
  // and the warps that fit on a multiprocessor fall: for 16 and more tokens, 8 warps a block
  // and shorter steps keep more blocks resident than 16 warps would (BENCHMARKS.md, "linear_skinny
  // at m = 16"). Up to 8 tokens, 16 warps and 8 chunks a step, except where W has 8192 rows or
  // more (512 blocks, about four a multiprocessor): there blocks of 8 warps and 4 chunks, two
  // resident, one streaming while the other adds its warps' sums, ran 10% faster, and 10-25%
  // slower on 4096 rows (BENCHMARKS.md, "linear at every m").
  const int m_tile = m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64;
  const bool two_resident = m_tile > 8 || divide_up(n, 16) >= 512;
  static const Template &tmpl = templates::find("linear_skinny");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"M_TILE", m_tile},
           {"ROW_BLOCKS", 1},
           {"WARPS", two_resident ? 8 : 16},
           {"UNROLL", m_tile == 8 && !two_resident ? 8
                      : m_tile <= 16               ? 4
                                                   : 2}}};
}

template <Element T> ChosenVariant linear_splitk_variant(int m, int n, int k) {
  // Blocks of 4 warps with 32 rows of W each up to 64 tokens and 16 from there (the staged tokens
  // then serve twice the rows), slices of 128 of K up to 16 tokens and 64 from there, and the
  // clusters split K until there are about 2048 16-row pieces of work, keeping two slices per
  // block: near the fastest of a sweep on an H200 at 16 and 32 tokens (BENCHMARKS.md, "linear at
  // 1 to 128 rows, and the FP8 GEMM"; 32 rows at 16 tokens: "linear at every m").
  const int m_tile = m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
  const int row_blocks = m_tile <= 64 ? 2 : 1;
  const int k_slice = m_tile <= 16 ? 128 : 64;
  const long long pieces = static_cast<long long>(divide_up(n, 16)) * divide_up(m, m_tile);
  int splits = 1;
  while (splits < 8 && pieces * splits < 2048 && k / (2 * splits) >= k_slice)
    splits *= 2;
  static const Template &tmpl = templates::find("linear_splitk");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"M_TILE", m_tile},
           {"ROW_BLOCKS", row_blocks},
           {"WARPS", 4},
           {"K_SLICE", k_slice},
           {"SPLITS", splits}}};
}

template <Element T>
bool linear_splitk_serves(const jit::Target &target, const void *c, const void *a, const void *w,
                          int m, int n, int k) {
  // linear_skinny's loads and stores, and clusters (sm_90).
  return m <= linear_splitk_max_m && !std::is_same_v<T, float> &&
         nvidia_compute_capability(target) >= 90 && n % 8 == 0 && k % 8 == 0 && aligned16(a) &&
         aligned16(w) && aligned16(c);
}

ParamValues gemm_tuning_extents(int m, int n, int k, bool b_kmajor) {
  return {{"b_kmajor", b_kmajor ? 1 : 0}, {"k", k}, {"m", rows_bucket(m)}, {"n", n}};
}

template <Element T>
bool linear_skinny_serves(const jit::Target &target, const void *c, const void *a, const void *w,
                          int m, int n, int k) {
  // 16-byte loads of W's and A's rows, pairs stored to C's.
  return m <= linear_skinny_max_m && gemm_has_tensor_cores<T>(target) && n % 8 == 0 && k % 8 == 0 &&
         aligned16(a) && aligned16(w) && aligned16(c);
}

void set_deepest_fitting_stages(ChosenVariant &variant, std::initializer_list<int> stages) {
  for (const int count : stages) {
    variant.params.set("STAGES", count);
    if (variant.tmpl->tuning().shared_bytes(variant.tmpl->bind(variant.params)) <=
        sm90_shared_bytes)
      return;
  }
}

template <Element T> ChosenVariant gemm_wgmma_variant(int m, int n, int k, bool b_kmajor) {
  static const Template &tmpl = templates::find("gemm_wgmma");
  if (b_kmajor && m <= swap_ab_max_m) {
    // linear() at few rows: SWAP_AB, tiles of 64 rows of W (BLOCK_M 64, one consumer: twice the
    // tiles of 128 rows, which left most multiprocessors idle; 1.01-1.18x faster at every shape
    // and row count on an H100), the deepest ring up to 12 stages (0.99-1.09x the speed of 8;
    // BENCHMARKS.md, "linear at 16 to 128 rows with 64-row tiles of W"). The rows of A go in one
    // tile of 16, 32 or 64, so that each tile of W is read once. 128 rows go in two tiles of 64,
    // run by pairs of blocks that share each tile of W (below), except where W's 64-row tiles are
    // half a wave of 132 multiprocessors or fewer (4096 rows) and K has 128 steps or more: there
    // one tile of 128, K split in two.
    // On an H200 two tiles of A took from 1.0 to 1.3 times as long as one from call to call; one
    // tile at 64 rows, and K split at 128, held still, and ran 0.90-0.98x as fast as two tiles
    // on an H100 (BENCHMARKS.md, "linear at 64 and 128 rows on an H200"). K is split elsewhere
    // only where W's tiles are a quarter of the multiprocessors or fewer and K long ("linear at
    // 16 to 128 rows: SWAP_AB").
    const int rows = m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128;
    const long long tiles = divide_up(n, 64), steps = divide_up(k, wgmma_block_k);
    const bool half_wave = 2 * tiles <= 132, long_k = steps >= 2 * 64;
    // There, with K short (4096 x 4096), the two 64-row tiles of A run in pairs of blocks that
    // share each tile of W (CLUSTER_N 2), as cuBLAS does at that shape: from CUDA graphs on an
    // H200, 1.16-1.22x faster in bfloat16 (1.01-1.02x in half) than the two tiles' blocks
    // reading W apart. cuBLAS's layout at 64 rows (32-row tiles of A in pairs sharing A's tile)
    // ran 0.88x as fast as one tile of 64 (BENCHMARKS.md, "linear at 128 rows in pairs of
    // blocks, as cuBLAS runs it").
    // With more tiles of W (8192 x 8192), the pairs share 128-row tiles of W, as cuBLAS's
    // nvjet_sm90_tst_128x64_64x8_1x2 does there: one tile of 128 rows of A had every block read
    // all of A from L2 (400 MB of L2 traffic against cuBLAS's 285 under ncu), and ran 0.95x as
    // fast on an H200 (BENCHMARKS.md, "linear at 128 rows of 8192 x 8192 in pairs sharing
    // 128-row tiles of W").
    const bool pairs = rows == 128 && !(half_wave && long_k);
    const int block_n = pairs ? 64 : rows;
    const int block_m = pairs && !half_wave ? 128 : 64;
    const int split_k = (tiles * 4 <= 132 || (rows == 128 && half_wave)) && long_k ? 2 : 1;
    ChosenVariant variant{&tmpl,
                          {{"T", element_name<T>()},
                           {"BLOCK_N", block_n},
                           {"STAGES", 8},
                           {"B_KMAJOR", 1},
                           {"GROUP_M", 8},
                           {"CLUSTER_M", 1},
                           {"CLUSTER_N", pairs ? 2 : 1},
                           {"EPILOGUE", 0},
                           {"SPLIT_K", split_k},
                           {"SWAP_AB", 1},
                           {"BLOCK_M", block_m}}};
    set_deepest_fitting_stages(variant, {12, 10, 8, 6, 5, 4});
    return variant;
  }
  // 128 x 256 tiles unless they would leave most multiprocessors idle: then 128 x 128, twice
  // the tiles. 80 or fewer of those (a few rows of A: the product streams B) leave most
  // multiprocessors idle too: clusters of two blocks split K, each keeping at least 16 steps;
  // more splits were slower at 64 and 128 rows on an H200 (BENCHMARKS.md, "linear at every m").
  const long long tiles_m = divide_up(m, wgmma_block_m);
  const long long wide_tiles = tiles_m * divide_up(n, 256), tiles = tiles_m * divide_up(n, 128);
  const int block_n = wide_tiles >= 128 ? 256 : 128;
  const int split_k = block_n == 128 && tiles <= 80 && divide_up(k, wgmma_block_k) >= 32 ? 2 : 1;
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_N", block_n},
           {"STAGES", block_n == 256 ? 4 : 5},
           {"B_KMAJOR", b_kmajor ? 1 : 0},
           {"GROUP_M", 8},
           {"CLUSTER_M", 1},
           {"CLUSTER_N", 1},
           {"EPILOGUE", split_k > 1 ? 0 : 1},
           {"SPLIT_K", split_k},
           {"SWAP_AB", 0},
           {"BLOCK_M", 128}}};
}

template <Element T>
bool gemm_wgmma_serves(const jit::Target &target, const void *c, const void *a, const void *b,
                       int n, int k) {
  // Tensor maps need 16-byte aligned bases and row strides (n and k multiples of 8 elements).
  return !std::is_same_v<T, float> && target.id() == "sm_90a" && n % 8 == 0 && k % 8 == 0 &&
         aligned16(a) && aligned16(b) && aligned16(c);
}

template <Element T> ChosenVariant gemm_mma_variant(int m, int n) {
  // 8 warps of 64 x 32 on 128 x 128 blocks, or 4 warps of 32 x 32 on 64 x 64 ones.
  const bool large = large_tiles_pay(m, n);
  const int block = large ? 128 : 64, warps_m = 2, warps_n = large ? 4 : 2;
  static const Template &tmpl = templates::find("gemm_mma");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_M", block},
           {"BLOCK_N", block},
           {"BLOCK_K", 32},
           {"WARPS_M", warps_m},
           {"WARPS_N", warps_n}}};
}

template <Element T> ChosenVariant gemm_mfma_variant(int m, int n) {
  // 4 waves of 64 x 64 (2 x 2 MFMA tiles of 32 x 32) on 128 x 128 blocks, or of 32 x 32 on
  // 64 x 64 ones.
  const int block = large_tiles_pay(m, n) ? 128 : 64;
  static const Template &tmpl = templates::find("gemm_mfma");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_M", block},
           {"BLOCK_N", block},
           {"BLOCK_K", 32},
           {"WAVES_M", 2},
           {"WAVES_N", 2}}};
}

template <Element T> ChosenVariant gemm_variant(const GemmTiles &tiles) {
  static const Template &tmpl = templates::find("gemm");
  return {&tmpl,
          {{"T", element_name<T>()},
           {"BLOCK_M", tiles.block_m},
           {"BLOCK_N", tiles.block_n},
           {"BLOCK_K", tiles.block_k},
           {"THREAD_M", tiles.thread_m},
           {"THREAD_N", tiles.thread_n}}};
}

} // namespace detail

GemmTiles gemm_tiles_for(int m, int n, int /*k*/) {
  if (large_tiles_pay(m, n))
    return {128, 128, 16, 8, 8};
  return {64, 64, 16, 4, 4};
}

template <Element T> bool gemm_has_tensor_cores(const jit::Target &target) {
  return !std::is_same_v<T, float> &&
         (detail::nvidia_compute_capability(target) >= 80 || amd_matrix_cores(target));
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, const GemmTiles &tiles,
          Stream stream) {
  check_operands(c, a, b, m, n, k);
  detail::require(tiles.thread_m > 0 && tiles.thread_n > 0 && tiles.block_m % tiles.thread_m == 0 &&
                      tiles.block_n % tiles.thread_n == 0,
                  op, "thread tiles must divide the block tiles");
  const int threads = (tiles.block_m / tiles.thread_m) * (tiles.block_n / tiles.thread_n);
  detail::require(threads >= 32 && threads <= 1024, op, [&] {
    return "tiles give " + std::to_string(threads) +
           " threads per block; (block_m / thread_m) * (block_n / thread_n) must be "
           "in [32, 1024]";
  });
  detail::require(tiles.block_k * (tiles.block_m + 4 + tiles.block_n) * 4 <= 48 * 1024, op,
                  "tiles need more than 48 KiB of shared memory");
  const Dim3 grid = grid_for(m, n, tiles.block_m, tiles.block_n);
  const detail::ChosenVariant variant = detail::gemm_variant<T>(tiles);
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.launch({.grid = grid, .block = threads, .stream = stream}, c, a, b, m, n, k);
}

template <Element T>
void gemm(Runtime &rt, T *c, const T *a, const T *b, int m, int n, int k, Stream stream) {
  check_operands(c, a, b, m, n, k); // before the device is looked for
  const jit::Target &target = rt.default_device().target();
  if (detail::gemm_wgmma_serves<T>(target, c, a, b, n, k))
    launch_gemm_plan(gemm_plan<T>(rt, m, n, k, /*b_kmajor=*/false, /*skinny_serves=*/false,
                                  /*splitk_serves=*/false, /*wgmma_serves=*/true),
                     c, a, b, m, n, k, /*b_kmajor=*/false, stream);
  else if (gemm_has_tensor_cores<T>(target))
    gemm_on_tensor_cores(rt, c, a, b, m, n, k, stream);
  else
    gemm(rt, c, a, b, m, n, k, gemm_tiles_for(m, n, k), stream);
}

template <Element T>
void linear(Runtime &rt, T *c, const T *a, const T *w, int m, int n, int k, Stream stream) {
  check_operands(c, a, w, m, n, k);
  const jit::Target &target = rt.default_device().target();
  const bool skinny = detail::linear_skinny_serves<T>(target, c, a, w, m, n, k);
  const bool splitk = detail::linear_splitk_serves<T>(target, c, a, w, m, n, k);
  const bool wgmma = detail::gemm_wgmma_serves<T>(target, c, a, w, n, k);
  detail::require(skinny || splitk || wgmma, "linear", [&] {
    return "runs on sm_90a only, for half and bfloat16 with n and k multiples of 8 and 16-byte "
           "aligned matrices (the device's target is " +
           target.id() + ")";
  });
  launch_gemm_plan(gemm_plan<T>(rt, m, n, k, /*b_kmajor=*/true, skinny, splitk, wgmma), c, a, w, m,
                   n, k,
                   /*b_kmajor=*/true, stream);
}

namespace reference {

template <Element T>
std::vector<double> gemm(std::span<const T> a, std::span<const T> b, int m, int n, int k) {
  std::vector<double> right(b.size()); // B in double once, not once per row of A
  std::transform(b.begin(), b.end(), right.begin(), [](T value) { return to_double(value); });
  std::vector<double> c(static_cast<std::size_t>(m) * n, 0.0);
  for (int row = 0; row < m; ++row)
    for (int i = 0; i < k; ++i) {
      const double left = to_double(a[static_cast<std::size_t>(row) * k + i]);
      const double *b_row = right.data() + static_cast<std::size_t>(i) * n;
      double *c_row = c.data() + static_cast<std::size_t>(row) * n;
      for (int col = 0; col < n; ++col)
        c_row[col] += left * b_row[col];
    }
  return c;
}

template <Element T>
std::vector<double> linear(std::span<const T> a, std::span<const T> w, int m, int n, int k) {
  std::vector<T> transposed(w.size()); // W [n, k] as B [k, n]
  for (int row = 0; row < n; ++row)
    for (int i = 0; i < k; ++i)
      transposed[static_cast<std::size_t>(i) * n + row] = w[static_cast<std::size_t>(row) * k + i];
  return gemm<T>(a, transposed, m, n, k);
}

} // namespace reference

#define KJIT_INSTANTIATE(T)                                                                        \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, const GemmTiles &,    \
                        Stream);                                                                   \
  template void gemm<T>(Runtime &, T *, const T *, const T *, int, int, int, Stream);              \
  template bool gemm_has_tensor_cores<T>(const jit::Target &);                                     \
  template detail::ChosenVariant detail::gemm_mma_variant<T>(int, int);                            \
  template detail::ChosenVariant detail::gemm_mfma_variant<T>(int, int);                           \
  template detail::ChosenVariant detail::gemm_variant<T>(const GemmTiles &);                       \
  template detail::ChosenVariant detail::gemm_wgmma_variant<T>(int, int, int, bool);               \
  template detail::ChosenVariant detail::linear_skinny_variant<T>(int, int, int);                  \
  template detail::ChosenVariant detail::linear_splitk_variant<T>(int, int, int);                  \
  template detail::ChosenVariant detail::heuristic_gemm_variant<T>(int, int, int, bool, bool,      \
                                                                   bool, bool);                    \
  template bool detail::linear_splitk_serves<T>(const jit::Target &, const void *, const void *,   \
                                                const void *, int, int, int);                      \
  template void detail::launch_gemm_variant<T>(Runtime &, const detail::ChosenVariant &, T *,      \
                                               const T *, const T *, int, int, int, bool, Stream); \
  template bool detail::linear_skinny_serves<T>(const jit::Target &, const void *, const void *,   \
                                                const void *, int, int, int);                      \
  template bool detail::gemm_wgmma_serves<T>(const jit::Target &, const void *, const void *,      \
                                             const void *, int, int);                              \
  template void linear<T>(Runtime &, T *, const T *, const T *, int, int, int, Stream);            \
  template std::vector<double> reference::linear<T>(std::span<const T>, std::span<const T>, int,   \
                                                    int, int);                                     \
  template std::vector<double> reference::gemm<T>(std::span<const T>, std::span<const T>, int,     \
                                                  int, int);
KJIT_INSTANTIATE(float)
KJIT_INSTANTIATE(Half)
KJIT_INSTANTIATE(BFloat16)
#undef KJIT_INSTANTIATE

} // namespace kjit::ops
