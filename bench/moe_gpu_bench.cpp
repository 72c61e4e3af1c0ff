// kjit_moe_gpu_bench: fused_moe (bfloat16 and half) on the Mixtral-like layer (8 experts, top 2,
// hidden 4096, inter 14336) and a fine-grained one (64 experts, top 6, hidden 2048, inter 1408)
// at 1, 16, 256 and 4096 tokens, routed uniformly at random (distinct experts per token), each
// against two baselines measured in the same run:
// - kjit's dense GEMM for the same FLOPs: linear() at m = tokens * top_k, [2 inter, hidden] then
//   [hidden, inter] (the prefill goal: fused_moe at >= 0.8x its TFLOP/s);
// - a device-to-device copy of the weights the tokens touch (the decode goal: fused_moe reading
//   them at >= 70% of the copy's rate).
// bench/python/moe_torch.py times a torch loop over the experts on the same shapes. With
// --breakdown it times fused_moe against moe_align and its two grouped GEMMs alone (4096 tokens,
// bfloat16); --sweep adds the grouped GEMM's variants: GROUP_M and STAGES at the heuristic's
// BLOCK_N, and the other BLOCK_N.
//
// Each is launched once to compile and warm up, then the median of 5 batches of launches, each
// timed on the host from the first launch to the device's synchronisation.
#include "bench/gpu_timing.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"
#include "ops/src/moe_gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace kjit;
using namespace kjit::ops;

using kjit::bench::median_ms_per_launch;

// 16-bit values in [-scale, scale) from a hash of the index: weights of gigabytes without the
// host's time.
const Template fill_template("fill_hashed", R"(
template <typename T> __global__ void fill_hashed(T *to, long long n, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned long long h = (i + 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    to[i] = kjit::from_float<T>((float(h >> 40) / float(1 << 23) - 1.0f) * scale);
  }
})",
                             {{"T", ParamSchema::type({"half", "bfloat16"}, "bfloat16")}},
                             TemplateOptions{.arguments = {"T*", "long long", "float"}});

struct Layer {
  const char *name;
  int experts, top_k, hidden, inter;
};

struct Bench {
  Runtime rt;
  const Device &device = rt.default_device();

  template <Element T> DeviceBuffer filled(std::size_t count, double scale) {
    DeviceBuffer buffer = device.allocate(count * sizeof(T));
    rt.kernel(fill_template, {{"T", element_name<T>()}})
        .launch({.grid = 4096, .block = 256}, buffer.as<T>(), static_cast<long long>(count),
                static_cast<float>(scale));
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

  // The grouped GEMM's variants on the layer's two projections at `tokens` tokens (`variants`),
  // after fused_moe against its two grouped GEMMs alone (the heuristic's variants, back to back).
  template <Element T> void sweep(const Layer &layer, int tokens, bool variants) {
    const int pairs = tokens * layer.top_k;
    std::set<int> touched;
    DeviceBuffer ids = routed(layer, tokens, touched);
    const std::size_t rows = moe_align_rows(pairs, layer.experts, 128);
    DeviceBuffer sorted = device.allocate(rows * 4), blocks = device.allocate(rows / 128 * 4),
                 positions = device.allocate(std::size_t(pairs) * 4), totals = device.allocate(8);
    const MoeAlignment alignment{sorted.as<int>(), blocks.as<int>(), positions.as<int>(),
                                 totals.as<int>()};
    const double align_ms = median_ms_per_launch(device, 20, [&] {
      moe_align(rt, alignment, ids.as<const int>(), pairs, layer.experts, 128);
    });
    std::printf("| %s | moe_align | %d | | | | %.3f | |\n", layer.name, tokens, align_ms);
    {
      DeviceBuffer w13 =
          filled<T>(std::size_t(layer.experts) * 2 * layer.inter * layer.hidden, 0.02);
      DeviceBuffer w2 = filled<T>(std::size_t(layer.experts) * layer.hidden * layer.inter, 0.02);
      DeviceBuffer x = filled<T>(rows * layer.hidden, 1.0), h = filled<T>(rows * layer.inter, 1.0);
      DeviceBuffer out = device.allocate(std::size_t(tokens) * layer.hidden * sizeof(T));
      const std::vector<float> routing_weights(pairs, 1.0f / layer.top_k);
      DeviceBuffer weights = device.allocate(pairs * sizeof(float));
      weights.write(routing_weights.data(), routing_weights.size() * sizeof(float));
      const MoeWeights<T> moe{w13.as<const T>(), w2.as<const T>(), layer.experts, layer.hidden,
                              layer.inter};
      const std::size_t bytes = fused_moe_workspace_bytes<T>(tokens, layer.top_k, moe);
      DeviceBuffer workspace = device.allocate(bytes);
      const double fused_ms = median_ms_per_launch(device, 5, [&] {
        fused_moe<T>(rt, out.as<T>(), x.as<const T>(), weights.as<const float>(),
                     ids.as<const int>(), tokens, layer.top_k, moe, workspace.data(), bytes);
      });
      const auto gate_up = ops::detail::grouped_gemm_variant<T>(rt, true, pairs, layer.experts,
                                                                layer.inter, layer.hidden);
      const auto down = ops::detail::grouped_gemm_variant<T>(rt, false, pairs, layer.experts,
                                                             layer.hidden, layer.inter);
      const double gemms_ms = median_ms_per_launch(device, 5, [&] {
        ops::detail::grouped_gemm<T>(rt, gate_up, h.as<T>(), x.as<const T>(), w13.as<const T>(),
                                     rows, alignment, layer.experts, layer.inter, layer.hidden,
                                     nullptr);
        ops::detail::grouped_gemm<T>(rt, down, x.as<T>(), h.as<const T>(), w2.as<const T>(), rows,
                                     alignment, layer.experts, layer.hidden, layer.inter, nullptr);
      });
      std::printf("| %s | fused_moe | %d | | | | %.3f | |\n| %s | gate-up + down | %d | | | | "
                  "%.3f | |\n",
                  layer.name, tokens, fused_ms, layer.name, tokens, gemms_ms);
      std::fflush(stdout);
    }
    if (!variants)
      return;
    for (const bool gated : {true, false}) {
      const int n = gated ? layer.inter : layer.hidden, k = gated ? layer.hidden : layer.inter;
      DeviceBuffer w = filled<T>(std::size_t(layer.experts) * n * (gated ? 2 : 1) * k, 0.02);
      DeviceBuffer a = filled<T>(rows * k, 1.0);
      DeviceBuffer c = device.allocate(rows * n * sizeof(T));
      const ops::detail::ChosenVariant heuristic =
          ops::detail::grouped_gemm_variant<T>(rt, gated, pairs, layer.experts, n, k);
      const int block_n = heuristic.integer("BLOCK_N");
      const int other_n = gated ? (block_n == 128 ? 64 : 128) : (block_n == 256 ? 128 : 256);
      struct Choice {
        int block_n, stages, group_m;
      };
      std::vector<Choice> choices;
      for (int stages : {3, 4})
        for (int group_m : {2, 8, 16})
          choices.push_back({block_n, stages, group_m});
      choices.push_back({other_n, 4, 8});
      for (const Choice &choice : choices) {
        ops::detail::ChosenVariant variant = heuristic;
        variant.params.set("BLOCK_N", choice.block_n);
        variant.params.set("STAGES", choice.stages);
        variant.params.set("GROUP_M", choice.group_m);
        const double ms = median_ms_per_launch(device, 5, [&] {
          ops::detail::grouped_gemm<T>(rt, variant, c.as<T>(), a.as<const T>(), w.as<const T>(),
                                       rows, alignment, layer.experts, n, k, nullptr);
        });
        const double flops = 2.0 * pairs * n * (gated ? 2 : 1) * k;
        std::printf("| %s | %s | %d | %d | %d | %d | %.3f | %.0f |\n", layer.name,
                    gated ? "gate-up" : "down", tokens, choice.block_n, choice.stages,
                    choice.group_m, ms, flops / ms * 1e-9);
        std::fflush(stdout);
      }
    }
  }

  template <Element T> void rows(const Layer &layer) {
    DeviceBuffer w13 = filled<T>(std::size_t(layer.experts) * 2 * layer.inter * layer.hidden,
                                 1.0 / std::sqrt(layer.hidden));
    DeviceBuffer w2 = filled<T>(std::size_t(layer.experts) * layer.hidden * layer.inter,
                                1.0 / std::sqrt(layer.inter));
    const MoeWeights<T> weights{w13.as<const T>(), w2.as<const T>(), layer.experts, layer.hidden,
                                layer.inter};
    for (int tokens : {1, 16, 256, 4096}) {
      const int pairs = tokens * layer.top_k;
      std::set<int> touched;
      DeviceBuffer ids_device = routed(layer, tokens, touched);
      const std::vector<float> routing_weights(pairs, 1.0f / layer.top_k);
      DeviceBuffer weights_device = device.allocate(routing_weights.size() * sizeof(float));
      weights_device.write(routing_weights.data(), routing_weights.size() * sizeof(float));
      DeviceBuffer x = filled<T>(std::size_t(tokens) * layer.hidden, 1.0);
      DeviceBuffer out = device.allocate(std::size_t(tokens) * layer.hidden * sizeof(T));
      const std::size_t bytes = fused_moe_workspace_bytes<T>(tokens, layer.top_k, weights);
      DeviceBuffer workspace = device.allocate(bytes);
      const int launches = tokens >= 256 ? 5 : 20;
      const double moe_ms = median_ms_per_launch(device, launches, [&] {
        fused_moe<T>(rt, out.as<T>(), x.as<const T>(), weights_device.as<const float>(),
                     ids_device.as<const int>(), tokens, layer.top_k, weights, workspace.data(),
                     bytes);
      });
      // The dense GEMMs of the same FLOPs: one expert's weights over every pair's row.
      DeviceBuffer a = filled<T>(std::size_t(pairs) * layer.hidden, 1.0);
      DeviceBuffer gate_up = device.allocate(std::size_t(pairs) * 2 * layer.inter * sizeof(T));
      DeviceBuffer gated = filled<T>(std::size_t(pairs) * layer.inter, 1.0);
      DeviceBuffer down = device.allocate(std::size_t(pairs) * layer.hidden * sizeof(T));
      const double dense_ms = median_ms_per_launch(device, launches, [&] {
        linear<T>(rt, gate_up.as<T>(), a.as<const T>(), w13.as<const T>(), pairs, 2 * layer.inter,
                  layer.hidden);
        linear<T>(rt, down.as<T>(), gated.as<const T>(), w2.as<const T>(), pairs, layer.hidden,
                  layer.inter);
      });
      const double flops = 6.0 * pairs * layer.hidden * layer.inter;
      const double weight_bytes = 3.0 * touched.size() * layer.hidden * layer.inter * sizeof(T);
      const double copy = copy_ms(static_cast<std::size_t>(weight_bytes / 2));
      std::printf(
          "| %s | %d | %s | %zu | %.3f | %.0f | %.3f | %.0f | %.2f | %.0f | %.0f | %.2f |\n",
          layer.name, tokens, std::string(element_name<T>()).c_str(), touched.size(), moe_ms,
          flops / moe_ms * 1e-9, dense_ms, flops / dense_ms * 1e-9, dense_ms / moe_ms,
          weight_bytes / moe_ms * 1e-6, weight_bytes / copy * 1e-6, copy / moe_ms);
      std::fflush(stdout);
    }
  }
};

} // namespace

int main(int argc, char **argv) {
  const std::string mode = argc == 2 ? argv[1] : "";
  const bool sweep = mode == "--sweep" || mode == "--breakdown";
  if (argc > 1 && !sweep) { // tools/gpu-check asks every bench program for --help
    std::printf("usage: %s [--sweep | --breakdown]\n  prints fused_moe's table against kjit's "
                "dense GEMM and a copy; --breakdown fused_moe against its two grouped GEMMs at "
                "4096 tokens, --sweep that and the grouped GEMM's variants\n",
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
    if (sweep) {
      std::printf("| layer | GEMM | tokens | BLOCK_N | STAGES | GROUP_M | ms | TFLOP/s |\n"
                  "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
      for (const Layer &layer : layers)
        bench.sweep<BFloat16>(layer, 4096, mode == "--sweep");
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
