#include "kjit/ops/moe.hpp"

#include "kjit/ops/quant.hpp"
#include "kjit/runtime/tensor_map.hpp"
#include "kjit/templates/library.hpp"
#include "launch.hpp"
#include "moe_gemm.hpp"
#include "moe_mfma.hpp"
#include "plans.hpp"
#include "variants.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace kjit::ops {

namespace {

// The grouped GEMM's tile of rows (moe_gemm_wgmma's BM) and its threads.
constexpr int moe_block_m = 128, moe_threads = 384;
constexpr int max_topk_experts = 512, max_align_experts = 256, max_top_k = 32, max_groups = 64;
// Up to this many pairs the gate-up GEMM gathers the tokens' rows in its loads (GATHER 1): one
// launch fewer, no slower a GEMM. With many more (4096 tokens) its cp.async copies made the GEMM
// slower than a moe_gather pass and TMA reads of the sorted rows (BENCHMARKS.md, "fused_moe:
// the gather, decode and prefill").
constexpr int max_gathering_pairs = 2048;
// fused_moe decodes (moe_decode_gate_up, moe_decode_down) up to this many tokens: at one token
// they beat the grouped path's four launches, each GEMM one wave of mostly empty tiles
// (BENCHMARKS.md, "fused_moe: a decode path for one token"); more tokens were not measured on them.
constexpr int max_decode_tokens = 1;
// moe_gather's rows a block, and its threads: a warp a row. Plain stores (CACHE 0): 16 rows a
// block with streaming stores ran the pass 9-12% faster alone on the H100, but were neither
// checked on the device nor timed in the layer (BENCHMARKS.md, "moe_gather: padding rows left
// alone").
constexpr int gather_rows = 8, gather_threads = 256, gather_cache = 0;

std::string str(std::int64_t value) { return std::to_string(value); }

constexpr std::string_view topk_op = "moe_topk";

// The sizes and options of a top-k routing (the device's and the reference's).
void check_topk(int tokens, int experts, int top_k, const TopkOptions &options) {
  constexpr std::string_view op = topk_op;
  detail::require_range(tokens, 0, INT32_MAX, op, "tokens");
  detail::require_range(experts, 1, max_topk_experts, op, "experts");
  detail::require_range(options.groups, 1, max_groups, op, "groups");
  detail::require(experts % options.groups == 0, op, [&] {
    return str(options.groups) + " groups do not divide " + str(experts) + " experts";
  });
  detail::require_range(options.top_groups, 1, options.groups, op, "top_groups");
  const int eligible = experts / options.groups * options.top_groups;
  detail::require(top_k >= 1 && top_k <= std::min(eligible, max_top_k), op, [&] {
    return "top_k is " + str(top_k) + ", must be in [1, " + str(std::min(eligible, max_top_k)) +
           "] (" + str(eligible) + " experts in the chosen groups)";
  });
}

// Aligned slices of the workspace, in order. An address, not a pointer: the workspace's size is
// measured by carving one at address 0 (no arithmetic on a null pointer).
class Carve {
public:
  explicit Carve(void *base) : base_(reinterpret_cast<std::uintptr_t>(base)) {}
  template <typename U> U *take(std::size_t count) {
    U *at = reinterpret_cast<U *>(base_ + used_);
    used_ += (count * sizeof(U) + 255) / 256 * 256;
    return at;
  }
  std::size_t used() const { return used_; }

private:
  std::uintptr_t base_;
  std::size_t used_ = 0;
};

// The alignment's arrays (moe_align's output) for `pairs` pairs in `rows` sorted rows, first in
// both fused_moe forms' workspaces.
MoeAlignment carve_alignment(Carve &carve, int pairs, std::size_t rows) {
  MoeAlignment alignment;
  alignment.sorted_pairs = carve.take<int>(rows);
  alignment.block_experts = carve.take<int>(rows / moe_block_m);
  alignment.pair_positions = carve.take<int>(pairs);
  alignment.totals = carve.take<int>(2);
  return alignment;
}

// What fused_moe keeps in its workspace.
template <Element T> struct Workspace {
  MoeAlignment alignment;
  T *x_sorted;   // the tokens' rows sorted by expert (many pairs); later each pair's expert output
  T *hidden;     // silu(gate) * up, [rows, inter]
  int *schedule; // the grouped GEMMs' dynamic tile order's counters, one each
  std::size_t bytes;
};

template <Element T>
Workspace<T> carve(void *base, int tokens, int top_k, const MoeWeights<T> &layer) {
  const int pairs = tokens * top_k;
  const std::size_t rows = moe_align_rows(pairs, layer.experts, moe_block_m);
  Carve carve(base);
  Workspace<T> w;
  w.alignment = carve_alignment(carve, pairs, rows);
  w.x_sorted = carve.take<T>(rows * layer.hidden);
  w.hidden = carve.take<T>(rows * layer.inter);
  w.schedule = carve.take<int>(2);
  w.bytes = carve.used();
  return w;
}

TensorMap map_of(const Device &device, TensorMapElement element, const void *base,
                 std::uint64_t rows, int columns, int box_rows) {
  return encode_tensor_map(device, {element, base, rows, std::uint64_t(columns),
                                    std::uint64_t(columns) * 2, std::uint32_t(box_rows), 64});
}

// The grouped GEMMs' GROUP_M where the experts have two tiles of rows or more each: the smallest
// power of two above the mean tiles per expert, up to 16, so that a group of tile rows holds an
// expert's run rather than splitting it, and the blocks sweeping an expert's weights share them
// in L2 (BENCHMARKS.md, "fused_moe: the gather, decode and prefill": the sweep of GROUP_M on the
// tokens' rows). Else 8, as before.
int group_m_for(int pairs, int experts) {
  const double tiles = static_cast<double>(pairs) / experts / moe_block_m;
  if (tiles < 2)
    return 8;
  int group_m = 4;
  while (group_m <= tiles && group_m < 16)
    group_m *= 2;
  return group_m;
}

} // namespace

namespace detail {

int grouped_block_n(std::int64_t pairs, int experts, int n, int wide, int multiprocessors) {
  // The wide tiles' count against the multiprocessors, at the most tiles of rows the bucket can
  // take: fewer tiles than multiprocessors leave some idle.
  const std::int64_t most_rows =
      divide_up(pairs, moe_block_m) + std::min<std::int64_t>(experts, pairs);
  if (most_rows * divide_up(n, wide) < multiprocessors)
    return wide / 2;
  if (pairs > max_gathering_pairs)
    return wide;
  // Decode: the tiles of rows routing uniformly at random fills, on average: the experts
  // touched (each pair drawing one of `experts`), each its share of the pairs in tiles of rows.
  const double touched = experts * (1 - std::pow(1 - 1.0 / experts, static_cast<double>(pairs)));
  const double rows = touched * std::ceil(pairs / touched / moe_block_m);
  const auto last_wave_fill = [&](int block_n) {
    const double tiles = rows * divide_up(n, block_n);
    return tiles / (std::ceil(tiles / multiprocessors) * multiprocessors);
  };
  return last_wave_fill(wide / 2) > last_wave_fill(wide) + 0.05 ? wide / 2 : wide;
}

bool gate_up_gathers(const jit::Target &target, int pairs) {
  return rows_bucket(pairs) <= max_gathering_pairs && !moe_mfma_serves(target);
}

bool fused_moe_decodes(const jit::Target &target, int tokens) {
  return tokens <= max_decode_tokens && !moe_mfma_serves(target);
}

namespace {

// What the grouped GEMMs' records are kept under, on both vendors and for both weight formats
// (moe_gemm_wgmma, moe_gemm_mfma, moe_gemm_fp8): problem {GATED, T}, extents the experts, k, the
// pairs' power-of-two bucket (the plans' own) and n.
template <Element T> ParamValues grouped_tuning_problem(bool gated) {
  return {{"GATED", gated ? 1 : 0}, {"T", element_name<T>()}};
}

ParamValues grouped_tuning_extents(int pairs, int experts, int n, int k) {
  return {{"experts", experts}, {"k", k}, {"m", rows_bucket(pairs)}, {"n", n}};
}

} // namespace

// The heuristic: grouped_block_n's columns per tile, judged at the pairs' power-of-two bucket
// (fused_moe's plans are kept per bucket). Stages: for a wgmma of 256 columns 3 where K is long
// (4096 and more), else 4; 6 for 128 columns (BENCHMARKS.md, "fused_moe": the --sweep on an H100).
// GROUP_M: group_m_for. EPILOGUE 1 (C through shared memory) above the gathering sizes, where
// it made both GEMMs of both layers faster at 4096 tokens; the decode sizes keep EPILOGUE 0 (not
// measured there). PINGPONG 0: taking tiles of 128 x 128 in turns was slower (BENCHMARKS.md,
// "fused_moe prefill: the grouped GEMMs' stores through shared memory"). SKIP_PADDING 1. Every
// tunable is named here: a tuning record's winner replaces the variant's tunables (with_winner).
// On AMD, moe_mfma_variant's, whose records are kept under the same problem and extents.
template <Element T>
ChosenVariant grouped_gemm_variant(const TuningLookup &lookup, bool gated, bool gather, int pairs,
                                   int experts, int n, int k) {
  const ParamValues problem = grouped_tuning_problem<T>(gated);
  const ParamValues extents = grouped_tuning_extents(pairs, experts, n, k);
  const int multiprocessors = lookup.device.compute_units;
  if (moe_mfma_serves(jit::Target::parse(lookup.device.target))) // AMD: never gathers
    return tuned_variant(lookup, moe_mfma_variant<T>(gated, pairs, experts, n, multiprocessors),
                         problem, extents);
  static const Template &tmpl = templates::find("moe_gemm_wgmma");
  const std::int64_t bucket = detail::rows_bucket(pairs);
  const int block_n = grouped_block_n(bucket, experts, n, gated ? 128 : 256, multiprocessors);
  const int wgmma_n = block_n * (gated ? 2 : 1);
  detail::ChosenVariant variant{&tmpl,
                                {{"T", element_name<T>()},
                                 {"BLOCK_N", block_n},
                                 {"STAGES", wgmma_n == 256 ? (k >= 4096 ? 3 : 4) : 6},
                                 {"GATED", gated ? 1 : 0},
                                 {"GROUP_M", group_m_for(pairs, experts)},
                                 {"GATHER", gather ? 1 : 0},
                                 {"PINGPONG", 0},
                                 {"EPILOGUE", pairs > max_gathering_pairs ? 1 : 0},
                                 {"SKIP_PADDING", 1}}};
  return tuned_variant(lookup, variant, problem, extents);
}

template <Element T>
ChosenVariant grouped_gemm_variant(Runtime &rt, bool gated, bool gather, int pairs, int experts,
                                   int n, int k) {
  return grouped_gemm_variant<T>(tuning_lookup(rt), gated, gather, pairs, experts, n, k);
}

// STAGES 6 (the most that fit: 32 KiB a stage) and group_m_for's GROUP_M, as the bf16 GEMM's
// 128-column variants take; not yet swept on a GPU, so a record's winner is taken where the table
// holds one.
template <Element T>
ChosenVariant moe_fp8_gemm_variant(const TuningLookup &lookup, bool gated, int pairs, int experts,
                                   int n, int k) {
  static const Template &tmpl = templates::find("moe_gemm_fp8");
  const ChosenVariant heuristic{&tmpl,
                                {{"T", element_name<T>()},
                                 {"STAGES", 6},
                                 {"GATED", gated ? 1 : 0},
                                 {"GROUP_M", group_m_for(pairs, experts)}}};
  return tuned_variant(lookup, heuristic, grouped_tuning_problem<T>(gated),
                       grouped_tuning_extents(pairs, experts, n, k));
}

GroupedPlan make_grouped_plan(Runtime &rt, const ChosenVariant &variant) {
  if (variant.tmpl->name() == "moe_gemm_mfma")
    return make_moe_mfma_plan(rt, variant);
  const bool gated = variant.integer("GATED") == 1;
  const int block_n = variant.integer("BLOCK_N");
  const auto shared_bytes = static_cast<unsigned>(
      variant.tmpl->tuning().shared_bytes(variant.tmpl->bind(variant.params)));
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  kernel.allow_shared_bytes(shared_bytes);
  return {&kernel,      block_n,
          gated,        variant.integer("GATHER") == 1,
          shared_bytes, variant.integer("EPILOGUE") == 1};
}

template <Element T>
void launch_grouped(const GroupedPlan &plan, T *c, const T *a, const T *w, std::size_t rows,
                    const MoeAlignment &alignment, int experts, int n, int k, int top_k,
                    int *schedule, Stream stream, int most_blocks, bool schedule_zeroed) {
  if (moe_mfma_serves(plan.kernel->device().target()))
    return launch_moe_mfma(plan, c, a, w, rows, alignment, n, k, stream);
  const TensorMapElement element =
      std::is_same_v<T, BFloat16> ? TensorMapElement::bfloat16 : TensorMapElement::float16;
  const Device &device = plan.kernel->device();
  // A gathering variant reads the token rows a [tokens, k] itself; its map_a is unused.
  const TensorMap map_a =
      plan.gather ? TensorMap{} : map_of(device, element, a, rows, k, moe_block_m / 2);
  const TensorMap map_w = map_of(
      device, element, w, std::uint64_t(experts) * n * (plan.gated ? 2 : 1), k, plan.block_n);
  // EPILOGUE 1 stores C [rows, n] in boxes of 64 x 64.
  const TensorMap map_c = plan.epilogue ? map_of(device, element, c, rows, n, 64) : TensorMap{};
  // Persistent: at most one block per multiprocessor, no more than the tiles can use.
  const long long tiles =
      static_cast<long long>(rows / moe_block_m) * detail::divide_up(n, plan.block_n);
  const auto blocks = static_cast<unsigned>(std::max<long long>(
      1, std::min<long long>(tiles, most_blocks > 0 ? most_blocks : device.multiprocessors())));
  if (schedule != nullptr && !schedule_zeroed)
    device.fill(schedule, 0, sizeof(int), stream);
  plan.kernel->launch(
      {.grid = blocks, .block = moe_threads, .shared_bytes = plan.shared_bytes, .stream = stream},
      c, map_a, map_w, alignment.block_experts, alignment.totals, n, k, a, alignment.sorted_pairs,
      top_k, schedule, map_c);
}

template <Element T>
void grouped_gemm(Runtime &rt, const ChosenVariant &variant, T *c, const T *a, const T *w,
                  std::size_t rows, const MoeAlignment &alignment, int experts, int n, int k,
                  int top_k, int *schedule, Stream stream, int most_blocks) {
  launch_grouped(make_grouped_plan(rt, variant), c, a, w, rows, alignment, experts, n, k, top_k,
                 schedule, stream, most_blocks);
}

} // namespace detail

namespace {

// moe_align: one block per expert. `schedule` (may be null) gets two zeros: fused_moe's grouped
// GEMMs' tile counters, set without a memset each.
void launch_align(const Kernel &kernel, const MoeAlignment &out, const int *ids, int pairs,
                  int experts, Stream stream, int *schedule = nullptr) {
  kernel.launch({.grid = static_cast<unsigned>(experts), .block = 1024, .stream = stream},
                out.sorted_pairs, out.block_experts, out.pair_positions, out.totals, ids, pairs,
                schedule);
}

// What fused_moe launches for one layer shape, count of pairs (rounded up to a power of two)
// and GROUP_M: chosen and compiled on the shape's first call, then found again by one
// lookup (the tuning table and the Runtime are asked once), as the other operators keep their
// plans.
struct MoePlan {
  const Kernel *align, *gather, *combine; // gather: null where the gate-up GEMM gathers
  detail::GroupedPlan gate_up, down;
};
using MoePlanKey = std::tuple<std::uint64_t, int, int, int, int, std::int64_t, int, int>;

template <Element T>
const MoePlan &moe_plan(Runtime &rt, const MoeWeights<T> &layer, int pairs, int vec) {
  thread_local std::map<MoePlanKey, MoePlan> plans;
  const std::int64_t bucket = detail::rows_bucket(pairs);
  const MoePlanKey key{
      rt.id(), detail::element_code<T>(),        layer.experts, layer.hidden, layer.inter, bucket,
      vec,     group_m_for(pairs, layer.experts)};
  auto found = plans.find(key);
  if (found != plans.end()) [[likely]]
    return found->second;
  static const Template &align = templates::find("moe_align");
  static const Template &gather = templates::find("moe_gather");
  static const Template &combine = templates::find("moe_combine");
  const ParamValues vector_params = {{"T", element_name<T>()}, {"VEC", vec}};
  // moe_gemm_mfma (AMD) reads sorted rows only: moe_gather runs before it at every size.
  const bool gathering = detail::gate_up_gathers(rt.default_device().target(), pairs);
  const detail::TuningLookup lookup = detail::tuning_lookup(rt);
  const MoePlan plan{&rt.kernel(align, {{"EXPERTS", layer.experts}, {"BLOCK_M", moe_block_m}}),
                     gathering ? nullptr
                               : &rt.kernel(gather, {{"T", element_name<T>()},
                                                     {"VEC", vec},
                                                     {"ROWS", gather_rows},
                                                     {"CACHE", gather_cache}}),
                     &rt.kernel(combine, vector_params),
                     detail::make_grouped_plan(rt, detail::grouped_gemm_variant<T>(
                                                       lookup, true, gathering, pairs,
                                                       layer.experts, layer.inter, layer.hidden)),
                     detail::make_grouped_plan(rt, detail::grouped_gemm_variant<T>(
                                                       lookup, false, false, pairs, layer.experts,
                                                       layer.hidden, layer.inter))};
  return plans.emplace(key, plan).first->second;
}

// The decode path's two kernels (moe_routing.hip) for an element type and vector width.
struct MoeDecodePlan {
  const Kernel *gate_up, *down;
};

template <Element T> const MoeDecodePlan &moe_decode_plan(Runtime &rt, int vec) {
  thread_local std::map<std::tuple<std::uint64_t, int, int>, MoeDecodePlan> plans;
  const std::tuple<std::uint64_t, int, int> key{rt.id(), detail::element_code<T>(), vec};
  auto found = plans.find(key);
  if (found != plans.end()) [[likely]]
    return found->second;
  static const Template &gate_up = templates::find("moe_decode_gate_up");
  static const Template &down = templates::find("moe_decode_down");
  const ParamValues params = {{"T", element_name<T>()}, {"VEC", vec}};
  return plans.emplace(key, MoeDecodePlan{&rt.kernel(gate_up, params), &rt.kernel(down, params)})
      .first->second;
}

// fused_moe's decode path: a warp per output of the gate-up projection, a block per output of
// the down one, gated [pairs, inter] in the workspace between them.
template <Element T>
void decode_layer(Runtime &rt, T *out, const T *x, const float *weights, const int *ids, int tokens,
                  int top_k, const MoeWeights<T> &layer, T *gated, Stream stream) {
  const int vec = std::min(detail::vector_width(sizeof(T), layer.hidden, {x, layer.w13}),
                           detail::vector_width(sizeof(T), layer.inter, {layer.w2, gated}));
  const MoeDecodePlan &plan = moe_decode_plan<T>(rt, vec);
  constexpr int threads = 256;
  const int warps = threads / rt.default_device().target().warp_size();
  const int pairs = tokens * top_k;
  const auto blocks = [&](std::int64_t outputs) {
    return static_cast<unsigned>((outputs + warps - 1) / warps);
  };
  plan.gate_up->launch(
      {.grid = blocks(std::int64_t(pairs) * layer.inter), .block = threads, .stream = stream},
      gated, x, layer.w13, ids, pairs, top_k, layer.experts, layer.hidden, layer.inter);
  constexpr int down_threads = 128; // a block per output element (moe_routing.hip)
  plan.down->launch({.grid = static_cast<unsigned>(tokens * layer.hidden),
                     .block = down_threads,
                     .stream = stream},
                    out, static_cast<const T *>(gated), layer.w2, weights, ids, tokens, top_k,
                    layer.experts, layer.hidden, layer.inter);
}

constexpr std::string_view layer_op = "fused_moe";

// Both fused_moe forms' counts and sizes: hidden and inter positive multiples of `multiple`.
void check_layer_sizes(int tokens, int top_k, int experts, int hidden, int inter, int multiple,
                       std::string_view why) {
  constexpr std::string_view op = layer_op;
  detail::require_range(tokens, 0, INT32_MAX, op, "tokens");
  detail::require_range(experts, 1, max_align_experts, op, "experts");
  detail::require_range(top_k, 1, experts, op, "top_k");
  detail::require(static_cast<long long>(tokens) * top_k <= INT32_MAX, op,
                  "tokens * top_k exceeds 2^31 - 1");
  for (const auto &[size, name] : {std::pair{hidden, "hidden"}, {inter, "inter"}})
    detail::require(size > 0 && size % multiple == 0, op, [&] {
      return std::string(name) + " is " + str(size) + ", must be a positive multiple of " +
             str(multiple) + std::string(why);
    });
}

// Both fused_moe forms' memory: out, x and the weights 16-byte aligned (TMA), the workspace
// 256-byte aligned and at least `needed()` bytes, out and x apart; and the device sm_90a, or
// where `mfma` (the 16-bit form) gfx942 or gfx950 too.
struct LayerPointers {
  const void *out, *x, *w13, *w2, *workspace;
};
template <typename Needed>
void check_layer_memory(Runtime &rt, const LayerPointers &p, int tokens, std::size_t row_bytes,
                        std::size_t workspace_bytes, Needed needed_bytes, bool mfma = false) {
  constexpr std::string_view op = layer_op;
  for (const auto &[pointer, name] : {std::pair<const void *, const char *>{p.out, "out"},
                                      {p.x, "x"},
                                      {p.w13, "w13"},
                                      {p.w2, "w2"}})
    detail::require(detail::aligned(pointer, 16), op,
                    [&] { return std::string(name) + " is not 16-byte aligned"; });
  detail::require(detail::aligned(p.workspace, 256), op, "workspace is not 256-byte aligned");
  detail::require_disjoint(p.out, tokens * row_bytes, p.x, tokens * row_bytes, op, "out and x");
  const std::size_t needed = needed_bytes();
  detail::require(workspace_bytes >= needed, op, [&] {
    return "the workspace holds " + str(static_cast<std::int64_t>(workspace_bytes)) +
           " bytes; fused_moe_workspace_bytes asks for " + str(static_cast<std::int64_t>(needed));
  });
  const jit::Target &target = rt.default_device().target();
  detail::require(target.id() == "sm_90a" || (mfma && detail::moe_mfma_serves(target)), op, [&] {
    return std::string(mfma ? "runs on sm_90a (wgmma and TMA), gfx942 and gfx950 (MFMA) only"
                            : "runs on sm_90a only (wgmma and TMA)") +
           "; the device's target is " + target.id();
  });
}

// With `options.validate`: the ids of `pairs` pairs copied to the host once the device has done
// what it was given (moe_topk may be writing them on any stream), and checked.
void validate_ids(Runtime &rt, const FusedMoeOptions &options, const int *ids, int pairs, int top_k,
                  int experts) {
  if (!options.validate)
    return;
  std::vector<int> host(static_cast<std::size_t>(pairs));
  const Device &device = rt.default_device();
  device.synchronize();
  device.copy_to_host(host.data(), ids, host.size() * sizeof(int));
  check_expert_ids(host, top_k, experts);
}

// What fused_moe with FP8 weights keeps in its workspace: the alignment, each GEMM's e4m3
// activations and their scales, the gated intermediate and each pair's expert output.
template <Element T> struct WorkspaceFp8 {
  MoeAlignment alignment;
  std::uint8_t *x_q, *hidden_q;    // [rows, hidden], [rows, inter]
  float *x_scales, *hidden_scales; // [rows, hidden / 128], [rows, inter / 128]
  T *hidden, *y_sorted;            // [rows, inter], [rows, hidden]
  std::size_t bytes;
};

template <Element T>
WorkspaceFp8<T> carve_fp8(void *base, int tokens, int top_k, const MoeWeightsFp8 &layer) {
  const int pairs = tokens * top_k;
  const std::size_t rows = moe_align_rows(pairs, layer.experts, moe_block_m);
  Carve carve(base);
  WorkspaceFp8<T> w;
  w.alignment = carve_alignment(carve, pairs, rows);
  w.x_q = carve.take<std::uint8_t>(rows * layer.hidden);
  w.hidden_q = carve.take<std::uint8_t>(rows * layer.inter);
  w.x_scales = carve.take<float>(rows * (layer.hidden / 128));
  w.hidden_scales = carve.take<float>(rows * (layer.inter / 128));
  w.hidden = carve.take<T>(rows * layer.inter);
  w.y_sorted = carve.take<T>(rows * layer.hidden);
  w.bytes = carve.used();
  return w;
}

// One of the FP8 layer's grouped GEMMs, compiled and allowed its shared memory.
struct Fp8Gemm {
  const Kernel *kernel;
  unsigned shared_bytes;
};

// `variant` of moe_gemm_fp8 (detail::moe_fp8_gemm_variant) compiled, and allowed its stages'
// shared memory.
Fp8Gemm fp8_gemm(Runtime &rt, const detail::ChosenVariant &variant) {
  constexpr int stage_bytes = 128 * 128 * 2;
  const int stages = variant.integer("STAGES");
  const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
  const auto shared_bytes = static_cast<unsigned>(stages * stage_bytes + 1024 + stages * 16);
  kernel.allow_shared_bytes(shared_bytes);
  return {&kernel, shared_bytes};
}

// C [rows, n] of the FP8 grouped GEMM (moe_gemm_fp8) over the used tiles of `alignment`.
template <Element T>
void launch_fp8_gemm(const Fp8Gemm &gemm, T *c, const std::uint8_t *a, const float *scale_a,
                     const std::uint8_t *w, const float *scale_w, std::size_t rows,
                     const MoeAlignment &alignment, int experts, int n, int k, bool gated,
                     Stream stream) {
  const Device &device = gemm.kernel->device();
  const auto map = [&](const std::uint8_t *base, std::uint64_t map_rows, int box_rows) {
    return encode_tensor_map(device, {TensorMapElement::uint8, base, map_rows, std::uint64_t(k),
                                      std::uint64_t(k), std::uint32_t(box_rows), 128});
  };
  const int block_n = gated ? 64 : 128;
  const TensorMap map_a = map(a, rows, moe_block_m);
  const TensorMap map_w = map(w, std::uint64_t(experts) * n * (gated ? 2 : 1), block_n);
  const long long tiles = static_cast<long long>(rows / moe_block_m) * (n / block_n);
  const auto blocks = static_cast<unsigned>(
      std::max<long long>(1, std::min<long long>(tiles, device.multiprocessors())));
  gemm.kernel->launch(
      {.grid = blocks, .block = moe_threads, .shared_bytes = gemm.shared_bytes, .stream = stream},
      c, map_a, map_w, scale_a, scale_w, alignment.block_experts, alignment.totals, n, k);
}

// What fused_moe with FP8 weights launches for one layer shape and bucket of pairs.
struct MoePlanFp8 {
  const Kernel *align, *quantize, *combine;
  Fp8Gemm gate_up, down;
};

template <Element T>
const MoePlanFp8 &moe_plan_fp8(Runtime &rt, const MoeWeightsFp8 &layer, int pairs, int vec) {
  thread_local std::map<MoePlanKey, MoePlanFp8> plans;
  const MoePlanKey key{
      rt.id(),     detail::element_code<T>(),  layer.experts, layer.hidden,
      layer.inter, detail::rows_bucket(pairs), vec,           group_m_for(pairs, layer.experts)};
  auto found = plans.find(key);
  if (found != plans.end()) [[likely]]
    return found->second;
  static const Template &align = templates::find("moe_align");
  static const Template &quantize = templates::find("moe_quantize_fp8");
  static const Template &combine = templates::find("moe_combine");
  const detail::TuningLookup lookup = detail::tuning_lookup(rt);
  const MoePlanFp8 plan{
      &rt.kernel(align, {{"EXPERTS", layer.experts}, {"BLOCK_M", moe_block_m}}),
      &rt.kernel(quantize, {{"T", element_name<T>()}}),
      &rt.kernel(combine, {{"T", element_name<T>()}, {"VEC", vec}}),
      fp8_gemm(rt, detail::moe_fp8_gemm_variant<T>(lookup, true, pairs, layer.experts, layer.inter,
                                                   layer.hidden)),
      fp8_gemm(rt, detail::moe_fp8_gemm_variant<T>(lookup, false, pairs, layer.experts,
                                                   layer.hidden, layer.inter))};
  return plans.emplace(key, plan).first->second;
}

// Rows [0, rows) of q and scales (moe_quantize_fp8): src's rows, gathered through sorted_pairs
// where it is not null.
template <Element T>
void launch_quantize(const Kernel &kernel, std::uint8_t *q, float *scales, const T *src,
                     const MoeAlignment &alignment, const int *sorted_pairs, std::size_t rows,
                     int top_k, int k, Stream stream) {
  constexpr int warps = 4; // a warp per block of 128 columns
  kernel.launch({.grid = {static_cast<unsigned>(rows),
                          static_cast<unsigned>(detail::divide_up(k / 128, warps))},
                 .block = warps * 32,
                 .stream = stream},
                q, scales, src, sorted_pairs, alignment.totals, top_k, k);
}

} // namespace

template <Element T>
void moe_topk(Runtime &rt, float *weights, int *ids, const T *logits, const float *bias, int tokens,
              int experts, int top_k, const TopkOptions &options, Stream stream) {
  detail::require_pointer(weights, topk_op, "weights");
  detail::require_pointer(ids, topk_op, "ids");
  detail::require_pointer(logits, topk_op, "logits");
  check_topk(tokens, experts, top_k, options);
  if (tokens == 0)
    return;
  static const Template &tmpl = templates::find("moe_topk");
  const Kernel &kernel =
      rt.kernel(tmpl, {{"T", element_name<T>()},
                       {"EXPERTS", experts},
                       {"TOPK", top_k},
                       {"SCORING", options.scoring == TopkOptions::Scoring::sigmoid ? 1 : 0},
                       {"GROUPS", options.groups},
                       {"TOPK_GROUP", options.top_groups}});
  const int warp = rt.default_device().target().warp_size();
  constexpr int threads = 256;
  const int tokens_per_block = threads / warp;
  kernel.launch({.grid = static_cast<unsigned>(detail::divide_up(tokens, tokens_per_block)),
                 .block = threads,
                 .stream = stream},
                weights, ids, logits, bias, tokens, options.renormalize ? 1 : 0, options.scale);
}

template <Element T>
void topk_softmax(Runtime &rt, float *weights, int *ids, const T *logits, int tokens, int experts,
                  int top_k, bool renormalize, Stream stream) {
  moe_topk<T>(rt, weights, ids, logits, nullptr, tokens, experts, top_k,
              {.renormalize = renormalize}, stream);
}

std::size_t moe_align_rows(int pairs, int experts, int block_m) {
  const std::size_t blocks =
      static_cast<std::size_t>(detail::divide_up(pairs, block_m)) + std::min(experts, pairs);
  return blocks * block_m;
}

void moe_align(Runtime &rt, const MoeAlignment &out, const int *ids, int pairs, int experts,
               int block_m, Stream stream) {
  constexpr std::string_view op = "moe_align";
  detail::require_pointer(out.sorted_pairs, op, "sorted_pairs");
  detail::require_pointer(out.block_experts, op, "block_experts");
  detail::require_pointer(out.pair_positions, op, "pair_positions");
  detail::require_pointer(out.totals, op, "totals");
  detail::require_pointer(ids, op, "ids");
  detail::require_range(pairs, 0, INT32_MAX, op, "pairs");
  detail::require_range(experts, 1, max_align_experts, op, "experts");
  detail::require(block_m == 16 || block_m == 32 || block_m == 64 || block_m == 128, op,
                  [&] { return "block_m is " + str(block_m) + ", not 16, 32, 64 or 128"; });
  static const Template &tmpl = templates::find("moe_align");
  launch_align(rt.kernel(tmpl, {{"EXPERTS", experts}, {"BLOCK_M", block_m}}), out, ids, pairs,
               experts, stream);
}

void check_expert_ids(std::span<const int> ids, int top_k, int experts) {
  constexpr std::string_view op = layer_op;
  for (const auto &[count, name] : {std::pair{top_k, "top_k"}, {experts, "experts"}})
    detail::require(count >= 1, op,
                    [&] { return std::string(name) + " is " + str(count) + ", must be positive"; });
  detail::require(ids.size() % top_k == 0, op, [&] {
    return str(static_cast<std::int64_t>(ids.size())) +
           " ids are not a whole number of tokens of " + str(top_k);
  });
  const auto bad = std::find_if(ids.begin(), ids.end(),
                                [&](int id) { return id != -1 && (id < 0 || id >= experts); });
  detail::require(bad == ids.end(), op, [&] {
    const auto pair = static_cast<std::int64_t>(bad - ids.begin());
    return "ids[" + str(pair / top_k) + "][" + str(pair % top_k) + "] is " + str(*bad) +
           ", outside [0, " + str(experts) + ") (-1 routes a slot nowhere)";
  });
}

template <Element T>
std::size_t fused_moe_workspace_bytes(int tokens, int top_k, const MoeWeights<T> &layer) {
  return carve<T>(nullptr, tokens, top_k, layer).bytes;
}

template <Element T>
void fused_moe(Runtime &rt, T *out, const T *x, const float *weights, const int *ids, int tokens,
               int top_k, const MoeWeights<T> &layer, void *workspace, std::size_t workspace_bytes,
               Stream stream, const FusedMoeOptions &options) {
  constexpr std::string_view op = layer_op;
  for (const auto &[pointer, name] : {std::pair<const void *, const char *>{out, "out"},
                                      {x, "x"},
                                      {weights, "weights"},
                                      {ids, "ids"},
                                      {layer.w13, "w13"},
                                      {layer.w2, "w2"},
                                      {workspace, "workspace"}})
    detail::require_pointer(pointer, op, name);
  check_layer_sizes(tokens, top_k, layer.experts, layer.hidden, layer.inter, 8, "");
  check_layer_memory(
      rt, {out, x, layer.w13, layer.w2, workspace}, tokens,
      static_cast<std::size_t>(layer.hidden) * sizeof(T), workspace_bytes,
      [&] { return fused_moe_workspace_bytes(tokens, top_k, layer); },
      /*mfma=*/true);
  if (tokens == 0)
    return;
  const int pairs = tokens * top_k;
  validate_ids(rt, options, ids, pairs, top_k, layer.experts);
  const Workspace<T> w = carve<T>(workspace, tokens, top_k, layer);
  if (detail::fused_moe_decodes(rt.default_device().target(), tokens))
    return decode_layer(rt, out, x, weights, ids, tokens, top_k, layer, w.hidden, stream);
  const std::size_t rows = moe_align_rows(pairs, layer.experts, moe_block_m);
  const int vec = detail::vector_width(sizeof(T), layer.hidden, {x, out, w.x_sorted});
  const MoePlan &plan = moe_plan<T>(rt, layer, pairs, vec);
  // Where the rows are gathered apart (many pairs), the GEMMs take their tiles in the dynamic
  // order, which keeps the blocks sharing an expert's weights in step (BENCHMARKS.md,
  // "fused_moe: a dynamic tile order"): a counter each, zeroed by moe_align (no memsets).
  int *schedule = plan.gather != nullptr ? w.schedule : nullptr;
  launch_align(*plan.align, w.alignment, ids, pairs, layer.experts, stream, schedule);
  constexpr int row_threads = 128;
  if (plan.gather != nullptr) // else the gate-up GEMM gathers the rows of x in its loads
    plan.gather->launch({.grid = static_cast<unsigned>(rows / gather_rows),
                         .block = gather_threads,
                         .stream = stream},
                        w.x_sorted, x, w.alignment.sorted_pairs, w.alignment.totals, top_k,
                        layer.hidden, moe_block_m);
  detail::launch_grouped<T>(plan.gate_up, w.hidden, plan.gather != nullptr ? w.x_sorted : x,
                            layer.w13, rows, w.alignment, layer.experts, layer.inter, layer.hidden,
                            top_k, schedule, stream, 0, /*schedule_zeroed=*/true);
  T *y_sorted = w.x_sorted; // the gathered rows are read by now
  detail::launch_grouped<T>(plan.down, y_sorted, w.hidden, layer.w2, rows, w.alignment,
                            layer.experts, layer.hidden, layer.inter, top_k,
                            schedule != nullptr ? schedule + 1 : nullptr, stream, 0,
                            /*schedule_zeroed=*/true);
  plan.combine->launch(
      {.grid = static_cast<unsigned>(tokens), .block = row_threads, .stream = stream}, out,
      y_sorted, weights, w.alignment.pair_positions, top_k, layer.hidden);
}

template <Element T>
std::size_t fused_moe_workspace_bytes(int tokens, int top_k, const MoeWeightsFp8 &layer) {
  return carve_fp8<T>(nullptr, tokens, top_k, layer).bytes;
}

template <Element T>
void fused_moe(Runtime &rt, T *out, const T *x, const float *weights, const int *ids, int tokens,
               int top_k, const MoeWeightsFp8 &layer, void *workspace, std::size_t workspace_bytes,
               Stream stream, const FusedMoeOptions &options) {
  constexpr std::string_view op = layer_op;
  for (const auto &[pointer, name] : {std::pair<const void *, const char *>{out, "out"},
                                      {x, "x"},
                                      {weights, "weights"},
                                      {ids, "ids"},
                                      {layer.w13, "w13"},
                                      {layer.w2, "w2"},
                                      {layer.w13_scales.data, "w13_scales"},
                                      {layer.w2_scales.data, "w2_scales"},
                                      {workspace, "workspace"}})
    detail::require_pointer(pointer, op, name);
  check_layer_sizes(tokens, top_k, layer.experts, layer.hidden, layer.inter, 128,
                    " (the scale block)");
  for (const auto &[scales, rows, columns, name] :
       {std::tuple{layer.w13_scales, 2 * layer.inter / 128, layer.hidden / 128, "w13_scales"},
        {layer.w2_scales, layer.hidden / 128, layer.inter / 128, "w2_scales"}})
    detail::require(scales.experts == layer.experts && scales.rows == rows &&
                        scales.columns == columns,
                    op, [&] {
                      return std::string(name) + " is [" + str(scales.experts) + ", " +
                             str(scales.rows) + ", " + str(scales.columns) + "], must be [" +
                             str(layer.experts) + ", " + str(rows) + ", " + str(columns) + "]";
                    });
  for (const auto &[scales, name] :
       {std::pair{layer.w13_scales, "w13_scales"}, {layer.w2_scales, "w2_scales"}})
    detail::require(detail::aligned(scales.data, alignof(float)), op,
                    [&] { return std::string(name) + " is not 4-byte aligned"; });
  check_layer_memory(rt, {out, x, layer.w13, layer.w2, workspace}, tokens,
                     static_cast<std::size_t>(layer.hidden) * sizeof(T), workspace_bytes,
                     [&] { return fused_moe_workspace_bytes<T>(tokens, top_k, layer); });
  if (tokens == 0)
    return;
  const int pairs = tokens * top_k;
  validate_ids(rt, options, ids, pairs, top_k, layer.experts);
  const WorkspaceFp8<T> w = carve_fp8<T>(workspace, tokens, top_k, layer);
  const std::size_t rows = moe_align_rows(pairs, layer.experts, moe_block_m);
  const int vec = detail::vector_width(sizeof(T), layer.hidden, {out, w.y_sorted});
  const MoePlanFp8 &plan = moe_plan_fp8<T>(rt, layer, pairs, vec);
  launch_align(*plan.align, w.alignment, ids, pairs, layer.experts, stream);
  launch_quantize(*plan.quantize, w.x_q, w.x_scales, x, w.alignment, w.alignment.sorted_pairs, rows,
                  top_k, layer.hidden, stream);
  launch_fp8_gemm(plan.gate_up, w.hidden, w.x_q, w.x_scales, layer.w13, layer.w13_scales.data, rows,
                  w.alignment, layer.experts, layer.inter, layer.hidden, true, stream);
  launch_quantize<T>(*plan.quantize, w.hidden_q, w.hidden_scales, w.hidden, w.alignment, nullptr,
                     rows, 1, layer.inter, stream);
  launch_fp8_gemm(plan.down, w.y_sorted, w.hidden_q, w.hidden_scales, layer.w2,
                  layer.w2_scales.data, rows, w.alignment, layer.experts, layer.hidden, layer.inter,
                  false, stream);
  constexpr int row_threads = 128;
  plan.combine->launch(
      {.grid = static_cast<unsigned>(tokens), .block = row_threads, .stream = stream}, out,
      w.y_sorted, weights, w.alignment.pair_positions, top_k, layer.hidden);
}

namespace reference {

template <Element T>
Routing moe_topk(std::span<const T> logits, std::span<const float> bias, int tokens, int experts,
                 int top_k, const TopkOptions &options) {
  check_topk(tokens, experts, top_k, options);
  detail::require(logits.size() == static_cast<std::size_t>(tokens) * experts, topk_op,
                  "logits must hold tokens * experts values");
  detail::require(bias.empty() || bias.size() == static_cast<std::size_t>(experts), topk_op,
                  "bias must be empty or hold one value per expert");
  const bool sigmoid = options.scoring == TopkOptions::Scoring::sigmoid;
  const int group_size = experts / options.groups;
  Routing routing;
  for (int t = 0; t < tokens; ++t) {
    std::vector<double> score(experts), choice(experts);
    double largest = -INFINITY;
    for (int e = 0; e < experts; ++e) {
      score[e] = to_double(logits[static_cast<std::size_t>(t) * experts + e]);
      largest = std::max(largest, score[e]);
    }
    double sum = 0;
    for (int e = 0; e < experts; ++e) {
      score[e] = sigmoid ? 1 / (1 + std::exp(-score[e])) : std::exp(score[e] - largest);
      sum += score[e];
    }
    for (int e = 0; e < experts; ++e) {
      if (!sigmoid)
        score[e] /= sum;
      choice[e] = score[e] + (bias.empty() ? 0.0 : bias[e]);
    }
    // Rank by value, then by index: the order torch.topk returns equal values in.
    const auto better = [&](int a, int b) {
      return choice[a] > choice[b] || (choice[a] == choice[b] && a < b);
    };
    std::vector<bool> eligible(experts, true);
    if (options.groups > 1) {
      std::vector<double> rank(options.groups);
      for (int g = 0; g < options.groups; ++g) {
        std::vector<double> members(choice.begin() + g * group_size,
                                    choice.begin() + (g + 1) * group_size);
        std::sort(members.rbegin(), members.rend());
        rank[g] = members[0] + (bias.empty() || group_size < 2 ? 0.0 : members[1]);
      }
      std::vector<int> groups(options.groups);
      std::iota(groups.begin(), groups.end(), 0);
      std::stable_sort(groups.begin(), groups.end(),
                       [&](int a, int b) { return rank[a] > rank[b]; });
      std::vector<bool> chosen(options.groups, false);
      for (int i = 0; i < options.top_groups; ++i)
        chosen[groups[i]] = true;
      for (int e = 0; e < experts; ++e)
        eligible[e] = chosen[e / group_size];
    }
    std::vector<int> order;
    for (int e = 0; e < experts; ++e)
      if (eligible[e])
        order.push_back(e);
    std::stable_sort(order.begin(), order.end(), better);
    double picked_sum = 0;
    for (int k = 0; k < top_k; ++k)
      picked_sum += score[order[k]];
    const double factor = (options.renormalize ? 1 / picked_sum : 1.0) * options.scale;
    for (int k = 0; k < top_k; ++k) {
      routing.ids.push_back(order[k]);
      routing.weights.push_back(score[order[k]] * factor);
    }
  }
  return routing;
}

Alignment moe_align(std::span<const int> ids, int experts, int block_m) {
  Alignment alignment;
  std::vector<std::vector<int>> by_expert(experts);
  for (std::size_t p = 0; p < ids.size(); ++p) {
    detail::require(ids[p] >= 0 && ids[p] < experts, "moe_align", [&] {
      return "expert id " + str(ids[p]) + " of pair " + str(static_cast<std::int64_t>(p)) +
             " is outside [0, " + str(experts) + ")";
    });
    by_expert[ids[p]].push_back(static_cast<int>(p));
  }
  alignment.pair_positions.assign(ids.size(), -1);
  for (int e = 0; e < experts; ++e) {
    if (by_expert[e].empty())
      continue;
    for (int p : by_expert[e]) {
      alignment.pair_positions[p] = static_cast<int>(alignment.sorted_pairs.size());
      alignment.sorted_pairs.push_back(p);
    }
    while (alignment.sorted_pairs.size() % block_m != 0)
      alignment.sorted_pairs.push_back(-1);
    alignment.block_experts.resize(alignment.sorted_pairs.size() / block_m, e);
  }
  return alignment;
}

// The layer in double precision from element accessors: x_at(t, h), w13_at(e, row, h) (gate rows
// then up rows) and w2_at(e, h, j); fused_moe's and fused_moe_fp8's.
template <typename X, typename W13, typename W2>
Layer layer_in_double(X x_at, W13 w13_at, W2 w2_at, std::size_t tokens,
                      std::span<const float> weights, std::span<const int> ids, int top_k,
                      int experts, int hidden, int inter, std::span<const int> tokens_to_check) {
  std::vector<int> all;
  if (tokens_to_check.empty()) {
    all.resize(tokens);
    std::iota(all.begin(), all.end(), 0);
    tokens_to_check = all;
  }
  Layer layer{std::vector<double>(tokens_to_check.size() * hidden, 0.0),
              std::vector<double>(tokens_to_check.size() * hidden, 0.0)};
  std::vector<double> gated(inter), row(hidden);
  for (std::size_t i = 0; i < tokens_to_check.size(); ++i) {
    const std::size_t t = tokens_to_check[i];
    for (int h = 0; h < hidden; ++h)
      row[h] = x_at(t, h);
    for (int slot = 0; slot < top_k; ++slot) {
      const int e = ids[t * top_k + slot];
      if (e < 0 || e >= experts)
        continue; // routed nowhere
      for (int j = 0; j < inter; ++j) {
        double g = 0, u = 0;
        for (int h = 0; h < hidden; ++h) {
          g += row[h] * w13_at(e, j, h);
          u += row[h] * w13_at(e, inter + j, h);
        }
        gated[j] = g / (1 + std::exp(-g)) * u;
      }
      const double weight = weights[t * top_k + slot];
      for (int h = 0; h < hidden; ++h) {
        double y = 0, magnitude = 0;
        for (int j = 0; j < inter; ++j) {
          const double w = w2_at(e, h, j);
          y += gated[j] * w;
          magnitude += std::fabs(gated[j] * w);
        }
        layer.out[i * hidden + h] += weight * y;
        layer.magnitude[i * hidden + h] += std::fabs(weight) * magnitude;
      }
    }
  }
  return layer;
}

template <Element T>
Layer fused_moe(std::span<const T> x, std::span<const float> weights, std::span<const int> ids,
                int top_k, std::span<const T> w13, std::span<const T> w2, int experts, int hidden,
                int inter, std::span<const int> tokens_to_check) {
  const auto x_at = [&](std::size_t t, int h) { return to_double(x[t * hidden + h]); };
  const auto w13_at = [&](int e, int row, int h) {
    return to_double(w13[(static_cast<std::size_t>(e) * 2 * inter + row) * hidden + h]);
  };
  const auto w2_at = [&](int e, int h, int j) {
    return to_double(w2[(static_cast<std::size_t>(e) * hidden + h) * inter + j]);
  };
  return layer_in_double(x_at, w13_at, w2_at, x.size() / hidden, weights, ids, top_k, experts,
                         hidden, inter, tokens_to_check);
}

template <Element T>
Layer fused_moe_fp8(std::span<const T> x, std::span<const float> weights, std::span<const int> ids,
                    int top_k, std::span<const std::uint8_t> w13, std::span<const float> w13_scales,
                    std::span<const std::uint8_t> w2, std::span<const float> w2_scales, int experts,
                    int hidden, int inter, std::span<const int> tokens_to_check) {
  std::array<double, 256> decoded;
  for (int b = 0; b < 256; ++b)
    decoded[b] = decode_e4m3(static_cast<std::uint8_t>(b));
  // x quantised per 1 x 128 block as moe_quantize_fp8 does: scale amax / 448, e4m3 of x / scale.
  const std::size_t tokens = x.size() / hidden;
  std::vector<double> x_q(x.size());
  for (std::size_t t = 0; t < tokens; ++t)
    for (int b = 0; b < hidden; b += 128) {
      const T *block = x.data() + t * hidden + b;
      float amax = 0;
      for (int i = 0; i < 128; ++i)
        amax = std::max(amax, static_cast<float>(std::fabs(to_double(block[i]))));
      const float scale = amax / 448.0f, inverse = amax > 0 ? 448.0f / amax : 0.0f;
      for (int i = 0; i < 128; ++i)
        x_q[t * hidden + b + i] =
            decoded[encode_e4m3(static_cast<float>(to_double(block[i])) * inverse)] * scale;
    }
  const int w13_blocks = (2 * inter + 127) / 128, w2_blocks = (hidden + 127) / 128;
  const auto x_at = [&](std::size_t t, int h) { return x_q[t * hidden + h]; };
  const auto w13_at = [&](int e, int row, int h) {
    const std::size_t at = (static_cast<std::size_t>(e) * 2 * inter + row) * hidden + h;
    return decoded[w13[at]] *
           w13_scales[(static_cast<std::size_t>(e) * w13_blocks + row / 128) * (hidden / 128) +
                      h / 128];
  };
  const auto w2_at = [&](int e, int h, int j) {
    const std::size_t at = (static_cast<std::size_t>(e) * hidden + h) * inter + j;
    return decoded[w2[at]] *
           w2_scales[(static_cast<std::size_t>(e) * w2_blocks + h / 128) * (inter / 128) + j / 128];
  };
  return layer_in_double(x_at, w13_at, w2_at, tokens, weights, ids, top_k, experts, hidden, inter,
                         tokens_to_check);
}

} // namespace reference

#define KJIT_INSTANTIATE_ROUTING(T)                                                                \
  template void moe_topk<T>(Runtime &, float *, int *, const T *, const float *, int, int, int,    \
                            const TopkOptions &, Stream);                                          \
  template void topk_softmax<T>(Runtime &, float *, int *, const T *, int, int, int, bool,         \
                                Stream);                                                           \
  template reference::Routing reference::moe_topk<T>(std::span<const T>, std::span<const float>,   \
                                                     int, int, int, const TopkOptions &);
#define KJIT_INSTANTIATE_LAYER(T)                                                                  \
  template std::size_t fused_moe_workspace_bytes<T>(int, int, const MoeWeights<T> &);              \
  template void fused_moe<T>(Runtime &, T *, const T *, const float *, const int *, int, int,      \
                             const MoeWeights<T> &, void *, std::size_t, Stream,                   \
                             const FusedMoeOptions &);
#define KJIT_INSTANTIATE_REFERENCE(T)                                                              \
  template reference::Layer reference::fused_moe<T>(                                               \
      std::span<const T>, std::span<const float>, std::span<const int>, int, std::span<const T>,   \
      std::span<const T>, int, int, int, std::span<const int>);
#define KJIT_INSTANTIATE_FP8_LAYER(T)                                                              \
  template std::size_t fused_moe_workspace_bytes<T>(int, int, const MoeWeightsFp8 &);              \
  template void fused_moe<T>(Runtime &, T *, const T *, const float *, const int *, int, int,      \
                             const MoeWeightsFp8 &, void *, std::size_t, Stream,                   \
                             const FusedMoeOptions &);
#define KJIT_INSTANTIATE_FP8_REFERENCE(T)                                                          \
  template reference::Layer reference::fused_moe_fp8<T>(                                           \
      std::span<const T>, std::span<const float>, std::span<const int>, int,                       \
      std::span<const std::uint8_t>, std::span<const float>, std::span<const std::uint8_t>,        \
      std::span<const float>, int, int, int, std::span<const int>);
KJIT_INSTANTIATE_ROUTING(float)
KJIT_INSTANTIATE_ROUTING(Half)
KJIT_INSTANTIATE_ROUTING(BFloat16)
#define KJIT_INSTANTIATE_GROUPED(T)                                                                \
  template detail::ChosenVariant detail::grouped_gemm_variant<T>(Runtime &, bool, bool, int, int,  \
                                                                 int, int);                        \
  template detail::ChosenVariant detail::grouped_gemm_variant<T>(const detail::TuningLookup &,     \
                                                                 bool, bool, int, int, int, int);  \
  template detail::ChosenVariant detail::moe_fp8_gemm_variant<T>(const detail::TuningLookup &,     \
                                                                 bool, int, int, int, int);        \
  template void detail::launch_grouped<T>(const detail::GroupedPlan &, T *, const T *, const T *,  \
                                          std::size_t, const MoeAlignment &, int, int, int, int,   \
                                          int *, Stream, int, bool);                               \
  template void detail::grouped_gemm<T>(Runtime &, const detail::ChosenVariant &, T *, const T *,  \
                                        const T *, std::size_t, const MoeAlignment &, int, int,    \
                                        int, int, int *, Stream, int);
KJIT_INSTANTIATE_GROUPED(Half)
KJIT_INSTANTIATE_GROUPED(BFloat16)
#undef KJIT_INSTANTIATE_GROUPED
KJIT_INSTANTIATE_LAYER(Half)
KJIT_INSTANTIATE_LAYER(BFloat16)
KJIT_INSTANTIATE_REFERENCE(float)
KJIT_INSTANTIATE_REFERENCE(Half)
KJIT_INSTANTIATE_REFERENCE(BFloat16)
KJIT_INSTANTIATE_FP8_LAYER(Half)
KJIT_INSTANTIATE_FP8_LAYER(BFloat16)
KJIT_INSTANTIATE_FP8_REFERENCE(float)
KJIT_INSTANTIATE_FP8_REFERENCE(Half)
KJIT_INSTANTIATE_FP8_REFERENCE(BFloat16)
#undef KJIT_INSTANTIATE_FP8_LAYER
#undef KJIT_INSTANTIATE_FP8_REFERENCE
#undef KJIT_INSTANTIATE_ROUTING
#undef KJIT_INSTANTIATE_LAYER
#undef KJIT_INSTANTIATE_REFERENCE

} // namespace kjit::ops
