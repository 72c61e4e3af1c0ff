// kjit_gemm_gpu_bench: the GEMM's TFLOP/s and the rotary embedding's and per-token
// quantisation's bandwidth on the device, each memory-bound figure next to a device-to-device
// copy of as many bytes measured in the same run (bench/python/gemm_torch.py times torch on the
// same shapes). Prints one table; run through tools/gpu-check --run. With KJIT_BENCH_SKINNY_SWEEP
// set it also times every linear_skinny variant on the Llama-3-8B projections at m = 1, 16, 64
// (with --skinny-fp8: at 8192 x 8192, m = 1 and 8). With --skinny-fp8, KJIT_BENCH_SPLITK_SWEEP
// and KJIT_BENCH_WGMMA_SWEEP add the fastest linear_splitk variant (m <= 32, bfloat16) and
// transposed gemm_wgmma variant (m >= 16: tiles of W and of A, K splits, stages, each also on a
// line of its own) to each linear row, KJIT_BENCH_LINEAR_M (say "64,128") times those rows of A
// alone, KJIT_BENCH_LINEAR_WEIGHTS (say "4096x4096") those weights (K x N) alone,
// KJIT_BENCH_LINEAR_LAUNCHES (default 100) sets the launches of each timed batch (1 under a
// profiler: each variant then runs 6 times), and KJIT_BENCH_LINEAR_ONLY stops after the linear
// table.
// --fp8 times only gemm_fp8, each of its variants on DeepGEMM's shapes; --fp8-forms its forms as a
// user calls them and the per-tensor tile widths; --fp8-rounds the block-scaled candidates in
// interleaved rounds at DeepGEMM's three 4096-row shapes, --fp8-rounds-skinny at its 64- and
// 128-row shapes.
//
// Every operator is launched once to compile and warm up; then the median of 5 batches, each
// timed on the host from the first launch to the device's synchronisation, divided by its
// launches (batches are long enough, 20+ ms, that the launch and synchronisation costs vanish).
#include "bench/gpu_timing.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/ops.hpp"
#include "kjit/ops/tuning.hpp"
#include "ops/src/plans.hpp"
#include "ops/src/variants.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using namespace kjit;
using namespace kjit::ops;

using kjit::bench::median_ms_per_launch;

// Random values in [-1, 1) on the device, `count` elements of T.
template <Element T> DeviceBuffer random_on(const Device &device, std::size_t count) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> uniform(-1, 1);
  std::vector<T> host(count);
  for (T &value : host)
    value = from_double<T>(uniform(rng));
  DeviceBuffer buffer = device.allocate(count * sizeof(T));
  buffer.write(host.data(), host.size() * sizeof(T));
  return buffer;
}

// The launches of each batch the linear table times: KJIT_BENCH_LINEAR_LAUNCHES, else 100.
int linear_launches() {
  const char *asked = std::getenv("KJIT_BENCH_LINEAR_LAUNCHES");
  if (asked == nullptr || *asked == '\0')
    return 100;
  char *end = nullptr;
  const long launches = std::strtol(asked, &end, 10);
  if (end == asked || *end != '\0' || launches < 1 || launches > 10000)
    throw Error(Errc::bad_argument,
                std::string("KJIT_BENCH_LINEAR_LAUNCHES: a count from 1 to 10000, not ") + asked);
  return static_cast<int>(launches);
}

// Whether the linear table times the weight of k x n: KJIT_BENCH_LINEAR_WEIGHTS names it
// ("4096x4096,14336x4096"), or is unset.
bool linear_weight_asked(int k, int n) {
  const char *asked = std::getenv("KJIT_BENCH_LINEAR_WEIGHTS");
  if (asked == nullptr || *asked == '\0')
    return true;
  const std::string list = std::string(",") + asked + ",";
  return list.find("," + std::to_string(k) + "x" + std::to_string(n) + ",") != std::string::npos;
}

struct Bench {
  Runtime rt;
  const Device &device = rt.default_device();

  // Milliseconds per copy of `bytes` (read once, written once).
  double copy_ms(std::size_t bytes) {
    const std::size_t pairs = rotation(2 * bytes);
    std::vector<DeviceBuffer> from, to;
    for (std::size_t i = 0; i < pairs; ++i) {
      from.push_back(device.allocate(bytes));
      to.push_back(device.allocate(bytes));
    }
    const Kernel &kernel = rt.kernel(kjit::bench::copy16_template(), {});
    const long long n = static_cast<long long>(bytes / 16);
    const unsigned blocks = static_cast<unsigned>(std::min<long long>(n / 256 + 1, 65536));
    std::size_t next = 0;
    return median_ms_per_launch(device, 20, [&] {
      const std::size_t i = next++ % pairs;
      kernel.launch({.grid = blocks, .block = 256}, from[i].as<const void>(), to[i].data(), n);
    });
  }

  void bandwidth_row(const std::string &op, const std::string &shape, const char *type,
                     std::size_t bytes, double ms) {
    const double copy = copy_ms(bytes / 2);
    std::printf("| %s | %s | %s | %.3f | %.0f | %.0f | %.2f |\n", op.c_str(), shape.c_str(), type,
                ms, bytes / ms * 1e-6, bytes / copy * 1e-6, copy / ms);
  }

  // gemm() as a user calls it (tensor cores where the device has them), or the portable kernel
  // with `tiles`.
  template <Element T> void gemm_row(int size, std::optional<GemmTiles> tiles = {}) {
    const std::size_t count = static_cast<std::size_t>(size) * size;
    DeviceBuffer a = random_on<T>(device, count), b = random_on<T>(device, count);
    DeviceBuffer c = device.allocate(count * sizeof(T));
    const int launches = size >= 8192 ? 2 : 10;
    const double ms = median_ms_per_launch(device, launches, [&] {
      if (tiles)
        gemm<T>(rt, c.as<T>(), a.as<T>(), b.as<T>(), size, size, size, *tiles);
      else
        gemm<T>(rt, c.as<T>(), a.as<T>(), b.as<T>(), size, size, size);
    });
    const void *aligned = a.data();
    const char *kernel =
        tiles ? "gemm (portable)"
        : ops::detail::gemm_wgmma_serves<T>(device.target(), aligned, aligned, aligned, size, size)
            ? "gemm (wgmma)"
        : gemm_has_tensor_cores<T>(device.target()) ? "gemm (mma.sync)"
                                                    : "gemm (portable)";
    std::printf("| %s | %d x %d x %d | %s | %.3f | %.1f TFLOP/s |\n", kernel, size, size, size,
                std::string(element_name<T>()).c_str(), ms,
                2.0 * size * size * static_cast<double>(size) / ms * 1e-9);
  }

  // gemm_wgmma with M, N and K compiled in against the same variant taking them at run time, in
  // alternating batches of the same process; gemm() (B [K, N]) or linear() (W [N, K]).
  template <Element T> void specialised_row(int m, int n, int k, bool b_kmajor) {
    DeviceBuffer a = random_on<T>(device, static_cast<std::size_t>(m) * k);
    DeviceBuffer b = random_on<T>(device, static_cast<std::size_t>(n) * k);
    DeviceBuffer c = device.allocate(static_cast<std::size_t>(m) * n * sizeof(T));
    const ops::detail::ChosenVariant runtime_sizes =
        ops::detail::gemm_wgmma_variant<T>(m, n, k, b_kmajor);
    ops::detail::ChosenVariant fixed = runtime_sizes;
    fixed.params.add({{"SHAPE_M", m}, {"SHAPE_N", n}, {"SHAPE_K", k}});
    const double flop = 2.0 * m * n * static_cast<double>(k);
    const int launches = std::max(2, static_cast<int>(2e12 / flop / 50) + 1);
    auto time = [&](const ops::detail::ChosenVariant &variant) {
      return median_ms_per_launch(device, std::min(launches, 200), [&] {
        ops::detail::launch_gemm_variant<T>(rt, variant, c.as<T>(), a.as<T>(), b.as<T>(), m, n, k,
                                            b_kmajor);
      });
    };
    double run_time_ms = 1e30, fixed_ms = 1e30; // best of three alternations
    for (int round = 0; round < 3; ++round) {
      run_time_ms = std::min(run_time_ms, time(runtime_sizes));
      fixed_ms = std::min(fixed_ms, time(fixed));
    }
    std::printf("| gemm_wgmma %s m=%d n=%d k=%d | %s | run-time sizes %.4f ms %.1f TFLOP/s | "
                "compiled-in sizes %.4f ms %.1f TFLOP/s | run-time / compiled-in %.3f |\n",
                b_kmajor ? "linear" : "gemm", m, n, k, std::string(element_name<T>()).c_str(),
                run_time_ms, flop / run_time_ms * 1e-9, fixed_ms, flop / fixed_ms * 1e-9,
                run_time_ms / fixed_ms);
  }

  // gemm() through gemm_wgmma's default variant with its clusters and epilogue replaced: the
  // register epilogue without clusters (the kernel before clusters), the shared-memory epilogue
  // without and with clusters of two along M and along N, in alternating rounds of one process,
  // each the best of three.
  template <Element T> void cluster_rows(int size) {
    const std::size_t count = static_cast<std::size_t>(size) * size;
    DeviceBuffer a = random_on<T>(device, count), b = random_on<T>(device, count);
    DeviceBuffer c = device.allocate(count * sizeof(T));
    struct Layout {
      int cluster_m, cluster_n, epilogue;
      double ms = 1e30;
    };
    Layout layouts[] = {{1, 1, 0}, {1, 1, 1}, {2, 1, 1}, {1, 2, 1}, {2, 1, 0}};
    const int launches = size >= 8192 ? 4 : 20;
    for (int round = 0; round < 3; ++round)
      for (Layout &layout : layouts) {
        ops::detail::ChosenVariant variant =
            ops::detail::gemm_wgmma_variant<T>(size, size, size, false);
        variant.params.set("CLUSTER_M", layout.cluster_m);
        variant.params.set("CLUSTER_N", layout.cluster_n);
        variant.params.set("EPILOGUE", layout.epilogue);
        layout.ms =
            std::min(layout.ms, median_ms_per_launch(device, launches, [&] {
                       ops::detail::launch_gemm_variant<T>(rt, variant, c.as<T>(), a.as<T>(),
                                                           b.as<T>(), size, size, size, false);
                     }));
      }
    const double flop = 2.0 * size * size * static_cast<double>(size);
    for (const Layout &layout : layouts)
      std::printf("| gemm_wgmma cluster %d x %d, epilogue %d | %d^3 | %s | %.3f | %.1f TFLOP/s | "
                  "%.3f of cluster 1 x 1, epilogue 0 |\n",
                  layout.cluster_m, layout.cluster_n, layout.epilogue, size,
                  std::string(element_name<T>()).c_str(), layout.ms, flop / layout.ms * 1e-9,
                  layouts[0].ms / layout.ms);
  }

  // The first call of a variant in this process (compile or cache load, tensor maps, launch,
  // until the device is done) against a warm call.
  template <Element T> void first_call_row(int m, int n, int k) {
    DeviceBuffer a = random_on<T>(device, static_cast<std::size_t>(m) * k);
    DeviceBuffer w = random_on<T>(device, static_cast<std::size_t>(n) * k);
    DeviceBuffer c = device.allocate(static_cast<std::size_t>(m) * n * sizeof(T));
    auto call = [&] { linear<T>(rt, c.as<T>(), a.as<T>(), w.as<T>(), m, n, k); };
    const auto start = std::chrono::steady_clock::now();
    call();
    device.synchronize();
    const std::chrono::duration<double, std::milli> first =
        std::chrono::steady_clock::now() - start;
    // The warm call's host cost: batches of calls enqueued back to back, short enough that the
    // device's queue never fills (a full queue would make the host wait for the kernels), median
    // over batches; against raw Kernel::launch of the same kernel with the same arguments.
    auto host_us = [&](const std::function<void()> &run) {
      const int calls = 64;
      std::vector<double> batches;
      for (int batch = 0; batch < 31; ++batch) {
        device.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < calls; ++i)
          run();
        const std::chrono::duration<double, std::micro> spent =
            std::chrono::steady_clock::now() - t0;
        batches.push_back(spent.count() / calls);
      }
      device.synchronize();
      return kjit::bench::median(std::move(batches));
    };
    const double warm = host_us(call);
    const ops::detail::ChosenVariant variant = ops::detail::linear_skinny_variant<T>(m, n, k);
    const Kernel &kernel = rt.kernel(*variant.tmpl, variant.params);
    const Dim3 grid((n + 16 * variant.integer("ROW_BLOCKS") - 1) /
                        (16 * variant.integer("ROW_BLOCKS")),
                    (m + variant.integer("M_TILE") - 1) / variant.integer("M_TILE"));
    const unsigned block = 32 * variant.integer("WARPS");
    const double raw = host_us([&] {
      kernel.launch({.grid = grid, .block = block}, c.as<T>(), a.as<const T>(), w.as<const T>(), m,
                    n, k);
    });
    std::printf("| linear first call %d x %d x %d %s | %.1f ms | warm call %.2f us on the host | "
                "raw launch of the same kernel %.2f us |\n",
                m, n, k, std::string(element_name<T>()).c_str(), first.count(), warm, raw);
  }

  // A [m, k], copies of W [n, k] at least 256 MiB together (rotated over so that the 50 MiB L2
  // serves none of them), and C [m, n].
  struct LinearOperands {
    DeviceBuffer a;
    std::vector<DeviceBuffer> weights;
    DeviceBuffer c;
    std::size_t weight_bytes;
  };
  template <Element T> LinearOperands linear_operands(int m, int n, int k) {
    const std::size_t weight_bytes = static_cast<std::size_t>(n) * k * sizeof(T);
    std::vector<DeviceBuffer> weights;
    for (std::size_t i = 0; i < rotation(weight_bytes); ++i)
      weights.push_back(random_on<T>(device, static_cast<std::size_t>(n) * k));
    return {random_on<T>(device, static_cast<std::size_t>(m) * k), std::move(weights),
            device.allocate(static_cast<std::size_t>(m) * n * sizeof(T)), weight_bytes};
  }

  // linear() (x @ W^T) on a Llama-3-8B projection; for small m also the weights' bandwidth
  // against a copy of as many bytes. Launches rotate over copies of the weights (and the copy
  // over pairs of buffers) at least 256 MiB in all, so that the 50 MiB L2 serves none of them.
  template <Element T> void linear_row(int m, int n, int k) {
    LinearOperands ops = linear_operands<T>(m, n, k);
    DeviceBuffer &a = ops.a, &c = ops.c;
    const std::vector<DeviceBuffer> &weights = ops.weights;
    const std::size_t weight_bytes = ops.weight_bytes, copies = weights.size();
    const double flop = 2.0 * m * n * static_cast<double>(k);
    const int launches = std::max(2, static_cast<int>(2e12 / flop / 50) + 1);
    std::size_t next = 0;
    const double ms = median_ms_per_launch(device, std::min(launches, 200), [&] {
      linear<T>(rt, c.as<T>(), a.as<T>(), weights[next++ % copies].as<T>(), m, n, k);
    });
    std::printf("| linear | m=%d k=%d n=%d | %s | %.4f | %.1f TFLOP/s | weights %.0f GB/s", m, k, n,
                std::string(element_name<T>()).c_str(), ms, flop / ms * 1e-9,
                weight_bytes / ms * 1e-6);
    if (m <= 64) {
      const double copy = copy_ms(weight_bytes / 2);
      std::printf(" | copy %.0f GB/s | %.2f of copy", weight_bytes / copy * 1e-6, copy / ms);
    }
    std::printf(" |\n");
  }

  // Every linear_skinny variant (ROW_BLOCKS x WARPS x UNROLL, M_TILE as the heuristic picks it)
  // on one shape, rotated past L2 as in linear_row, each against the same copy: the evidence the
  // heuristic's choice rests on. Prints the heuristic's variant and the fastest ones.
  template <Element T> void skinny_sweep(int m, int n, int k) {
    const ops::detail::ChosenVariant heuristic = ops::detail::linear_skinny_variant<T>(m, n, k);
    const int m_tile = heuristic.integer("M_TILE");
    std::vector<ParamValues> candidates;
    for (int row_blocks : {1, 2, 4})
      for (int warps : {4, 8, 16})
        for (int unroll : {1, 2, 4, 8})
          candidates.push_back({{"T", std::string(element_name<T>())},
                                {"M_TILE", m_tile},
                                {"ROW_BLOCKS", row_blocks},
                                {"WARPS", warps},
                                {"UNROLL", unroll}});
    precompile(rt, {heuristic.tmpl, {}}, candidates, device.target());
    LinearOperands ops = linear_operands<T>(m, n, k);
    DeviceBuffer &a = ops.a, &c = ops.c;
    const std::vector<DeviceBuffer> &weights = ops.weights;
    const std::size_t weight_bytes = ops.weight_bytes, copies = weights.size();
    const double copy = copy_ms(weight_bytes / 2);
    struct Timed {
      double ms;
      std::string name;
      bool chosen;
    };
    std::vector<Timed> timed;
    for (const ParamValues &params : candidates) {
      const Kernel &kernel = rt.kernel(*heuristic.tmpl, params);
      const ops::detail::ChosenVariant variant{heuristic.tmpl, params};
      const int rows = 16 * variant.integer("ROW_BLOCKS");
      const Dim3 grid((n + rows - 1) / rows, (m + m_tile - 1) / m_tile);
      const unsigned block = 32 * variant.integer("WARPS");
      std::size_t next = 0;
      const double ms = median_ms_per_launch(device, 100, [&] {
        kernel.launch({.grid = grid, .block = block}, c.as<T>(), a.as<const T>(),
                      weights[next++ % copies].as<const T>(), m, n, k);
      });
      timed.push_back({ms,
                       "RB" + std::to_string(variant.integer("ROW_BLOCKS")) + " W" +
                           std::to_string(variant.integer("WARPS")) + " U" +
                           std::to_string(variant.integer("UNROLL")),
                       params == heuristic.params});
    }
    std::sort(timed.begin(), timed.end(),
              [](const Timed &x, const Timed &y) { return x.ms < y.ms; });
    std::printf("| skinny sweep m=%d k=%d n=%d M_TILE %d | copy %.0f GB/s |", m, k, n, m_tile,
                weight_bytes / copy * 1e-6);
    for (std::size_t i = 0; i < timed.size(); ++i)
      if (i < 5 || timed[i].chosen)
        std::printf(" %s%s %.2f of copy;", timed[i].chosen ? "heuristic " : "",
                    timed[i].name.c_str(), copy / timed[i].ms);
    std::printf(" |\n");
  }

  // linear() as a user calls it at m tokens, against the candidates it chooses among on the same
  // rotated weights: linear_skinny's heuristic (m <= 64), linear_splitk's heuristic and, with
  // `sweep`, the fastest of its variants (SPLITS x WARPS x K_SLICE x ROW_BLOCKS at the
  // heuristic's M_TILE), and gemm_wgmma's heuristic and, with `wgmma_sweep`, its fastest
  // SPLIT_K x STAGES variant. One row, microseconds per call, and the weights' GB/s of linear()
  // against a copy of as many bytes.
  // `ops` holds at least m rows of A and C (linear_operands for the largest m).
  template <Element T>
  void linear_candidates_row(LinearOperands &ops, int m, int n, int k, bool sweep,
                             bool wgmma_sweep) {
    const std::size_t copies = ops.weights.size();
    std::size_t next = 0;
    const auto time = [&](const std::function<void(const T *)> &run) {
      return 1e3 * median_ms_per_launch(device, linear_launches(), [&] {
               run(ops.weights[next++ % copies].template as<const T>());
             });
    };
    const auto variant_us = [&](const ops::detail::ChosenVariant &variant) {
      return time([&](const T *w) {
        ops::detail::launch_gemm_variant<T>(rt, variant, ops.c.as<T>(), ops.a.as<T>(), w, m, n, k,
                                            true);
      });
    };
    // The candidates of `tmpl`, compiled together, timed in turn: the fastest, and its name,
    // where one beats `best_us`.
    const auto keep_fastest =
        [&](const Template &tmpl, const std::vector<ParamValues> &candidates, double &best_us,
            std::string &best,
            const std::function<std::string(const ops::detail::ChosenVariant &)> &name) {
          precompile(rt, {&tmpl, {}}, candidates, device.target());
          for (const ParamValues &params : candidates) {
            const ops::detail::ChosenVariant variant{&tmpl, params};
            const double us = variant_us(variant);
            if (us < best_us) {
              best_us = us;
              best = name(variant);
            }
          }
        };
    const double linear_us =
        time([&](const T *w) { linear<T>(rt, ops.c.as<T>(), ops.a.as<T>(), w, m, n, k); });
    const double skinny_us =
        m <= ops::detail::linear_skinny_max_m
            ? variant_us(ops::detail::linear_skinny_variant<T>(ops::detail::rows_bucket(m), n, k))
            : 0;
    const ops::detail::ChosenVariant splitk =
        ops::detail::linear_splitk_variant<T>(static_cast<int>(ops::detail::rows_bucket(m)), n, k);
    const double splitk_us = variant_us(splitk);
    double best_us = splitk_us;
    std::string best = "heuristic";
    if (sweep) {
      std::vector<ParamValues> candidates;
      const int heuristic_tile = splitk.integer("M_TILE");
      for (int m_tile : {8, heuristic_tile})
        for (int splits : {1, 2, 4, 8})
          for (int warps : {4, 8})
            for (int k_slice : {64, 128, 256})
              for (int row_blocks : {1, 2}) {
                if (m_tile < m || (m_tile == 8 && heuristic_tile == 8))
                  continue; // 8-token tiles only where they hold every token, and once
                ParamValues params = splitk.params;
                params.set("M_TILE", m_tile);
                params.set("SPLITS", splits);
                params.set("WARPS", warps);
                params.set("K_SLICE", k_slice);
                params.set("ROW_BLOCKS", row_blocks);
                if (splitk.tmpl->tuning().fits(splitk.tmpl->bind(params), "sm_90a").empty())
                  candidates.push_back(params);
              }
      keep_fastest(*splitk.tmpl, candidates, best_us, best, [](const auto &variant) {
        char name[64];
        std::snprintf(name, sizeof name, "MT%d S%d W%d KS%d RB%d", variant.integer("M_TILE"),
                      variant.integer("SPLITS"), variant.integer("WARPS"),
                      variant.integer("K_SLICE"), variant.integer("ROW_BLOCKS"));
        return std::string(name);
      });
    }
    // gemm_wgmma's heuristic variant, and the fastest of its variants (wgmma_sweep_candidates),
    // each also on a line of its own.
    const ops::detail::ChosenVariant wgmma = ops::detail::gemm_wgmma_variant<T>(
        static_cast<int>(ops::detail::rows_bucket(m)), n, k, true);
    const double wgmma_us = variant_us(wgmma);
    double best_wgmma_us = wgmma_us;
    std::string best_wgmma = "heuristic";
    if (wgmma_sweep && m >= 16) {
      const std::vector<ParamValues> candidates = wgmma_sweep_candidates(wgmma, m);
      precompile(rt, {wgmma.tmpl, {}}, candidates, device.target());
      for (const ParamValues &params : candidates) {
        const ops::detail::ChosenVariant variant{wgmma.tmpl, params};
        char name[64];
        std::snprintf(
            name, sizeof name, "SW%d BM%d BN%d SK%d ST%d CM%d CN%d", variant.integer("SWAP_AB"),
            variant.integer("BLOCK_M"), variant.integer("BLOCK_N"), variant.integer("SPLIT_K"),
            variant.integer("STAGES"), variant.integer("CLUSTER_M"), variant.integer("CLUSTER_N"));
        const double us = variant_us(variant);
        std::printf("| wgmma variant | %s | %d x %d | %d | %s | %.2f |\n",
                    std::string(element_name<T>()).c_str(), k, n, m, name, us);
        if (us < best_wgmma_us) {
          best_wgmma_us = us;
          best_wgmma = name;
        }
      }
    }
    const double copy = copy_ms(ops.weight_bytes / 2);
    std::printf("| %s | %d x %d | %d | %.2f | %.2f | %.2f | %.2f (%s) | %.2f (SPLIT_K %d) | %.2f "
                "(%s) | %.0f | %.0f | %.2f |\n",
                std::string(element_name<T>()).c_str(), k, n, m, linear_us, skinny_us, splitk_us,
                best_us, best.c_str(), wgmma_us, wgmma.integer("SPLIT_K"), best_wgmma_us,
                best_wgmma.c_str(), ops.weight_bytes / linear_us * 1e-3,
                ops.weight_bytes / copy * 1e-6, copy * 1e3 / linear_us);
  }

  // linear()'s gemm_wgmma variants around `heuristic` (a transposed one, SWAP_AB, at m <= 128):
  // tiles of 128 or 64 rows of W and of m / 4 to m rows of the activations (several narrow tiles
  // read each tile of W), K in one piece or split in two (128-row tiles of W also in four: a
  // 4096-row weight's 32 tiles on 128 multiprocessors), 64-row tiles of W also in pairs
  // (CLUSTER_M 2), and tiles of the activations in pairs (CLUSTER_N 2) at the deepest ring;
  // 128-row tiles of W at the deepest ring
  // up to 8 stages (10 and 12 gained nothing, BENCHMARKS.md), 64-row ones (half the bytes a
  // stage) also at the deepest that fits 227 KiB of shared memory.
  static std::vector<ParamValues>
  wgmma_sweep_candidates(const ops::detail::ChosenVariant &heuristic, int m) {
    std::vector<ParamValues> candidates;
    const Template &tmpl = *heuristic.tmpl;
    const auto fits = [&](const ParamValues &params) {
      return tmpl.tuning().fits(tmpl.bind(params), "sm_90a").empty() &&
             tmpl.tuning().shared_bytes(tmpl.bind(params)) <= ops::detail::sm90_shared_bytes;
    };
    for (int swap_ab : {1, 0})
      for (int block_m : {128, 64})
        for (int block_n : {16, 32, 64, 128})
          for (int split_k : {1, 2, 4}) {
            // K in four only with 128-row tiles of W: half the tiles, each read by four blocks.
            // Untransposed (SWAP_AB 0: the rows of A in one 128-row tile, two consumers, tiles
            // of BLOCK_N rows of W) from 64 rows of A, K in one piece or two.
            if (swap_ab == 1
                    ? block_n >= 2 * m || 4 * block_n < m || (split_k == 4 && block_m != 128)
                    : m < 64 || block_m != 128 || block_n < 32 || split_k == 4)
              continue;
            ParamValues params = heuristic.params;
            params.set("CLUSTER_M", 1); // pairs below, and only where K is whole
            params.set("CLUSTER_N", 1);
            params.set("SWAP_AB", swap_ab);
            params.set("BLOCK_M", block_m);
            params.set("BLOCK_N", block_n);
            params.set("SPLIT_K", split_k);
            for (int stages : {12, 10, 8, 6, 5, 4}) {
              params.set("STAGES", stages);
              if ((block_m == 64 || stages <= 8) && fits(params))
                break;
            }
            const std::int64_t deepest = params.get("STAGES").integer();
            if (params != heuristic.params)
              candidates.push_back(params);
            // A pair of 64-row tiles of W sharing the activations' tile (each block copies half,
            // multicast): half the bytes of A leave L2, which the tiles of W read once each.
            ParamValues pair = params;
            pair.set("CLUSTER_M", 2);
            if (block_m == 64 && split_k == 1 && block_n >= 32 && fits(pair) &&
                pair != heuristic.params)
              candidates.push_back(pair);
            // A pair of tiles of the activations sharing W's tile (multicast): each tile of W
            // leaves L2 once where the rows of A take two tiles.
            ParamValues shared_w = params;
            shared_w.set("CLUSTER_N", 2);
            if (split_k == 1 && block_n < m && fits(shared_w) && shared_w != heuristic.params)
              candidates.push_back(shared_w);
            params.set("STAGES", 8);
            if (deepest > 8 && params != heuristic.params)
              candidates.push_back(params);
          }
    return candidates;
  }

  // Random e4m3 values (every byte but the two NaNs) and unit scales on the device, enough for
  // every fp8_row: the kernel's speed does not depend on the values.
  struct Fp8Operands {
    DeviceBuffer a, b, d, scale_a, scale_b;
  };
  Fp8Operands fp8_operands(std::size_t a_bytes, std::size_t b_bytes, std::size_t d_count,
                           std::size_t scales) {
    std::mt19937 rng(3);
    const auto bytes_on = [&](std::size_t count) {
      std::vector<std::uint8_t> host(count);
      for (std::uint8_t &value : host) {
        value = static_cast<std::uint8_t>(rng());
        if ((value & 0x7f) == 0x7f) // NaN in e4m3fn
          value ^= 1;
      }
      DeviceBuffer buffer = device.allocate(count);
      buffer.write(host.data(), count);
      return buffer;
    };
    const std::vector<float> ones(scales, 1.0f);
    DeviceBuffer scale_a = device.allocate(scales * sizeof(float));
    DeviceBuffer scale_b = device.allocate(scales * sizeof(float));
    scale_a.write(ones.data(), scales * sizeof(float));
    scale_b.write(ones.data(), scales * sizeof(float));
    return {bytes_on(a_bytes), bytes_on(b_bytes), device.allocate(d_count * 2), std::move(scale_a),
            std::move(scale_b)};
  }

  // gemm_fp8 at m x n x k: the operator as a user calls it (block scales, row-wise or per
  // tensor), and with `sweep` its variants of the tile widths `widths` x STAGES x CLUSTER_M (the
  // two deepest STAGES that fit; with `print_variants` each on a line of its own) and the
  // fastest of them.
  void fp8_row(Fp8Operands &ops, int m, int n, int k, bool block, bool row_wise, bool sweep,
               bool print_variants = false,
               std::initializer_list<int> widths = {64, 96, 112, 128, 144, 160, 192, 256}) {
    const int k_blocks = k / 128, n_blocks = (n + 127) / 128;
    const ScaleTensor on_a = block      ? ScaleTensor{ops.scale_a.as<float>(), m, k_blocks}
                             : row_wise ? ScaleTensor{ops.scale_a.as<float>(), m, 1}
                                        : ScaleTensor{ops.scale_a.as<float>(), 1, 1};
    const ScaleTensor on_b = block      ? ScaleTensor{ops.scale_b.as<float>(), n_blocks, k_blocks}
                             : row_wise ? ScaleTensor{ops.scale_b.as<float>(), 1, n}
                                        : ScaleTensor{ops.scale_b.as<float>(), 1, 1};
    DeviceBuffer &a = ops.a, &b = ops.b, &d = ops.d, &sa = ops.scale_a, &sb = ops.scale_b;
    const double flop = 2.0 * m * n * static_cast<double>(k);
    const int launches = std::max(2, std::min(200, static_cast<int>(2e12 / flop / 20) + 1));
    const char *form = block ? "block scales" : row_wise ? "row-wise" : "per tensor";
    const double ms = median_ms_per_launch(device, launches, [&] {
      if (block)
        gemm_fp8_blockscale(rt, d.as<BFloat16>(), a.as<std::uint8_t>(), on_a, b.as<std::uint8_t>(),
                            on_b, m, n, k);
      else
        gemm_fp8_scaled(rt, d.as<BFloat16>(), a.as<std::uint8_t>(), on_a, b.as<std::uint8_t>(),
                        on_b, m, n, k);
    });
    const ops::detail::ChosenVariant heuristic =
        ops::detail::gemm_fp8_variant(block, row_wise, m, n);
    std::string best = "-";
    double best_ms = ms;
    if (sweep) {
      std::vector<ParamValues> candidates;
      for (int block_n : widths)
        for (int cluster_m : {1, 2})
          for (int promotion = 0; promotion < 4; ++promotion) { // PINGPONG, OVERLAP
            const int pingpong = promotion % 2, overlap = promotion / 2;
            if (!block && (pingpong != heuristic.integer("PINGPONG") ||
                           overlap != heuristic.integer("OVERLAP")))
              continue; // only the promotion takes turns or overlaps
            ParamValues params = heuristic.params;
            params.set("BLOCK_N", block_n);
            params.set("CLUSTER_M", cluster_m);
            params.set("PINGPONG", pingpong);
            params.set("OVERLAP", overlap);
            params.set("A_REGISTERS", block && block_n == 256 ? 1 : 0); // the halves' A
            int fitting = 0; // the deepest STAGES that fits, and the one below it
            for (int stages = 3; stages <= 7; ++stages) {
              params.set("STAGES", stages);
              if (heuristic.tmpl->tuning().fits(heuristic.tmpl->bind(params), "sm_90a").empty())
                fitting = stages;
            }
            for (int stages = std::max(3, fitting - 1); fitting > 0 && stages <= fitting;
                 ++stages) {
              params.set("STAGES", stages);
              candidates.push_back(params);
            }
          }
      precompile(rt, {heuristic.tmpl, {}}, candidates, device.target());
      for (const ParamValues &params : candidates) {
        const ops::detail::ChosenVariant variant{heuristic.tmpl, params};
        const double variant_ms = median_ms_per_launch(device, launches, [&] {
          ops::detail::launch_gemm_fp8_variant(rt, variant, d.as<BFloat16>(), a.as<std::uint8_t>(),
                                               sa.as<float>(), b.as<std::uint8_t>(), sb.as<float>(),
                                               m, n, k);
        });
        if (print_variants)
          std::printf("| gemm_fp8 %s variant %s | %d x %d x %d | %.4f | %.1f TFLOP/s | |\n", form,
                      fp8_name(variant).c_str(), m, n, k, variant_ms, flop / variant_ms * 1e-9);
        if (variant_ms < best_ms) {
          best_ms = variant_ms;
          best = fp8_name(variant);
        }
      }
    }
    std::printf("| gemm_fp8 %s (%s) | %d x %d x %d | %.4f | %.1f TFLOP/s | best variant %s %.1f "
                "TFLOP/s |\n",
                form, fp8_name(heuristic).c_str(), m, n, k, ms, flop / ms * 1e-9, best.c_str(),
                flop / best_ms * 1e-9);
  }

  // A gemm_fp8 variant's tunables, e.g. "BN256 S4 C1 P0 O0 A1 E1".
  static std::string fp8_name(const ops::detail::ChosenVariant &variant) {
    std::string text;
    for (const auto &[key, label] : {std::pair{"BLOCK_N", "BN"},
                                     {"STAGES", " S"},
                                     {"CLUSTER_M", " C"},
                                     {"PINGPONG", " P"},
                                     {"OVERLAP", " O"},
                                     {"A_REGISTERS", " A"},
                                     {"EPILOGUE", " E"}})
      text.append(label).append(std::to_string(variant.integer(key)));
    return text;
  }

  // The block-scaled candidates at m x n x k in interleaved rounds, each timed as fp8_row times
  // the operator (batches of launches) right after its baseline, main's variant of its form (the
  // heuristic's variant with D from registers, EPILOGUE 0, launched without the programmatic
  // dependent launch): the sweeps' long runs heat the device (their figures fall about 15% below
  // the same variant's timed first), so each comparison is between neighbours.
  void fp8_rounds(Fp8Operands &ops, int m, int n, int k) {
    const double flop = 2.0 * m * n * static_cast<double>(k);
    struct Launched {
      ops::detail::ChosenVariant variant;
      bool overlap_previous;
    };
    struct Candidate {
      std::string label;
      Launched baseline, candidate;
    };
    const auto with = [](ops::detail::ChosenVariant variant, int epilogue) {
      variant.params.set("EPILOGUE", epilogue);
      return variant;
    };
    const ops::detail::ChosenVariant block = ops::detail::gemm_fp8_variant(true, false, m, n);
    const ops::detail::ChosenVariant tensor = ops::detail::gemm_fp8_variant(false, false, m, n);
    const Launched block_main{with(block, 0), false}, tensor_main{with(tensor, 0), false};
    const ops::detail::ChosenVariant rows = ops::detail::gemm_fp8_variant(false, true, m, n);
    // The operator's block-scaled variant with the tiles' groups of 16 rows instead of 8.
    ops::detail::ChosenVariant group16 = block;
    group16.params.set("GROUP_M", 16);
    // Per tensor at 192 columns, the widest below 256 that takes EPILOGUE 1 (4 stages).
    ops::detail::ChosenVariant tensor192 = with(tensor, 1);
    tensor192.params.set("BLOCK_N", 192);
    tensor192.params.set("STAGES", 4);
    const std::vector<Candidate> candidates = {
        {"block scales: the operator (" + fp8_name(block) + ", overlapping launch)",
         block_main,
         {block, true}},
        {"block scales EPILOGUE 0, overlapping launch", block_main, {with(block, 0), true}},
        {"block scales EPILOGUE 1, no overlapping launch", block_main, {with(block, 1), false}},
        {"block scales: the operator with GROUP_M 16", block_main, {group16, true}},
        {"per tensor: the operator (" + fp8_name(tensor) + ", overlapping launch)",
         tensor_main,
         {tensor, true}},
        {"per tensor BN192 S4 EPILOGUE 1, overlapping launch", tensor_main, {tensor192, true}},
        {"row-wise: the operator (" + fp8_name(rows) + ", overlapping launch)",
         {with(rows, 0), false},
         {rows, true}}};
    // Batches of 20 ms or more where a launch is short (gemm_fp8_torch.py's count), else of 4.
    const int launches = std::max(4, static_cast<int>(2e12 / flop / 20) + 1);
    const auto time = [&](const Launched &launched) {
      const double ms = median_ms_per_launch(device, launches, [&] {
        ops::detail::launch_gemm_fp8_variant(rt, launched.variant, ops.d.as<BFloat16>(),
                                             ops.a.as<std::uint8_t>(), ops.scale_a.as<float>(),
                                             ops.b.as<std::uint8_t>(), ops.scale_b.as<float>(), m,
                                             n, k, nullptr, launched.overlap_previous);
      });
      return flop / ms * 1e-9;
    };
    for (int round = 1; round <= 3; ++round)
      for (const Candidate &candidate : candidates) {
        const ops::detail::ChosenVariant &variant = candidate.candidate.variant;
        if (const std::string why =
                variant.tmpl->tuning().fits(variant.tmpl->bind(variant.params), "sm_90a");
            !why.empty()) { // e.g. EPILOGUE 1 at a width that is no multiple of 64
          if (round == 1)
            std::printf("| gemm_fp8 %s | %d x %d x %d | not run: %s | | |\n",
                        candidate.label.c_str(), m, n, k, why.c_str());
          continue;
        }
        const double baseline = time(candidate.baseline), tflops = time(candidate.candidate);
        std::printf("| gemm_fp8 round %d %s | %d x %d x %d | %.1f TFLOP/s | main's variant %.1f | "
                    "%.3f |\n",
                    round, candidate.label.c_str(), m, n, k, tflops, baseline, tflops / baseline);
      }
  }

  // --fp8: gemm_fp8 on DeepGEMM's shapes, each form; the sweeps of the block-scaled variants
  // (and at m = 4096 of the per-tensor ones, whose kernel is the block-scaled one without the
  // promotion) with every variant printed.
  void fp8_rows(Fp8Operands &ops, bool print_variants) {
    const int nk[][2] = {{7168, 16384}, {4096, 7168}, {2112, 7168}};
    for (const auto &[n, k] : nk)
      for (int m : {4096, 128, 64}) {
        const bool largest = m == 4096 && n == 7168;
        fp8_row(ops, m, n, k, /*block=*/true, false, print_variants || largest, print_variants);
        fp8_row(ops, m, n, k, /*block=*/false, /*row_wise=*/false,
                largest || (print_variants && m == 4096), print_variants);
        fp8_row(ops, m, n, k, /*block=*/false, /*row_wise=*/true, false);
      }
  }

  // --fp8-forms: every form as a user calls it on DeepGEMM's shapes (row-wise before the
  // per-tensor sweep, whose long run heats the device), and the per-tensor tile widths the
  // heuristic weighs (64 for one row of tiles, 176 and 192 for 2112 columns, 256), each printed.
  void fp8_form_rows(Fp8Operands &ops) {
    const int nk[][2] = {{7168, 16384}, {4096, 7168}, {2112, 7168}};
    for (const auto &[n, k] : nk)
      for (int m : {4096, 128, 64}) {
        fp8_row(ops, m, n, k, /*block=*/true, false, false);
        fp8_row(ops, m, n, k, /*block=*/false, /*row_wise=*/true, false);
        fp8_row(ops, m, n, k, /*block=*/false, /*row_wise=*/false, true, true,
                {64, 128, 176, 192, 256});
      }
  }

  // Buffers of `bytes` to rotate over so that together they are at least 256 MiB.
  static std::size_t rotation(std::size_t bytes) {
    return std::max<std::size_t>(1, (std::size_t{256} << 20) / bytes + 1);
  }

  template <Element T> void rotary_row(int tokens, int q_heads, int kv_heads, int head_size) {
    const int max_position = 8192;
    const std::size_t q_count = static_cast<std::size_t>(tokens) * q_heads * head_size;
    const std::size_t k_count = static_cast<std::size_t>(tokens) * kv_heads * head_size;
    DeviceBuffer q = random_on<T>(device, q_count), k = random_on<T>(device, k_count);
    DeviceBuffer cache = random_on<T>(device, static_cast<std::size_t>(max_position) * head_size);
    std::vector<std::int64_t> host_positions(tokens);
    for (int t = 0; t < tokens; ++t)
      host_positions[t] = t % max_position;
    DeviceBuffer positions = device.allocate(tokens * sizeof(std::int64_t));
    positions.write(host_positions.data(), tokens * sizeof(std::int64_t));
    const double ms = median_ms_per_launch(device, 50, [&] {
      rotary_embedding<T>(rt, positions.as<std::int64_t>(), q.as<T>(), k.as<T>(), cache.as<T>(),
                          max_position, tokens, q_heads, kv_heads, head_size, head_size,
                          RotaryStyle::neox);
    });
    // q and k read and written once; the cache rows and positions read once per token.
    const std::size_t bytes = 2 * (q_count + k_count) * sizeof(T) +
                              static_cast<std::size_t>(tokens) * (head_size * sizeof(T) + 8);
    bandwidth_row("rotary_embedding (NeoX)",
                  std::to_string(tokens) + " tokens, " + std::to_string(q_heads) + "/" +
                      std::to_string(kv_heads) + " heads of " + std::to_string(head_size),
                  std::string(element_name<T>()).c_str(), bytes, ms);
  }

  template <Element T> void quant_row(int rows, int hidden, bool fp8) {
    const std::size_t count = static_cast<std::size_t>(rows) * hidden;
    DeviceBuffer input = random_on<T>(device, count);
    DeviceBuffer out = device.allocate(count), scales = device.allocate(rows * sizeof(float));
    const double ms = median_ms_per_launch(device, 50, [&] {
      if (fp8)
        dynamic_per_token_quant_fp8<T>(rt, out.as<std::uint8_t>(), scales.as<float>(),
                                       input.as<T>(), rows, hidden);
      else
        dynamic_per_token_quant_int8<T>(rt, out.as<std::int8_t>(), scales.as<float>(),
                                        input.as<T>(), rows, hidden);
    });
    const std::size_t bytes = count * (sizeof(T) + 1) + rows * sizeof(float);
    bandwidth_row(fp8 ? "quant fp8 e4m3" : "quant int8",
                  std::to_string(rows) + " x " + std::to_string(hidden),
                  std::string(element_name<T>()).c_str(), bytes, ms);
  }
};

// The rows of A the linear table times: KJIT_BENCH_LINEAR_M's comma-separated list (a sweep of
// one row count takes seconds, of all of them minutes), else 1 to 128 in powers of two.
std::vector<int> linear_rows_asked() {
  const char *asked = std::getenv("KJIT_BENCH_LINEAR_M");
  if (asked == nullptr || *asked == '\0')
    return {1, 2, 4, 8, 16, 32, 64, 128};
  std::vector<int> rows;
  for (const char *p = asked; *p != '\0';) {
    char *end = nullptr;
    const long m = std::strtol(p, &end, 10);
    if (end == p || m < 1 || m > 128)
      throw Error(Errc::bad_argument,
                  std::string("KJIT_BENCH_LINEAR_M: rows from 1 to 128, comma-separated, not ") +
                      asked);
    rows.push_back(static_cast<int>(m));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0')
      throw Error(Errc::bad_argument, std::string("KJIT_BENCH_LINEAR_M: not a list: ") + asked);
  }
  return rows;
}

} // namespace

int main(int argc, char **argv) {
  const bool clusters_only = argc == 2 && std::string(argv[1]) == "--clusters";
  const bool skinny_fp8 = argc == 2 && std::string(argv[1]) == "--skinny-fp8";
  const bool fp8_forms = argc == 2 && std::string(argv[1]) == "--fp8-forms";
  const bool fp8_rounds_skinny = argc == 2 && std::string(argv[1]) == "--fp8-rounds-skinny";
  const bool fp8_rounds =
      fp8_rounds_skinny || (argc == 2 && std::string(argv[1]) == "--fp8-rounds");
  const bool fp8_only = fp8_forms || fp8_rounds || (argc == 2 && std::string(argv[1]) == "--fp8");
  if (argc > 1 && !clusters_only && !skinny_fp8 && !fp8_only) { // tools/gpu-check asks for --help
    std::printf(
        "usage: %s [--clusters | --skinny-fp8 | --fp8 | --fp8-forms | --fp8-rounds | "
        "--fp8-rounds-skinny]\n  prints the "
        "operators' "
        "GEMM TFLOP/s and bandwidth table; --clusters only gemm_wgmma's cluster and epilogue "
        "layouts; --skinny-fp8 only linear() at m = 1..128 against its candidates and gemm_fp8 "
        "on DeepGEMM's shapes; --fp8 only gemm_fp8, every variant of it timed; --fp8-forms "
        "only gemm_fp8's forms and the per-tensor tile widths; --fp8-rounds only the block-scaled "
        "variants in interleaved rounds at DeepGEMM's three 4096-row shapes; --fp8-rounds-skinny "
        "the same at its 64- and 128-row shapes\n",
        argv[0]);
    return 0;
  }
  try {
    Bench bench;
    std::printf("device: %s (%s)\n\n", bench.device.name().c_str(),
                bench.device.target().id().c_str());
    const void *aligned = reinterpret_cast<const void *>(std::uintptr_t{256});
    const bool hopper = ops::detail::gemm_wgmma_serves<BFloat16>(bench.device.target(), aligned,
                                                                 aligned, aligned, 8, 8);
    if (hopper && skinny_fp8) {
      std::printf("| type | K x N | m | linear() us | linear_skinny us | linear_splitk us | "
                  "best linear_splitk us | gemm_wgmma us | best gemm_wgmma us | linear() weights "
                  "GB/s | copy GB/s | linear() of copy |\n| --- | --- | --- | --- | --- | --- | "
                  "--- | --- | --- | --- | --- | --- |\n");
      // The sweeps of linear_splitk's and gemm_wgmma's variants take minutes: only where asked.
      const bool splitk_sweep = std::getenv("KJIT_BENCH_SPLITK_SWEEP") != nullptr;
      const bool wgmma_sweep = std::getenv("KJIT_BENCH_WGMMA_SWEEP") != nullptr;
      const int shapes[][2] = {{4096, 4096}, {8192, 8192}, {14336, 4096}}; // K x N
      const std::vector<int> rows = linear_rows_asked();
      for (const auto &[k, n] : shapes) {
        if (!linear_weight_asked(k, n))
          continue;
        auto bf16 = bench.linear_operands<BFloat16>(128, n, k);
        for (int m : rows)
          bench.linear_candidates_row<BFloat16>(bf16, m, n, k, splitk_sweep && m <= 32,
                                                wgmma_sweep);
      }
      if (std::getenv("KJIT_BENCH_SKINNY_SWEEP") != nullptr) // linear_skinny's variants
        for (int m : {1, 8})
          bench.skinny_sweep<BFloat16>(m, 8192, 8192);
      for (const auto &[k, n] : shapes) {
        if (!linear_weight_asked(k, n))
          continue;
        auto fp16 = bench.linear_operands<Half>(128, n, k);
        for (int m : rows)
          bench.linear_candidates_row<Half>(fp16, m, n, k, /*sweep=*/false, wgmma_sweep);
      }
      if (std::getenv("KJIT_BENCH_LINEAR_ONLY") != nullptr) // the linear table alone
        return 0;
    }
    if (hopper && (skinny_fp8 || fp8_only)) {
      std::printf("\n| op | M x N x K | ms | rate | sweep |\n| --- | --- | --- | --- | --- |\n");
      // Operands for the largest: A 4096 x 16384, B 7168 x 16384, D 4096 x 7168.
      auto fp8 = bench.fp8_operands(std::size_t{4096} * 16384, std::size_t{7168} * 16384,
                                    std::size_t{4096} * 7168, std::size_t{4096} * 128);
      if (fp8_forms) {
        bench.fp8_form_rows(fp8);
        return 0;
      }
      if (fp8_rounds_skinny) {
        for (const auto &[m, n, k] :
             {std::tuple{64, 2112, 7168}, {128, 2112, 7168}, {64, 7168, 16384}, {128, 7168, 16384}})
          bench.fp8_rounds(fp8, m, n, k);
        return 0;
      }
      if (fp8_rounds) {
        for (const auto &[m, n, k] :
             {std::tuple{4096, 7168, 16384}, {4096, 4096, 7168}, {4096, 2112, 7168}})
          bench.fp8_rounds(fp8, m, n, k);
        return 0;
      }
      if (fp8_only)
        bench.fp8_rounds(fp8, 4096, 7168, 16384);
      bench.fp8_rows(fp8, fp8_only);
      return 0;
    }
    if (fp8_only) {
      std::printf("gemm_fp8 needs sm_90a\n");
      return 0;
    }
    if (hopper) {
      std::printf("| layout | shape | type | ms | rate | ratio |\n| --- | --- | --- | --- | --- "
                  "| --- |\n");
      for (int size : {4096, 8192}) {
        bench.cluster_rows<BFloat16>(size);
        bench.cluster_rows<Half>(size);
      }
      std::printf("\n");
    }
    if (clusters_only)
      return 0;
    std::printf("| op | shape | type | ms | GB/s | copy GB/s | of copy |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    bench.rotary_row<Half>(16384, 32, 8, 128);
    bench.rotary_row<BFloat16>(16384, 32, 8, 128);
    bench.rotary_row<float>(16384, 32, 8, 128);
    const bool fp8 = has_fp8_e4m3(bench.device.target());
    for (bool as_fp8 : {false, true}) {
      if (as_fp8 && !fp8)
        continue;
      bench.quant_row<Half>(8192, 8192, as_fp8);
      bench.quant_row<BFloat16>(8192, 8192, as_fp8);
      bench.quant_row<float>(8192, 8192, as_fp8);
    }
    std::printf("\n| op | shape | type | ms | rate |\n| --- | --- | --- | --- | --- |\n");
    for (int size : {4096, 8192}) {
      bench.gemm_row<Half>(size);
      bench.gemm_row<BFloat16>(size);
    }
    bench.gemm_row<Half>(4096, gemm_tiles_for(4096, 4096, 4096));
    if (hopper) {
      std::printf("\n| op | shape | type | ms | rate | bandwidth |\n| --- | --- | --- | --- | --- "
                  "| --- |\n");
      bench.first_call_row<BFloat16>(16, 4104, 4096);
      for (int size : {4096, 8192}) {
        bench.specialised_row<Half>(size, size, size, false);
        bench.specialised_row<BFloat16>(size, size, size, false);
      }
      for (int m : {128, 1024})
        bench.specialised_row<BFloat16>(m, 4096, 4096, true);
      bench.specialised_row<BFloat16>(1024, 6144, 4096, true);
      const int projections[][2] = {{4096, 6144}, {4096, 4096}, {4096, 28672}, {14336, 4096}};
      for (const auto &kn : projections)
        for (int m : {1, 16, 64, 128, 1024, 8192})
          bench.linear_row<BFloat16>(m, kn[1], kn[0]);
      if (std::getenv("KJIT_BENCH_SKINNY_SWEEP") != nullptr) { // minutes of compiles and runs
        std::printf("\n");
        for (const auto &kn : projections)
          for (int m : {1, 16, 64})
            bench.skinny_sweep<BFloat16>(m, kn[1], kn[0]);
      }
    }
  } catch (const kjit::Error &error) {
    std::printf("no result: %s\n", error.summary().c_str());
    return error.code() == kjit::Errc::no_device ? 0 : 1;
  }
  return 0;
}
