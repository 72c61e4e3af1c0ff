// kjit_moe_gpu_bench: fused_moe (bfloat16 and half) on the Mixtral-like layer (8 experts, top 2,
// hidden 4096, inter 14336) and a fine-grained one (64 experts, top 6, hidden 2048, inter 1408)
// at 1, 16, 256 and 4096 tokens, routed uniformly at random (distinct experts per token), each
// against two baselines measured in the same run:
// - kjit's dense GEMM for the same FLOPs: linear() at m = tokens * top_k, [2 inter, hidden] then
//   [hidden, inter] (the prefill goal: fused_moe at >= 0.8x its TFLOP/s);
// - a device-to-device copy of the weights the tokens touch (the decode goal: fused_moe reading
//   them at >= 70% of the copy's rate).
// bench/python/moe_torch.py times a torch loop over the experts on the same shapes. With
// --breakdown it times fused_moe against each of its launches alone, both ways of gathering the
// tokens' rows (a moe_gather pass, or the gate-up GEMM's own loads), and the gate-up GEMM on
// sorted rows of different contents (1, 256 and 4096 tokens, bfloat16); --sweep adds the
// gate-up GEMM's variants at 4096 tokens on the tokens' sorted rows (GROUP_M 1, 4, 8 and 16, and
// the other of 3 and 4 STAGES), both GEMMs in the static and the dynamic tile order, the down
// GEMM's GROUP_M on the gated rows, and both GEMMs in the dynamic order at each GROUP_M and at
// half the tile width. --fp8 times
// fused_moe with e4m3 weights and 128 x 128 block scales (bfloat16 activations) on both layers at
// the same counts, against the bfloat16 fused_moe and kjit's dense bfloat16 GEMM (TFLOP/s), and
// a copy of the e4m3 weight bytes the tokens touch (the decode's rate). --tiles times the grouped
// GEMMs' tile shapes at decode sizes (Bench::tiles), --prefill the grouped GEMMs in the
// heuristic's form and with candidate parameters, alone at 4096 tokens (and on one expert's
// weights) and in the layer at 16, 256 and 4096 (Bench::prefill), against the dense GEMM of their
// FLOPs; --gather-pass the moe_gather pass's
// forms at 4096 tokens against a copy of the bytes it writes, and the layer with each
// (Bench::gather).
//
// The table's fused_moe and dense GEMMs, and --prefill's rows, take turns in bursts of about 10 ms,
// so that all run at one clock, after a 4 s warm-up at 4096 tokens (interleaved_ms_per_launch:
// both sides hold at the card's power cap there); each burst is timed between device events. The
// other modes launch each once to compile and warm up, then take the median of 5 batches of
// launches, each timed on the host from the first launch to the device's synchronisation.
#include "bench/gpu_timing.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"
#include "ops/src/moe_gemm.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace kjit;
using namespace kjit::ops;

using kjit::bench::interleaved_ms_per_launch;
using kjit::bench::median_ms_per_launch;

// Fills from a hash (splitmix64's mixing) of the index and a seed: weights of gigabytes without
// the host's time. Each buffer takes its own seed, so that no two hold the same sequence (the
// fill before gave a token row the values of a weight row). fill_hashed: 16-bit values in
// [-scale, scale); fill_e4m3: e4m3 bytes, never NaN (0x7f, 0xff), for weights whose values do
// not matter.
const char *const fill_source = R"(
__device__ inline unsigned long long hashed(long long i, int seed) {
  unsigned long long h = (i + seed * 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 29);
}
template <typename T> __global__ void fill_hashed(T *to, long long n, float scale, int seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    to[i] = kjit::from_float<T>((float(hashed(i, seed) >> 40) / float(1 << 23) - 1.0f) * scale);
}
__global__ void fill_e4m3(unsigned char *to, long long n, int seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const unsigned long long h = hashed(i, seed);
    to[i] = (unsigned char)(((h >> 32) & 0x80) | ((h >> 40) % 0x7f));
  }
})";
// --gather-pass's baselines and its earlier form: store16 writes n 16-byte zeros (the write-only
// bound of a pass that writes n vectors); moe_gather_zero_padding is moe_gather<T, 8, 8> as it
// was before moe11 (padding rows written as zeros), a warp a row, 8 loads in flight a thread.
const char *const gather_source = R"(
__global__ void store16(uint4 *KJIT_RESTRICT to, long long n, unsigned value) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    to[i] = make_uint4(value, value, value, value);
}
template <typename T>
__global__ void moe_gather_zero_padding(T *KJIT_RESTRICT x_sorted, const T *KJIT_RESTRICT x,
                                        const int *KJIT_RESTRICT sorted_pairs,
                                        const int *KJIT_RESTRICT totals, int top_k, int hidden,
                                        int block_m) {
  constexpr int VEC = 8, ROWS = 8, UNROLL = 8;
  const int threads = blockDim.x / ROWS, lane = threadIdx.x % threads;
  const int row = blockIdx.x * ROWS + threadIdx.x / threads;
  if (row >= totals[0] * block_m)
    return;
  const int pair = sorted_pairs[row];
  T *to = x_sorted + static_cast<long long>(row) * hidden;
  const T *from = x + static_cast<long long>(pair < 0 ? 0 : pair / top_k) * hidden;
  for (int first = lane * VEC; first < hidden; first += threads * VEC * UNROLL) {
    kjit::Vec<T, VEC> v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = first + u * threads * VEC;
      if (pair >= 0 && i < hidden) {
        v[u] = kjit::load_vec<VEC>(from + i);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          v[u].at[j] = kjit::from_float<T>(0.0f);
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int i = first + u * threads * VEC;
      if (i < hidden)
        kjit::store_vec(to + i, v[u]);
    }
  }
})";
const Template store16_template("store16", gather_source, {},
                                TemplateOptions{.arguments = {"uint4*", "long long", "unsigned"}});
const Template
    zero_padding_gather_template("moe_gather_zero_padding", gather_source,
                                 {{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")}},
                                 TemplateOptions{.arguments = {"T*", "const T*", "const int*",
                                                               "const int*", "int", "int", "int"}});
const Template fill_template("fill_hashed", fill_source,
                             {{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")}},
                             TemplateOptions{.arguments = {"T*", "long long", "float", "int"}});
const Template fill_e4m3_template("fill_e4m3", fill_source, {},
                                  TemplateOptions{
                                      .arguments = {"unsigned char*", "long long", "int"}});

struct Layer {
  const char *name;
  int experts, top_k, hidden, inter;
};

struct Bench {
  Runtime rt;
  const Device &device = rt.default_device();

  int seeds = 0; // the fills so far: each takes the next seed

  template <Element T> void fill(DeviceBuffer &buffer, std::size_t count, double scale) {
    rt.kernel(fill_template, {{"T", element_name<T>()}})
        .launch({.grid = 4096, .block = 256}, buffer.as<T>(), static_cast<long long>(count),
                static_cast<float>(scale), ++seeds);
  }
  template <Element T> DeviceBuffer filled(std::size_t count, double scale) {
    DeviceBuffer buffer = device.allocate(count * sizeof(T));
    fill<T>(buffer, count, scale);
    return buffer;
  }

  double copy_ms(std::size_t bytes) {
    DeviceBuffer from = device.allocate(bytes), to = device.allocate(bytes);
    const Kernel &kernel = rt.kernel(kjit::bench::copy16_template(), {});
    const long long n = static_cast<long long>(bytes / 16);
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(n / 256 + 1, 65536));
    return median_ms_per_launch(device, 20, [&] {
      kernel.launch({.grid = blocks, .block = 256}, from.as<const void>(), to.data(), n);
    });
  }

  // Every expert the same count of pairs (where top_k * tokens is a multiple of the experts):
  // token t's slots on experts t * top_k + s, modulo the experts. On the device.
  DeviceBuffer evenly_routed(const Layer &layer, int tokens) {
    std::vector<int> ids(std::size_t(tokens) * layer.top_k);
    for (std::size_t pair = 0; pair < ids.size(); ++pair)
      ids[pair] = static_cast<int>(pair % layer.experts);
    DeviceBuffer ids_device = device.allocate(ids.size() * sizeof(int));
    ids_device.write(ids.data(), ids.size() * sizeof(int));
    return ids_device;
  }

  // top_k distinct experts per token, uniformly at random, on the device; `touched` gets them.
  DeviceBuffer routed(const Layer &layer, int tokens, std::set<int> &touched) {
    std::mt19937 rng(tokens);
    std::vector<int> ids, all(layer.experts);
    std::iota(all.begin(), all.end(), 0);
    for (int t = 0; t < tokens; ++t) {
      std::shuffle(all.begin(), all.end(), rng);
      ids.insert(ids.end(), all.begin(), all.begin() + layer.top_k);
      touched.insert(all.begin(), all.begin() + layer.top_k);
    }
    DeviceBuffer ids_device = device.allocate(ids.size() * sizeof(int));
    ids_device.write(ids.data(), ids.size() * sizeof(int));
    return ids_device;
  }

  // fused_moe at `tokens` tokens against each of its launches timed alone (the same routing,
  // alignment and heuristic variants): moe_align, the gate-up GEMM gathering the tokens' rows
  // in its loads, the down GEMM, moe_combine, a moe_gather pass and the gate-up GEMM reading
  // sorted rows by TMA (fused_moe runs one of the two ways, by the count of pairs). With
  // `variants`, the GEMMs' tile orders (and the gate-up's stages) on the sorted rows.
  template <Element T> void sweep(const Layer &layer, int tokens, bool variants) {
    const int pairs = tokens * layer.top_k;
    std::set<int> touched;
    DeviceBuffer ids = routed(layer, tokens, touched);
    const std::size_t rows = moe_align_rows(pairs, layer.experts, 128);
    DeviceBuffer sorted = device.allocate(rows * 4), blocks = device.allocate(rows / 128 * 4),
                 positions = device.allocate(std::size_t(pairs) * 4), totals = device.allocate(8);
    const MoeAlignment alignment{sorted.as<int>(), blocks.as<int>(), positions.as<int>(),
                                 totals.as<int>()};
    const int launches = tokens >= 256 ? 5 : 20;
    const auto row = [&](const char *what, double ms, double flops) {
      std::printf("| %s | %s | %d | | | | %.3f | %s |\n", layer.name, what, tokens, ms,
                  flops > 0 ? std::to_string(static_cast<int>(flops / ms * 1e-9)).c_str() : "");
      std::fflush(stdout);
    };
    const double align_ms = median_ms_per_launch(device, launches, [&] {
      moe_align(rt, alignment, ids.as<const int>(), pairs, layer.experts, 128);
    });
    row("moe_align", align_ms, 0);
    // The kernel alone, launched as fused_moe launches it (no host checks), both ways of counting
    // the experts' pairs (moe_routing.hip's COUNT).
    for (const int count : {0, 1}) {
      const Kernel &align =
          rt.kernel(templates::find("moe_align"),
                    {{"EXPERTS", layer.experts}, {"BLOCK_M", 128}, {"COUNT", count}});
      row(count == 0 ? "moe_align kernel, COUNT 0 (matched lanes)"
                     : "moe_align kernel, COUNT 1 (an atomic a pair)",
          median_ms_per_launch(device, launches,
                               [&] {
                                 align.launch(
                                     {.grid = static_cast<unsigned>(layer.experts), .block = 1024},
                                     sorted.as<int>(), blocks.as<int>(), positions.as<int>(),
                                     totals.as<int>(), ids.as<const int>(), pairs,
                                     static_cast<int *>(nullptr));
                               }),
          0);
    }
    const double gate_up_flops = 4.0 * pairs * layer.inter * layer.hidden;
    const double down_flops = 2.0 * pairs * layer.inter * layer.hidden;
    {
      DeviceBuffer w13 =
          filled<T>(std::size_t(layer.experts) * 2 * layer.inter * layer.hidden, 0.02);
      DeviceBuffer w2 = filled<T>(std::size_t(layer.experts) * layer.hidden * layer.inter, 0.02);
      DeviceBuffer x = filled<T>(std::size_t(tokens) * layer.hidden, 1.0);
      DeviceBuffer x_sorted = device.allocate(rows * layer.hidden * sizeof(T));
      DeviceBuffer h = filled<T>(rows * layer.inter, 1.0);
      DeviceBuffer y = device.allocate(rows * layer.hidden * sizeof(T));
      DeviceBuffer out = device.allocate(std::size_t(tokens) * layer.hidden * sizeof(T));
      const std::vector<float> routing_weights(pairs, 1.0f / layer.top_k);
      DeviceBuffer weights = device.allocate(pairs * sizeof(float));
      weights.write(routing_weights.data(), routing_weights.size() * sizeof(float));
      const MoeWeights<T> moe{w13.as<const T>(), w2.as<const T>(), layer.experts, layer.hidden,
                              layer.inter};
      const std::size_t bytes = fused_moe_workspace_bytes<T>(tokens, layer.top_k, moe);
      DeviceBuffer workspace = device.allocate(bytes);
      const double fused_ms = median_ms_per_launch(device, launches, [&] {
        fused_moe<T>(rt, out.as<T>(), x.as<const T>(), weights.as<const float>(),
                     ids.as<const int>(), tokens, layer.top_k, moe, workspace.data(), bytes);
      });
      row("fused_moe", fused_ms, gate_up_flops + down_flops);
      moe_align(rt, alignment, ids.as<const int>(), pairs, layer.experts, 128);
      const auto gather_up = ops::detail::grouped_gemm_variant<T>(
          rt, true, true, pairs, layer.experts, layer.inter, layer.hidden);
      const auto sorted_up = ops::detail::grouped_gemm_variant<T>(
          rt, true, false, pairs, layer.experts, layer.inter, layer.hidden);
      const auto down = ops::detail::grouped_gemm_variant<T>(rt, false, false, pairs, layer.experts,
                                                             layer.hidden, layer.inter);
      // `schedule`: null, the static tile order; else the dynamic one (moe_wgmma.hip).
      const auto time_gemm = [&](const ops::detail::ChosenVariant &variant, T *c, const T *a,
                                 const T *w, int n, int k, int *schedule = nullptr) {
        return median_ms_per_launch(device, launches, [&] {
          ops::detail::grouped_gemm<T>(rt, variant, c, a, w, rows, alignment, layer.experts, n, k,
                                       layer.top_k, schedule, nullptr);
        });
      };
      row("gate-up, gathering in its loads (GATHER 1)",
          time_gemm(gather_up, h.as<T>(), x.as<const T>(), w13.as<const T>(), layer.inter,
                    layer.hidden),
          gate_up_flops);
      row("down",
          time_gemm(down, y.as<T>(), h.as<const T>(), w2.as<const T>(), layer.hidden, layer.inter),
          down_flops);
      const ParamValues vector_params = {{"T", element_name<T>()}, {"VEC", 8}};
      const Kernel &combine = rt.kernel(templates::find("moe_combine"), vector_params);
      row("moe_combine",
          median_ms_per_launch(device, launches,
                               [&] {
                                 combine.launch(
                                     {.grid = static_cast<unsigned>(tokens), .block = 128},
                                     out.as<T>(), y.as<const T>(), weights.as<const float>(),
                                     positions.as<const int>(), layer.top_k, layer.hidden);
                               }),
          0);
      const Kernel &gather = rt.kernel(templates::find("moe_gather"), vector_params);
      const auto gather_rows = [&](const DeviceBuffer &from, int per_token) {
        gather.launch({.grid = static_cast<unsigned>(rows), .block = 128}, x_sorted.as<T>(),
                      from.as<const T>(), sorted.as<const int>(), totals.as<const int>(), per_token,
                      layer.hidden, 128);
      };
      row("moe_gather pass",
          median_ms_per_launch(device, launches, [&] { gather_rows(x, layer.top_k); }), 0);
      // fused_moe's form (moe.cpp): 8 rows a block of 256 threads, 8 loads in flight a thread.
      const Kernel &gather8 = rt.kernel(templates::find("moe_gather"),
                                        {{"T", element_name<T>()}, {"VEC", 8}, {"ROWS", 8}});
      row("moe_gather pass, 8 rows a block",
          median_ms_per_launch(device, launches,
                               [&] {
                                 gather8.launch(
                                     {.grid = static_cast<unsigned>(rows / 8), .block = 256},
                                     x_sorted.as<T>(), x.as<const T>(), sorted.as<const int>(),
                                     totals.as<const int>(), layer.top_k, layer.hidden, 128);
                               }),
          0);
      // The GEMM on sorted rows of different contents (the same addresses and tiles), to tell
      // what makes it slower on the tokens' rows than on a fill: rows filled afresh (padding
      // too), before and after; the tokens' rows (each token top_k times; the padding rows keep
      // the fill, moe_gather does not write them); a row of its own per pair (gathered from
      // [pairs, hidden] with top_k 1, padding likewise).
      const auto time_sorted = [&](const char *what) {
        row(what,
            time_gemm(sorted_up, h.as<T>(), x_sorted.as<const T>(), w13.as<const T>(), layer.inter,
                      layer.hidden),
            gate_up_flops);
      };
      fill<T>(x_sorted, rows * layer.hidden, 1.0);
      time_sorted("gate-up, sorted rows filled afresh");
      gather_rows(x, layer.top_k);
      time_sorted("gate-up, sorted rows: the tokens' (moe_gather's)");
      DeviceBuffer x_pairs = filled<T>(std::size_t(pairs) * layer.hidden, 1.0);
      gather_rows(x_pairs, 1);
      time_sorted("gate-up, sorted rows: one per pair");
      fill<T>(x_sorted, rows * layer.hidden, 1.0);
      time_sorted("gate-up, sorted rows filled afresh again");
      if (!variants)
        return;
      // The gate-up GEMM's tile order and stages on the tokens' sorted rows (the heuristic's
      // GROUP_M, and the other of 3 and 4 stages at it, last).
      gather_rows(x, layer.top_k);
      const int stages = sorted_up.integer("STAGES");
      for (const auto &[group_m, stage_count] :
           {std::pair{1, stages},
            {4, stages},
            {8, stages},
            {16, stages},
            {static_cast<int>(sorted_up.integer("GROUP_M")), 7 - stages}}) {
        ops::detail::ChosenVariant variant = sorted_up;
        variant.params.set("GROUP_M", group_m);
        variant.params.set("STAGES", stage_count);
        const double ms = time_gemm(variant, h.as<T>(), x_sorted.as<const T>(), w13.as<const T>(),
                                    layer.inter, layer.hidden);
        std::printf("| %s | gate-up, the tokens' sorted rows | %d | %d | %d | %d | %.3f | %.0f |\n",
                    layer.name, tokens, static_cast<int>(sorted_up.integer("BLOCK_N")), stage_count,
                    group_m, ms, gate_up_flops / ms * 1e-9);
        std::fflush(stdout);
      }
      // Both GEMMs at the heuristic's variant in the static and the dynamic tile order, twice in
      // turn (the run's spread shows between the rounds).
      DeviceBuffer schedule = device.allocate(sizeof(int));
      for (int round = 0; round < 2; ++round)
        for (int *order : {static_cast<int *>(nullptr), schedule.as<int>()}) {
          const char *name = order == nullptr ? "static" : "dynamic";
          const double up_ms = time_gemm(sorted_up, h.as<T>(), x_sorted.as<const T>(),
                                         w13.as<const T>(), layer.inter, layer.hidden, order);
          const double down_ms = time_gemm(down, y.as<T>(), h.as<const T>(), w2.as<const T>(),
                                           layer.hidden, layer.inter, order);
          std::printf("| %s | gate-up, %s order | %d | | | | %.3f | %.0f |\n"
                      "| %s | down, %s order | %d | | | | %.3f | %.0f |\n",
                      layer.name, name, tokens, up_ms, gate_up_flops / up_ms * 1e-9, layer.name,
                      name, tokens, down_ms, down_flops / down_ms * 1e-9);
          std::fflush(stdout);
        }
      // The down GEMM's tile order on the gated rows the gate-up GEMM left in h.
      for (const int group_m : {1, 4, 8, 16}) {
        ops::detail::ChosenVariant variant = down;
        variant.params.set("GROUP_M", group_m);
        const double ms = time_gemm(variant, y.as<T>(), h.as<const T>(), w2.as<const T>(),
                                    layer.hidden, layer.inter);
        std::printf("| %s | down, the gated rows | %d | %d | %d | %d | %.3f | %.0f |\n", layer.name,
                    tokens, static_cast<int>(down.integer("BLOCK_N")),
                    static_cast<int>(down.integer("STAGES")), group_m, ms, down_flops / ms * 1e-9);
        std::fflush(stdout);
      }
      // Both GEMMs in the dynamic tile order, fused_moe's at this size, at each GROUP_M and at
      // half the heuristic's tile width (6 stages), on the tokens' sorted rows and the gated rows
      // the gate-up GEMM leaves, two rounds. The order within a round is fixed: a form timed late
      // meets a warmer card (BENCHMARKS.md, "the grouped GEMMs' GROUP_M in the dynamic tile
      // order"), so read a difference here as a lead for interleaved rounds, not as a result.
      DeviceBuffer counter = device.allocate(sizeof(int));
      for (int round = 0; round < 2; ++round)
        for (const bool gated : {true, false}) {
          const ops::detail::ChosenVariant &heuristic = gated ? sorted_up : down;
          std::vector<ops::detail::ChosenVariant> forms;
          for (const int group_m : {1, 2, 4, 8, 16}) {
            forms.push_back(heuristic);
            forms.back().params.set("GROUP_M", group_m);
          }
          forms.push_back(heuristic);
          forms.back().params.set("BLOCK_N", heuristic.integer("BLOCK_N") / 2);
          forms.back().params.set("STAGES", 6);
          for (const ops::detail::ChosenVariant &variant : forms) {
            const double ms =
                gated ? time_gemm(variant, h.as<T>(), x_sorted.as<const T>(), w13.as<const T>(),
                                  layer.inter, layer.hidden, counter.as<int>())
                      : time_gemm(variant, y.as<T>(), h.as<const T>(), w2.as<const T>(),
                                  layer.hidden, layer.inter, counter.as<int>());
            std::printf("| %s | %s, dynamic order, round %d | %d | %d | %d | %d | %.3f | %.0f |\n",
                        layer.name, gated ? "gate-up" : "down", round, tokens,
                        variant.integer("BLOCK_N"), variant.integer("STAGES"),
                        variant.integer("GROUP_M"), ms,
                        (gated ? gate_up_flops : down_flops) / ms * 1e-9);
            std::fflush(stdout);
          }
        }
    }
  }

  // --tiles: the grouped GEMMs' tile widths at a decode size (the gate-up GEMM gathering the
  // tokens' rows, both in the static order, as fused_moe runs them there) on the same routing,
  // each timed twice in turn (the run's spread shows between the rounds): BLOCK_N 64 and 128 for
  // the gate-up GEMM, 128 and 256 for the down one, at the heuristic's stages for the width.
  template <Element T> void tiles(const Layer &layer, int tokens) {
    const int pairs = tokens * layer.top_k;
    std::set<int> touched;
    DeviceBuffer ids = routed(layer, tokens, touched);
    const std::size_t rows = moe_align_rows(pairs, layer.experts, 128);
    DeviceBuffer w13 = filled<T>(std::size_t(layer.experts) * 2 * layer.inter * layer.hidden, 0.02);
    DeviceBuffer w2 = filled<T>(std::size_t(layer.experts) * layer.hidden * layer.inter, 0.02);
    DeviceBuffer x = filled<T>(std::size_t(tokens) * layer.hidden, 1.0);
    DeviceBuffer h = filled<T>(rows * layer.inter, 1.0);
    DeviceBuffer y = device.allocate(rows * layer.hidden * sizeof(T));
    DeviceBuffer sorted = device.allocate(rows * 4), blocks = device.allocate(rows / 128 * 4),
                 positions = device.allocate(std::size_t(pairs) * 4), totals = device.allocate(8);
    const MoeAlignment alignment{sorted.as<int>(), blocks.as<int>(), positions.as<int>(),
                                 totals.as<int>()};
    moe_align(rt, alignment, ids.as<const int>(), pairs, layer.experts, 128);
    const int launches = tokens >= 256 ? 5 : 20;
    for (int round = 0; round < 2; ++round)
      for (const bool gated : {true, false})
        for (const int block_n : gated ? std::vector<int>{64, 128} : std::vector<int>{128, 256}) {
          const int wgmma_n = block_n * (gated ? 2 : 1);
          ops::detail::ChosenVariant variant = ops::detail::grouped_gemm_variant<T>(
              rt, gated, gated, pairs, layer.experts, gated ? layer.inter : layer.hidden,
              gated ? layer.hidden : layer.inter);
          variant.params.set("BLOCK_N", block_n);
          variant.params.set("STAGES", wgmma_n == 256 ? 4 : 6);
          const int n = gated ? layer.inter : layer.hidden, k = gated ? layer.hidden : layer.inter;
          const double ms = median_ms_per_launch(device, launches, [&] {
            ops::detail::grouped_gemm<T>(rt, variant, gated ? h.as<T>() : y.as<T>(),
                                         gated ? x.as<const T>() : h.as<const T>(),
                                         gated ? w13.as<const T>() : w2.as<const T>(), rows,
                                         alignment, layer.experts, n, k, layer.top_k, nullptr,
                                         nullptr);
          });
          const double weight_bytes =
              (gated ? 2.0 : 1.0) * touched.size() * layer.hidden * layer.inter * sizeof(T);
          std::printf("| %s | %d | %s | %d | %d | %.3f | %.0f |\n", layer.name, tokens,
                      gated ? "gate-up" : "down", block_n,
                      static_cast<int>(variant.integer("STAGES")), ms, weight_bytes / ms * 1e-6);
          std::fflush(stdout);
        }
    // As the table's "copy GB/s": a copy of half the bytes moves them all (read and written).
    const double weight_bytes = 3.0 * touched.size() * layer.hidden * layer.inter * sizeof(T);
    const double copy = copy_ms(static_cast<std::size_t>(weight_bytes / 2));
    std::printf("| %s | %d | copy of the weights touched | | | %.3f | %.0f |\n", layer.name, tokens,
                copy, weight_bytes / copy * 1e-6);
  }

  // A layer's experts, weights scaled as nn.Linear initialises them.
  template <Element T> struct Experts {
    DeviceBuffer w13, w2;
    MoeWeights<T> view;
  };
  template <Element T> Experts<T> experts(const Layer &layer) {
    DeviceBuffer w13 = filled<T>(std::size_t(layer.experts) * 2 * layer.inter * layer.hidden,
                                 1.0 / std::sqrt(layer.hidden));
    DeviceBuffer w2 = filled<T>(std::size_t(layer.experts) * layer.hidden * layer.inter,
                                1.0 / std::sqrt(layer.inter));
    const MoeWeights<T> view{w13.as<const T>(), w2.as<const T>(), layer.experts, layer.hidden,
                             layer.inter};
    return {std::move(w13), std::move(w2), view};
  }

  // Each pair's routing weight, 1 / top_k.
  DeviceBuffer equal_weights(int pairs, int top_k) {
    const std::vector<float> weights(pairs, 1.0f / top_k);
    DeviceBuffer buffer = device.allocate(weights.size() * sizeof(float));
    buffer.write(weights.data(), weights.size() * sizeof(float));
    return buffer;
  }

  // fused_moe's call at `tokens` tokens, its buffers made and kept.
  template <Element T> struct Fused {
    Bench &bench;
    const Layer &layer;
    const Experts<T> &weights;
    int tokens;
    std::set<int> touched;
    DeviceBuffer ids, routing, x, out, workspace;
    Fused(Bench &b, const Layer &l, const Experts<T> &w, int t)
        : bench(b), layer(l), weights(w), tokens(t), ids(b.routed(l, t, touched)),
          routing(b.equal_weights(t * l.top_k, l.top_k)),
          x(b.filled<T>(std::size_t(t) * l.hidden, 1.0)),
          out(b.device.allocate(std::size_t(t) * l.hidden * sizeof(T))),
          workspace(b.device.allocate(fused_moe_workspace_bytes<T>(t, l.top_k, w.view))) {}
    void run() {
      fused_moe<T>(bench.rt, out.as<T>(), x.as<const T>(), routing.as<const float>(),
                   ids.as<const int>(), tokens, layer.top_k, weights.view, workspace.data(),
                   workspace.size());
    }
  };

  // fused_moe's alignment (moe_align at 128 rows a tile) of `pairs` pairs routed by `ids`, its
  // buffers kept, with the two GEMMs' tile counters of the dynamic order.
  struct Aligned {
    std::size_t rows;
    DeviceBuffer sorted, blocks, positions, totals, schedule;
    MoeAlignment alignment;
    Aligned(Bench &b, const Layer &layer, const DeviceBuffer &ids, int pairs)
        : rows(moe_align_rows(pairs, layer.experts, 128)), sorted(b.device.allocate(rows * 4)),
          blocks(b.device.allocate(rows / 128 * 4)),
          positions(b.device.allocate(std::size_t(pairs) * 4)), totals(b.device.allocate(8)),
          schedule(b.device.allocate(2 * sizeof(int))), alignment{
                                                            sorted.as<int>(), blocks.as<int>(),
                                                            positions.as<int>(), totals.as<int>()} {
      moe_align(b.rt, alignment, ids.as<const int>(), pairs, layer.experts, 128);
    }
  };

  // fused_moe's launches one after another as moe_plan makes them, so that the layer can be timed
  // with other forms of its parts: moe_align, the moe_gather pass into x_sorted (none where the
  // gate-up GEMM gathers the tokens' rows in its loads), both grouped GEMMs (in the dynamic tile
  // order after a pass, the static one where the gate-up GEMM gathers), moe_combine. Its
  // buffers: x_sorted, h and y, one row a padded row.
  template <Element T> struct LayerLaunches {
    const Layer &layer;
    Fused<T> &fused;
    Aligned &aligned;
    DeviceBuffer x_sorted, h, y;
    const Kernel &align, &combine;
    LayerLaunches(Bench &b, const Layer &l, Fused<T> &f, Aligned &a)
        : layer(l), fused(f), aligned(a), x_sorted(b.filled<T>(a.rows * l.hidden, 1.0)),
          h(b.filled<T>(a.rows * l.inter, 1.0)),
          y(b.device.allocate(a.rows * l.hidden * sizeof(T))),
          align(b.rt.kernel(templates::find("moe_align"),
                            {{"EXPERTS", l.experts}, {"BLOCK_M", 128}})),
          combine(b.rt.kernel(templates::find("moe_combine"),
                              {{"T", element_name<T>()}, {"VEC", 8}})) {}
    // A moe_gather pass into x_sorted: `kernel` (moe_gather's arguments) at `rows_a_block` rows a
    // block, a warp a row.
    void gather_pass(const Kernel &kernel, int rows_a_block) {
      kernel.launch({.grid = static_cast<unsigned>(aligned.rows / rows_a_block),
                     .block = static_cast<unsigned>(32 * rows_a_block)},
                    x_sorted.as<T>(), fused.x.template as<const T>(),
                    aligned.sorted.as<const int>(), aligned.totals.as<const int>(), layer.top_k,
                    layer.hidden, 128);
    }
    // The layer with the GEMMs' plans `up` and `down` and the pass `gather` at `rows_a_block`
    // (nullptr: the gate-up GEMM gathers).
    void run(const ops::detail::GroupedPlan &up, const ops::detail::GroupedPlan &down,
             const Kernel *gather, int rows_a_block) {
      int *order = gather != nullptr ? aligned.schedule.as<int>() : nullptr;
      align.launch({.grid = static_cast<unsigned>(layer.experts), .block = 1024},
                   aligned.sorted.as<int>(), aligned.blocks.as<int>(), aligned.positions.as<int>(),
                   aligned.totals.as<int>(), fused.ids.template as<const int>(),
                   fused.tokens * layer.top_k, order);
      if (gather != nullptr)
        gather_pass(*gather, rows_a_block);
      ops::detail::launch_grouped<T>(
          up, h.as<T>(),
          gather != nullptr ? x_sorted.as<const T>() : fused.x.template as<const T>(),
          fused.weights.w13.template as<const T>(), aligned.rows, aligned.alignment, layer.experts,
          layer.inter, layer.hidden, layer.top_k, order, nullptr, 0, true);
      ops::detail::launch_grouped<T>(
          down, y.as<T>(), h.as<const T>(), fused.weights.w2.template as<const T>(), aligned.rows,
          aligned.alignment, layer.experts, layer.hidden, layer.inter, layer.top_k,
          order != nullptr ? order + 1 : nullptr, nullptr, 0, true);
      combine.launch({.grid = static_cast<unsigned>(fused.tokens), .block = 128},
                     fused.out.template as<T>(), y.as<const T>(),
                     fused.routing.template as<const float>(), aligned.positions.as<const int>(),
                     layer.top_k, layer.hidden);
    }
  };

  // The dense GEMMs of the same FLOPs as `pairs` pairs: one expert's weights over every pair's
  // row, [2 inter, hidden] then [hidden, inter].
  template <Element T> struct Dense {
    Bench &bench;
    const Layer &layer;
    const Experts<T> &weights;
    int pairs;
    DeviceBuffer a, gate_up, gated, down;
    Dense(Bench &b, const Layer &l, const Experts<T> &w, int p)
        : bench(b), layer(l), weights(w), pairs(p), a(b.filled<T>(std::size_t(p) * l.hidden, 1.0)),
          gate_up(b.device.allocate(std::size_t(p) * 2 * l.inter * sizeof(T))),
          gated(b.filled<T>(std::size_t(p) * l.inter, 1.0)),
          down(b.device.allocate(std::size_t(p) * l.hidden * sizeof(T))) {}
    void run_gate_up() {
      linear<T>(bench.rt, gate_up.as<T>(), a.as<const T>(), weights.w13.template as<const T>(),
                pairs, 2 * layer.inter, layer.hidden);
    }
    void run_down() {
      linear<T>(bench.rt, down.as<T>(), gated.as<const T>(), weights.w2.template as<const T>(),
                pairs, layer.hidden, layer.inter);
    }
    void run() {
      run_gate_up();
      run_down();
    }
  };

  // --prefill: the grouped GEMMs in the heuristic's form (form 0) against a candidate (form 1:
  // the heuristic's with `candidate`'s parameters set in both GEMMs, GATHER in the gate-up GEMM
  // only, which then reads the tokens' rows in the static order), in three rounds of every row
  // in alternating bursts (the run's spread shows between the rounds). At 4096 tokens each GEMM
  // alone on sorted rows in the dynamic tile order (as fused_moe runs them there; the rows
  // filled, not gathered) against kjit's dense GEMM of its FLOPs, and in the heuristic's form with
  // every tile on expert 0 (its weights stay in L2), and routed evenly (no padding: as many tiles
  // as the dense GEMM's), on the experts' weights and on expert 0's; fused_moe routed evenly too.
  // At 16, 256 and 4096 tokens the layer: fused_moe (the heuristic's form) and its launches one
  // after another as fused_moe makes them (moe_align, the moe_gather pass where the gate-up GEMM
  // does not gather, both GEMMs, moe_combine) with either form of both GEMMs, against the dense
  // GEMMs of its FLOPs.
  template <Element T> void prefill(const Layer &layer, const ParamValues &candidate) {
    const Experts<T> weights = experts<T>(layer);
    const std::string type(element_name<T>());
    for (const int tokens : {4096, 256, 16}) {
      const int pairs = tokens * layer.top_k;
      Fused<T> fused(*this, layer, weights, tokens);
      Aligned aligned(*this, layer, fused.ids, pairs);
      LayerLaunches<T> launches(*this, layer, fused, aligned);
      const std::size_t rows = aligned.rows;
      DeviceBuffer &sorted = aligned.sorted, &totals = aligned.totals, &schedule = aligned.schedule;
      DeviceBuffer &x_sorted = launches.x_sorted, &h = launches.h, &y = launches.y;
      const MoeAlignment &alignment = aligned.alignment;
      // The tiles of rows, and those whose second 64 rows are all padding.
      std::vector<int> sorted_host(rows);
      sorted.read(sorted_host.data(), rows * 4);
      int tiles = 0, idle = 0; // totals[0]: the tiles moe_align filled
      totals.read(&tiles, sizeof(int));
      for (std::size_t r = 0; r < std::size_t(tiles) * 128; r += 128)
        idle += sorted_host[r + 64] < 0 ? 1 : 0;
      std::printf("| %s | %s | %d tokens: %d tiles of 128 rows over %zu padded rows, %d of them "
                  "with rows 64-127 all padding | | | | |\n",
                  layer.name, type.c_str(), tokens, tiles, rows, idle);
      Dense<T> dense(*this, layer, weights, pairs);
      // The alignment with every tile on expert 0: the grouped GEMMs' tiles as they are, on one
      // expert's weights, which stay in L2 (what the experts' weights cost beyond that).
      DeviceBuffer expert_zero = device.allocate(rows / 128 * sizeof(int));
      device.fill(expert_zero.data(), 0, expert_zero.size(), nullptr);
      const auto on_expert_zero = [&](MoeAlignment tiles) {
        tiles.block_experts = expert_zero.as<int>();
        return tiles;
      };
      // Routed evenly: at 4096 tokens every expert's pairs fill whole tiles of rows, so the
      // grouped GEMMs run as many tiles as the dense GEMMs (the padding's cost apart).
      // fused_moe itself on that routing too (each token's experts stay distinct): the whole
      // layer with no padding, its passes included.
      Fused<T> fused_even(*this, layer, weights, tokens);
      fused_even.ids = evenly_routed(layer, tokens);
      Aligned even(*this, layer, fused_even.ids, pairs);
      if (tokens == 4096) {
        int even_tiles = 0;
        even.totals.read(&even_tiles, sizeof(int));
        std::printf("| %s | %s | %d tokens routed evenly: %d tiles of 128 rows | | | | |\n",
                    layer.name, type.c_str(), tokens, even_tiles);
      }
      const double flops = 2.0 * pairs * layer.hidden * layer.inter; // the down GEMM's; gate-up 2x
      // fused_moe's plan, as moe.cpp makes it (moe_plan, fused_moe): gathering in the gate-up
      // GEMM's loads up to 2048 pairs, else a moe_gather pass and the dynamic tile order.
      // A candidate may gather in the gate-up GEMM (GATHER=1) where the heuristic does not, or
      // the reverse: each form's layer takes the moe_gather pass where its gate-up GEMM does not
      // gather, and a gathering GEMM takes the static tile order, as in fused_moe.
      const bool gathering = ops::detail::gate_up_gathers(rt.default_device().target(), pairs);
      const Kernel &gather = rt.kernel(templates::find("moe_gather"),
                                       {{"T", element_name<T>()}, {"VEC", 8}, {"ROWS", 8}});
      ops::detail::GroupedPlan up[2], down[2]; // by form
      for (const int form : {0, 1}) {
        auto up_variant = ops::detail::grouped_gemm_variant<T>(
            rt, true, gathering, pairs, layer.experts, layer.inter, layer.hidden);
        auto down_variant = ops::detail::grouped_gemm_variant<T>(
            rt, false, false, pairs, layer.experts, layer.hidden, layer.inter);
        for (auto *variant : {&up_variant, &down_variant}) {
          ops::detail::ChosenVariant tried = *variant;
          for (const auto &[name, value] : form == 1 ? candidate : ParamValues{})
            if (name != "GATHER" || variant == &up_variant) // the down GEMM's rows are h's
              tried.params.set(name, value);
          // A candidate the template refuses for this GEMM (PINGPONG=1 on a wgmma of 256
          // columns) leaves it in the heuristic's form.
          const std::string refused =
              tried.tmpl->tuning().fits(tried.tmpl->bind(tried.params), "sm_90a");
          if (refused.empty())
            *variant = tried;
          else
            std::printf("| %s | %s | %d tokens: the %s GEMM keeps the heuristic's form: %s | | "
                        "| | |\n",
                        layer.name, type.c_str(), tokens,
                        variant == &up_variant ? "gate-up" : "down", refused.c_str());
        }
        up[form] = ops::detail::make_grouped_plan(rt, up_variant);
        down[form] = ops::detail::make_grouped_plan(rt, down_variant);
      }
      const std::string candidate_name = candidate.to_string();
      const char *form_names[] = {"heuristic", candidate_name.c_str()};
      const auto print = [&](int round, const char *what, const char *form, double ms,
                             double of_flops, double baseline_ms) {
        std::printf("| %s | %s | %d | %d | %s | %s | %.3f | %.0f | %.2f |\n", layer.name,
                    type.c_str(), tokens, round, what, form, ms, of_flops / ms * 1e-9,
                    baseline_ms / ms);
        std::fflush(stdout);
      };
      // What each round times, in alternating bursts: a row's name, form and FLOPs, the index of
      // the dense GEMM it is divided by (its own where it is one), and its launches.
      struct Timed {
        std::string what;
        const char *form;
        double flops;
        std::size_t baseline;
        std::function<void()> run;
      };
      std::vector<Timed> timed;
      if (tokens == 4096)
        for (const bool gated : {true, false}) {
          const double gemm_flops = gated ? 2 * flops : flops;
          const std::size_t dense_at = timed.size();
          timed.push_back({gated ? "gate-up: dense linear()" : "down: dense linear()", "",
                           gemm_flops, dense_at,
                           [&dense, gated] { gated ? dense.run_gate_up() : dense.run_down(); }});
          // The GEMM alone in `form` on the tiles of `tiles_of`: "<GEMM> GEMM alone<tiles>".
          const auto alone = [&, gated, gemm_flops, dense_at](const char *tiles, int form,
                                                              const MoeAlignment &tiles_of) {
            timed.push_back({std::string(gated ? "gate-up" : "down") + " GEMM alone" + tiles,
                             form_names[form], gemm_flops, dense_at, [&, gated, form, tiles_of] {
                               const auto &plan = gated ? up[form] : down[form];
                               ops::detail::launch_grouped<T>(
                                   plan, gated ? h.as<T>() : y.as<T>(),
                                   plan.gather ? fused.x.template as<const T>()
                                   : gated     ? x_sorted.as<const T>()
                                               : h.as<const T>(),
                                   gated ? weights.w13.template as<const T>()
                                         : weights.w2.template as<const T>(),
                                   rows, tiles_of, layer.experts,
                                   gated ? layer.inter : layer.hidden,
                                   gated ? layer.hidden : layer.inter, layer.top_k,
                                   plan.gather ? nullptr : schedule.as<int>(), nullptr);
                             }});
          };
          for (const int form : {0, 1})
            alone("", form, alignment);
          alone(", every tile on expert 0", 0, on_expert_zero(alignment));
          alone(", routed evenly", 0, even.alignment);
          alone(", routed evenly, every tile on expert 0", 0, on_expert_zero(even.alignment));
        }
      const std::size_t dense_at = timed.size();
      timed.push_back({"layer: dense linear() x2", "", 3 * flops, dense_at, [&] { dense.run(); }});
      timed.push_back({"layer: fused_moe", "heuristic", 3 * flops, dense_at, [&] { fused.run(); }});
      if (tokens == 4096)
        timed.push_back({"layer: fused_moe, routed evenly", "heuristic", 3 * flops, dense_at,
                         [&] { fused_even.run(); }});
      for (const int form : {0, 1})
        timed.push_back({"layer: its launches", form_names[form], 3 * flops, dense_at, [&, form] {
                           launches.run(up[form], down[form], up[form].gather ? nullptr : &gather,
                                        8);
                         }});
      std::vector<std::function<void()>> runs;
      for (const Timed &row : timed)
        runs.push_back(row.run);
      for (int round = 0; round < 3; ++round) {
        // The first round of the first token count starts from an idle card: warm it to the
        // steady state of its power cap first.
        const double warm_ms = round == 0 && tokens == 4096 ? 4000 : 0;
        const std::vector<double> ms = interleaved_ms_per_launch(device, runs, warm_ms);
        for (std::size_t i = 0; i < timed.size(); ++i)
          print(round, timed[i].what.c_str(), timed[i].form, ms[i], timed[i].flops,
                ms[timed[i].baseline]);
      }
    }
  }

  // --gather-pass: the moe_gather pass at 4096 tokens in its forms, four rounds in turn (the order
  // turned each round), against a copy of the bytes it writes (copy16: each read from and written
  // to memory) and a write-only pass of them (store16): the form before moe11 (padding rows
  // written as zeros, 8 rows a block), and padding rows left alone at 8 and 16 rows a block
  // (ROWS, a warp a row) with plain or streaming stores (CACHE), each first checked against the
  // host's gather. Then the
  // layer: fused_moe and its launches one after another as fused_moe makes them, with the gather
  // before moe11 or the candidates, against kjit's dense GEMMs of its FLOPs.
  template <Element T> void gather(const Layer &layer) {
    constexpr int tokens = 4096;
    const Experts<T> weights = experts<T>(layer);
    const std::string type(element_name<T>());
    const int pairs = tokens * layer.top_k;
    Fused<T> fused(*this, layer, weights, tokens);
    Dense<T> dense(*this, layer, weights, pairs);
    Aligned aligned(*this, layer, fused.ids, pairs);
    LayerLaunches<T> launches(*this, layer, fused, aligned);
    const std::size_t rows = aligned.rows;
    DeviceBuffer &totals = aligned.totals, &x_sorted = launches.x_sorted;
    int tiles = 0; // totals[0]: the tiles moe_align filled
    totals.read(&tiles, sizeof(int));
    const std::size_t row_bytes = std::size_t(layer.hidden) * sizeof(T);
    const std::size_t all_bytes = std::size_t(tiles) * 128 * row_bytes,
                      pair_bytes = std::size_t(pairs) * row_bytes;
    std::printf("| %s | %s | %d tokens: %d tiles, %d rows, %d of them pairs' (%.1f MB) and %d "
                "padding (%.1f MB) | | | | |\n",
                layer.name, type.c_str(), tokens, tiles, tiles * 128, pairs, pair_bytes * 1e-6,
                tiles * 128 - pairs, (all_bytes - pair_bytes) * 1e-6);
    DeviceBuffer copy_from = filled<T>(rows * layer.hidden, 1.0);
    const Kernel &copy = rt.kernel(kjit::bench::copy16_template(), {});
    const Kernel &store = rt.kernel(store16_template, {});
    const auto vectors_pass = [&](bool read, std::size_t bytes, unsigned value = 0) {
      const long long n = static_cast<long long>(bytes / 16);
      const unsigned grid = static_cast<unsigned>(std::min<long long>(n / 256 + 1, 65536));
      if (read)
        copy.launch({.grid = grid, .block = 256}, copy_from.as<const void>(), x_sorted.data(), n);
      else
        store.launch({.grid = grid, .block = 256}, x_sorted.data(), n, value);
    };
    struct Form {
      std::string name;
      const Kernel *kernel;
      int rows; // a block's, a warp a row
      bool zero_padding;
    };
    std::vector<Form> forms = {{"moe_gather before moe11 (zero padding), ROWS 8",
                                &rt.kernel(zero_padding_gather_template, {{"T", type}}), 8, true}};
    for (const auto &[rows_a_block, cache] : {std::pair{8, 0}, {16, 0}, {8, 1}, {16, 1}})
      forms.push_back(
          {"padding left alone, ROWS " + std::to_string(rows_a_block) + ", CACHE " +
               std::to_string(cache) + (rows_a_block == 8 && cache == 0 ? " (fused_moe's)" : ""),
           &rt.kernel(templates::find("moe_gather"),
                      {{"T", type}, {"VEC", 8}, {"ROWS", rows_a_block}, {"CACHE", cache}}),
           rows_a_block, false});
    const auto run_gather = [&](const Form &form) {
      launches.gather_pass(*form.kernel, form.rows);
    };
    // Each form once on poisoned sorted rows (all bits set: NaN), against the host's gather: a
    // pair's row is its token's, a padding row zeros (before moe11) or still poison.
    {
      std::vector<int> sorted_host(rows);
      aligned.sorted.read(sorted_host.data(), rows * 4);
      std::vector<unsigned char> x_host(std::size_t(tokens) * row_bytes), got(all_bytes);
      fused.x.read(x_host.data(), x_host.size());
      for (const Form &form : forms) {
        vectors_pass(false, all_bytes, 0xffffffffu);
        run_gather(form);
        x_sorted.read(got.data(), all_bytes);
        int wrong = 0;
        for (std::size_t r = 0; r < std::size_t(tiles) * 128; ++r) {
          const unsigned char *row = got.data() + r * row_bytes;
          if (sorted_host[r] >= 0)
            wrong += std::memcmp(row, x_host.data() + (sorted_host[r] / layer.top_k) * row_bytes,
                                 row_bytes) != 0;
          else
            wrong += !std::all_of(row, row + row_bytes, [&](unsigned char b) {
              return b == (form.zero_padding ? 0 : 0xff);
            });
        }
        std::printf(
            "| %s | %s | check | %s | %s | | |\n", layer.name, type.c_str(), form.name.c_str(),
            wrong == 0 ? "every row right" : (std::to_string(wrong) + " rows WRONG").c_str());
        std::fflush(stdout);
      }
    }
    // fused_moe's GEMMs at 4096 tokens (moe_plan): on the sorted rows, in the dynamic tile order.
    const ops::detail::GroupedPlan up = ops::detail::make_grouped_plan(
        rt, ops::detail::grouped_gemm_variant<T>(rt, true, false, pairs, layer.experts, layer.inter,
                                                 layer.hidden));
    const ops::detail::GroupedPlan down = ops::detail::make_grouped_plan(
        rt, ops::detail::grouped_gemm_variant<T>(rt, false, false, pairs, layer.experts,
                                                 layer.hidden, layer.inter));
    const double flops = 6.0 * pairs * layer.hidden * layer.inter; // both GEMMs
    const auto print = [&](int round, const std::string &what, double ms, double bytes,
                           double baseline_ms, const char *baseline) {
      std::printf("| %s | %s | %d | %s | %.4f | %s | %.2f of %s |\n", layer.name, type.c_str(),
                  round, what.c_str(), ms,
                  bytes > 0
                      ? (std::to_string(static_cast<int>(bytes / ms * 1e-6)) + " GB/s").c_str()
                      : (std::to_string(static_cast<int>(flops / ms * 1e-9)) + " TFLOP/s").c_str(),
                  baseline_ms / ms, baseline);
      std::fflush(stdout);
    };
    // The layer with: the gather before moe11, fused_moe's, and the best alone in moe11's call
    // (ROWS 16 with streaming stores).
    const std::vector<std::size_t> layer_forms = {0, 1, 4};
    for (int round = 0; round < 4; ++round) {
      const double copy_all =
          median_ms_per_launch(device, 20, [&] { vectors_pass(true, all_bytes); });
      const double copy_pairs =
          median_ms_per_launch(device, 20, [&] { vectors_pass(true, pair_bytes); });
      const double store_pairs =
          median_ms_per_launch(device, 20, [&] { vectors_pass(false, pair_bytes); });
      print(round, "copy16 of every row's bytes (baseline)", copy_all, all_bytes, copy_all,
            "that copy");
      print(round, "copy16 of the pairs' rows' bytes (baseline)", copy_pairs, pair_bytes,
            copy_pairs, "that copy");
      print(round, "store16 of the pairs' rows' bytes (write-only bound)", store_pairs, pair_bytes,
            copy_pairs, "the pairs' copy");
      for (std::size_t i = 0; i < forms.size(); ++i) {
        const Form &form = forms[(i + round) % forms.size()];
        const double ms = median_ms_per_launch(device, 20, [&] { run_gather(form); });
        print(round, form.name, ms, form.zero_padding ? all_bytes : pair_bytes,
              form.zero_padding ? copy_all : copy_pairs,
              form.zero_padding ? "every row's copy" : "the pairs' copy");
      }
      const double dense_ms = median_ms_per_launch(device, 5, [&] { dense.run(); });
      print(round, "layer: dense linear() x2 (baseline)", dense_ms, 0, dense_ms, "dense");
      print(round, "layer: fused_moe", median_ms_per_launch(device, 5, [&] { fused.run(); }), 0,
            dense_ms, "dense");
      for (std::size_t i = 0; i < layer_forms.size(); ++i) {
        const Form &form = forms[layer_forms[(i + round) % layer_forms.size()]];
        print(round, "layer: its launches, " + form.name,
              median_ms_per_launch(device, 5,
                                   [&] { launches.run(up, down, form.kernel, form.rows); }),
              0, dense_ms, "dense");
      }
    }
  }

  // fused_moe and the dense GEMMs once each at 4096 tokens, for a profiler (--profile).
  template <Element T> void profile(const Layer &layer) {
    const Experts<T> weights = experts<T>(layer);
    Fused<T> fused(*this, layer, weights, 4096);
    fused.run();
    Dense<T> dense(*this, layer, weights, 4096 * layer.top_k);
    dense.run();
    device.synchronize();
  }

  template <Element T> void rows(const Layer &layer) {
    const Experts<T> weights = experts<T>(layer);
    for (int tokens : {1, 16, 256, 4096}) {
      const int pairs = tokens * layer.top_k;
      Fused<T> fused(*this, layer, weights, tokens);
      Dense<T> dense(*this, layer, weights, pairs);
      // In alternating bursts, at one clock; the prefill rows after the card has warmed to the
      // steady state of its power cap.
      const std::vector<double> ms = interleaved_ms_per_launch(
          device, {[&] { fused.run(); }, [&] { dense.run(); }}, tokens == 4096 ? 4000 : 0);
      const double moe_ms = ms[0], dense_ms = ms[1];
      const double flops = 6.0 * pairs * layer.hidden * layer.inter;
      const double weight_bytes =
          3.0 * fused.touched.size() * layer.hidden * layer.inter * sizeof(T);
      const double copy = copy_ms(static_cast<std::size_t>(weight_bytes / 2));
      std::printf(
          "| %s | %d | %s | %zu | %.3f | %.0f | %.3f | %.0f | %.2f | %.0f | %.0f | %.2f |\n",
          layer.name, tokens, std::string(element_name<T>()).c_str(), fused.touched.size(), moe_ms,
          flops / moe_ms * 1e-9, dense_ms, flops / dense_ms * 1e-9, dense_ms / moe_ms,
          weight_bytes / moe_ms * 1e-6, weight_bytes / copy * 1e-6, copy / moe_ms);
      std::fflush(stdout);
    }
  }

  // The FP8 layer's weights: e4m3 bytes and block scales of 2^-12 (values up to 0.11).
  struct Fp8Experts {
    DeviceBuffer w13, w2, w13_scales, w2_scales;
    MoeWeightsFp8 view;
  };
  Fp8Experts fp8_experts(const Layer &layer) {
    const auto bytes = [&](std::size_t count) {
      DeviceBuffer buffer = device.allocate(count);
      rt.kernel(fill_e4m3_template, {})
          .launch({.grid = 4096, .block = 256}, buffer.as<unsigned char>(),
                  static_cast<long long>(count), ++seeds);
      return buffer;
    };
    const auto scales = [&](std::size_t count) {
      const std::vector<float> host(count, 1.0f / 4096);
      DeviceBuffer buffer = device.allocate(count * sizeof(float));
      buffer.write(host.data(), count * sizeof(float));
      return buffer;
    };
    const int e = layer.experts, h = layer.hidden, i = layer.inter;
    Fp8Experts w{bytes(std::size_t(e) * 2 * i * h),
                 bytes(std::size_t(e) * h * i),
                 scales(std::size_t(e) * (2 * i / 128) * (h / 128)),
                 scales(std::size_t(e) * (h / 128) * (i / 128)),
                 {}};
    w.view = {w.w13.as<const std::uint8_t>(),
              w.w2.as<const std::uint8_t>(),
              {w.w13_scales.as<const float>(), e, 2 * i / 128, h / 128},
              {w.w2_scales.as<const float>(), e, h / 128, i / 128},
              e,
              h,
              i};
    return w;
  }

  // --fp8: fused_moe with FP8 weights against the bfloat16 fused_moe and dense GEMM on the same
  // routing, and a copy of the e4m3 bytes of the experts touched.
  void fp8_rows(const Layer &layer) {
    const Experts<BFloat16> weights = experts<BFloat16>(layer);
    const Fp8Experts fp8 = fp8_experts(layer);
    for (int tokens : {1, 16, 256, 4096}) {
      const int pairs = tokens * layer.top_k;
      Fused<BFloat16> fused(*this, layer, weights, tokens);
      DeviceBuffer workspace =
          device.allocate(fused_moe_workspace_bytes<BFloat16>(tokens, layer.top_k, fp8.view));
      const int launches = tokens >= 256 ? 5 : 20;
      const double fp8_ms = median_ms_per_launch(device, launches, [&] {
        fused_moe<BFloat16>(
            rt, fused.out.template as<BFloat16>(), fused.x.template as<const BFloat16>(),
            fused.routing.template as<const float>(), fused.ids.template as<const int>(), tokens,
            layer.top_k, fp8.view, workspace.data(), workspace.size());
      });
      const double bf16_ms = median_ms_per_launch(device, launches, [&] { fused.run(); });
      Dense<BFloat16> dense(*this, layer, weights, pairs);
      const double dense_ms = median_ms_per_launch(device, launches, [&] { dense.run(); });
      const double flops = 6.0 * pairs * layer.hidden * layer.inter;
      const double weight_bytes = 3.0 * fused.touched.size() * layer.hidden * layer.inter;
      const double copy = copy_ms(static_cast<std::size_t>(weight_bytes / 2));
      std::printf("| %s | %d | %zu | %.3f | %.0f | %.3f | %.0f | %.0f | %.2f | %.2f | %.0f | "
                  "%.2f |\n",
                  layer.name, tokens, fused.touched.size(), fp8_ms, flops / fp8_ms * 1e-9, bf16_ms,
                  flops / bf16_ms * 1e-9, flops / dense_ms * 1e-9, bf16_ms / fp8_ms,
                  dense_ms / fp8_ms, weight_bytes / fp8_ms * 1e-6, copy / fp8_ms);
      std::fflush(stdout);
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  const std::string mode = argc >= 2 ? argv[1] : "";
  // After the mode: --gather-pass's and --prefill's layer ("fine" or "mixtral"; both where none is
  // named), and --prefill's candidate parameters, NAME=VALUE each (SKIP_PADDING=0 where none is).
  std::string only;
  ParamValues candidate;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t equals = arg.find('=');
    if (equals == std::string::npos) {
      only = arg;
      continue;
    }
    int value = 0;
    const char *digits = arg.c_str() + equals + 1, *end = arg.c_str() + arg.size();
    if (digits == end || std::from_chars(digits, end, value).ptr != end) {
      std::printf("%s: %s is not NAME=INTEGER\n", argv[0], arg.c_str());
      return 1;
    }
    candidate.set(arg.substr(0, equals), value);
  }
  if (candidate.empty())
    candidate.set("SKIP_PADDING", 0);
  const bool sweep = mode == "--sweep" || mode == "--breakdown";
  if (argc > 1 && !sweep && mode != "--profile" && mode != "--fp8" && mode != "--tiles" &&
      mode != "--prefill" && mode != "--gather-pass") { // tools/gpu-check asks for --help
    std::printf(
        "usage: %s [--sweep | --breakdown | --profile | --fp8 | --tiles | --prefill ... | "
        "--gather-pass ...]\n  "
        "prints "
        "fused_moe's "
        "table against "
        "kjit's dense GEMM and a copy; --breakdown fused_moe against each of its launches alone "
        "at 1, 256 and 4096 tokens, --sweep that and the grouped GEMM's variants, --profile "
        "fused_moe and the dense GEMMs once each at 4096 tokens (for ncu), --fp8 fused_moe with "
        "e4m3 weights against the bfloat16 one, the dense GEMM and a copy of its weight bytes, "
        "--tiles the grouped GEMMs' tile shapes at 16 and 256 tokens against a copy, --prefill "
        "[fine | mixtral] [NAME=VALUE ...] the grouped GEMMs in the heuristic's form and with "
        "those parameters (default SKIP_PADDING=0), alone at 4096 tokens and in the layer at 16, "
        "256 and 4096, against the dense GEMM, "
        "--gather-pass [fine | mixtral] the moe_gather pass's forms at 4096 tokens, each checked, "
        "against a copy of the bytes it writes, and the layer with each against the dense GEMM\n",
        argv[0]);
    return 0;
  }
  try {
    Bench bench;
    std::printf("device: %s (%s)\n\n", bench.device.name().c_str(),
                bench.device.target().id().c_str());
    if (bench.device.target().id() != "sm_90a") {
      std::printf("no result: fused_moe runs on sm_90a only\n");
      return 0;
    }
    const Layer layers[] = {{"Mixtral-like E8 top2 4096/14336", 8, 2, 4096, 14336},
                            {"fine-grained E64 top6 2048/1408", 64, 6, 2048, 1408}};
    if (mode == "--profile") {
      for (const Layer &layer : layers)
        bench.profile<BFloat16>(layer);
      return 0;
    }
    if (mode == "--tiles") {
      std::printf("| layer | tokens | GEMM | BLOCK_N | STAGES | ms | weight GB/s |\n"
                  "| --- | --- | --- | --- | --- | --- | --- |\n");
      for (const Layer &layer : layers)
        for (int tokens : {16, 256})
          bench.tiles<BFloat16>(layer, tokens);
      return 0;
    }
    if (mode == "--gather-pass") {
      std::printf("| layer | type | round | what | ms | rate | of baseline (time) |\n| --- | --- | "
                  "--- | --- | --- | --- | --- |\n");
      if (only != "mixtral")
        bench.gather<BFloat16>(layers[1]);
      if (only != "fine")
        bench.gather<BFloat16>(layers[0]);
      return 0;
    }
    if (mode == "--prefill") {
      std::printf("| layer | type | tokens | round | what | form | ms | TFLOP/s | of "
                  "dense (time) |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
      for (const Layer *layer : {&layers[1], &layers[0]})
        if (only != (layer == &layers[0] ? "fine" : "mixtral")) {
          bench.prefill<BFloat16>(*layer, candidate);
          bench.prefill<Half>(*layer, candidate);
        }
      return 0;
    }
    if (mode == "--fp8") {
      std::printf("| layer | tokens | experts touched | fp8 ms | fp8 TFLOP/s | bf16 ms | bf16 "
                  "TFLOP/s | dense bf16 TFLOP/s | of bf16 fused_moe (time) | of dense (time) | "
                  "e4m3 weight GB/s | of copy |\n");
      std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
      for (const Layer &layer : layers)
        bench.fp8_rows(layer);
      return 0;
    }
    if (sweep) {
      std::printf("| layer | GEMM | tokens | BLOCK_N | STAGES | GROUP_M | ms | TFLOP/s |\n"
                  "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
      for (const Layer &layer : layers)
        for (int tokens : {1, 256, 4096})
          bench.sweep<BFloat16>(layer, tokens, mode == "--sweep" && tokens == 4096);
      return 0;
    }
    std::printf("| layer | tokens | type | experts touched | ms | TFLOP/s | dense ms | dense "
                "TFLOP/s | of dense | weight GB/s | copy GB/s | of copy |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const Layer &layer : layers) {
      bench.rows<BFloat16>(layer);
      bench.rows<Half>(layer);
    }
  } catch (const kjit::Error &error) {
    std::printf("no result: %s\n", error.summary().c_str());
    return error.code() == kjit::Errc::no_device ? 0 : 1;
  }
  return 0;
}
