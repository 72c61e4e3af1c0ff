// The first-call path's costs (issue: kjit core, "Measured"):
//   - an in-memory hit from parameters;
//   - a disk hit in a fresh Runtime, from call to code object in hand, for a ~50 KB entry;
//   - a cold compile, against the vendor compiler called directly on the same input;
//   - compile time per variant alone and sixteen to a program (issue 13), the same way.
// Each kjit figure has its baseline measured in the same run. The AMD target is
// KJIT_BENCH_AMD_TARGET (default gfx90a: ROCm 6 and 7 run it with gfx942, which 5.2 lacks).
#include "bench/median.hpp"
#include "bench/raw_compilers.hpp"
#include "kjit/kjit.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "runtime/src/variant.hpp"

#include <algorithm>
#include <benchmark/benchmark.h>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <random>
#include <unistd.h>

namespace kjit::bench {
namespace {

// The built-in scale template: x[i] *= a for i < N.
const Template &scale = templates::find("scale");

// Unrolled transcendental math: a code object of about 50 KB, the size the disk-hit bar names.
const Template large("large", R"(template <typename T, int UNROLL>
__global__ void large(T *x, int n) {
  float acc = 0.f;
#pragma unroll
  for (int k = 0; k < UNROLL; ++k)
    acc = acc * 0.999f + sinf(kjit::to_float(x[(threadIdx.x + k * 37) % n]) * (k + 1));
  x[threadIdx.x % n] = kjit::from_float<T>(acc);
})",
                     {{"T", ParamSchema::type({"float", "half"})},
                      {"UNROLL", ParamSchema::integer(1, 4096)}});

// UNROLL chosen per vendor so that both entries come out near 50 KB.
ParamValues large_params(const jit::Target &target) {
  return {{"T", "float"}, {"UNROLL", target.vendor() == Vendor::amd ? 46 : 30}};
}

// A cache directory for one benchmark, removed after.
class ScratchCache {
public:
  ScratchCache() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() / ("kjit-bench-" + std::to_string(random()));
  }
  ~ScratchCache() { std::filesystem::remove_all(path_); }
  Config config() const {
    Config config;
    config.cache_dir = path_;
    config.prebuilt_dir = path_ / "none";
    return config;
  }

private:
  std::filesystem::path path_;
};

jit::Target target_of(const benchmark::State &state) {
  const char *amd = std::getenv("KJIT_BENCH_AMD_TARGET");
  return jit::Target::parse(state.range(0) != 0 ? "sm_90" : amd != nullptr ? amd : "gfx90a");
}

bool compiler_missing(benchmark::State &state, Runtime &rt, const jit::Target &target) {
  try {
    rt.compiler(target.vendor());
    return false;
  } catch (const Error &error) {
    state.SkipWithError(error.summary().c_str());
    return true;
  }
}

void BM_MemoryHit(benchmark::State &state) {
  ScratchCache cache;
  Runtime rt(cache.config());
  const auto target = target_of(state);
  if (compiler_missing(state, rt, target))
    return;
  const ParamValues params = {{"T", "half"}, {"N", 4096}};
  rt.compile(scale, params, target);
  for (auto _ : state)
    benchmark::DoNotOptimize(&rt.compile(scale, params, target));
}

// The same, building the parameter list from literals on every call as most callers will.
void BM_MemoryHitBuildingParams(benchmark::State &state) {
  ScratchCache cache;
  Runtime rt(cache.config());
  const auto target = target_of(state);
  if (compiler_missing(state, rt, target))
    return;
  rt.compile(scale, {{"T", "half"}, {"N", 4096}}, target);
  for (auto _ : state)
    benchmark::DoNotOptimize(&rt.compile(scale, {{"T", "half"}, {"N", 4096}}, target));
}

// From the call on a fresh Runtime to the code object in hand: read, verify (checksum, key,
// target, owner), copy out. The Runtime's construction is timed too, its end is not.
void BM_DiskHitFreshRuntime(benchmark::State &state) {
  ScratchCache cache;
  const auto target = target_of(state);
  std::filesystem::path entry;
  {
    Runtime rt(cache.config());
    if (compiler_missing(state, rt, target))
      return;
    entry = rt.compile(large, large_params(target), target).entry_path();
  }
  for (auto _ : state) {
    std::optional<Runtime> rt(std::in_place, cache.config());
    const CodeObject &object = rt->compile(large, large_params(target), target);
    if (object.origin() != Origin::user_cache)
      state.SkipWithError("not a disk hit");
    benchmark::DoNotOptimize(object.code().data());
    // Not timed: ending a Runtime records its statistics, which is not part of a lookup.
    state.PauseTiming();
    rt.reset();
    state.ResumeTiming();
  }
  state.counters["entry_bytes"] = static_cast<double>(std::filesystem::file_size(entry));
}

// Baseline for the disk hit: open, read and close the same entry file, verifying nothing.
void BM_DiskReadRawFile(benchmark::State &state) {
  ScratchCache cache;
  const auto target = target_of(state);
  Runtime rt(cache.config());
  if (compiler_missing(state, rt, target))
    return;
  const auto entry = rt.compile(large, large_params(target), target).entry_path();
  std::vector<char> buffer(std::filesystem::file_size(entry));
  for (auto _ : state) {
    const int fd = ::open(entry.c_str(), O_RDONLY | O_CLOEXEC);
    benchmark::DoNotOptimize(::read(fd, buffer.data(), buffer.size()));
    ::close(fd);
  }
  state.counters["entry_bytes"] = static_cast<double>(buffer.size());
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Times the raw compiler and kjit once each, alternating which goes first from one call to the
// next so that neither always inherits the other's warm caches. False, with the benchmark told
// why, when either throws.
template <typename TimeRaw, typename TimeKjit>
bool time_both(benchmark::State &state, bool &raw_first, TimeRaw &time_raw, TimeKjit &time_kjit) {
  try {
    if (raw_first) {
      time_raw();
      time_kjit();
    } else {
      time_kjit();
      time_raw();
    }
  } catch (const std::exception &error) {
    state.SkipWithError(error.what());
    return false;
  }
  raw_first = !raw_first;
  return true;
}

// A cold compile through kjit (a variant missing from the cache: lookup, lock, compile, publish
// a new entry) against the vendor compiler called directly on the same translation unit,
// alternating the two (and which goes first) so that drift on the machine affects both alike.
// Each iteration asks for a new N, so kjit writes a new entry as a real miss does (KJIT_REBUILD
// would replace one entry again and again, and freeing the replaced file's blocks is not part
// of a first compile). Two views of kjit's overhead, both over the median raw compile:
//   overhead_pct  the median of the paired differences (kjit - raw) of each iteration;
//   own_pct       the time kjit spends outside the vendor compiler's call within the same call
//                 (key, lock, entry encoding and publication), which compile noise cannot hide.
void BM_ColdCompileOverhead(benchmark::State &state) {
  ScratchCache cache;
  const auto target = target_of(state);
  Runtime rt(cache.config());
  if (compiler_missing(state, rt, target))
    return;
  const CompilerIdentity identity = CompilerIdentity::of(rt.compiler(target.vendor()));
  ParamValues params;
  std::optional<jit::CompileRequest> request; // the variant of this iteration
  std::vector<double> raw_ms, kjit_ms, own_ms;
  auto time_raw = [&] {
    const auto start = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(raw_compile(*request).data());
    raw_ms.push_back(ms_since(start));
  };
  auto time_kjit = [&] {
    const auto start = std::chrono::steady_clock::now();
    Runtime fresh(cache.config());
    const CodeObject &object = fresh.compile(scale, params, target);
    benchmark::DoNotOptimize(object.code().data());
    kjit_ms.push_back(ms_since(start));
    own_ms.push_back(kjit_ms.back() - object.compile_ms());
    if (object.origin() != Origin::compiled)
      throw std::runtime_error("not a cold compile");
  };
  bool raw_first = true;
  for (auto _ : state) {
    params = {{"T", "half"}, {"N", 4096 + static_cast<int>(raw_ms.size())}};
    request.emplace(describe_variant(scale.bind(params), target, identity).request);
    if (!time_both(state, raw_first, time_raw, time_kjit))
      return;
    state.SetIterationTime(kjit_ms.back() / 1000.0);
  }
  std::vector<double> differences(raw_ms.size());
  for (std::size_t i = 0; i < raw_ms.size(); ++i)
    differences[i] = kjit_ms[i] - raw_ms[i];
  const double raw = median(raw_ms);
  state.counters["raw_ms"] = raw;
  state.counters["kjit_ms"] = median(kjit_ms);
  state.counters["overhead_pct"] = 100.0 * median(differences) / raw;
  state.counters["own_ms"] = median(own_ms);
  state.counters["own_pct"] = 100.0 * median(own_ms) / raw;
}

// Compile time per variant, alone and `range(1)` to a program, as `kjit prebuild` builds them
// (prebuild::build: one program per batch, then an entry per variant written to a tier) against the
// vendor compiler called directly on the same programs, alternating which goes first. Every
// iteration takes fresh variants, 16 in programs of 16, 4 alone: range(2) 0, the toy scale<half,
// N> for new N; 1, an operator, fused_add_rms_norm in bfloat16 for new HIDDEN, as the core set
// holds it. The counters are per variant, the fastest iteration's (the machine is shared: the
// minimum is the least disturbed), and kjit's over the direct call's.
Instance fresh_variant(bool operator_kernel, int n) {
  if (!operator_kernel)
    return scale.bind({{"T", "half"}, {"N", n}});
  return templates::find("fused_add_rms_norm")
      .bind({{"T", "bfloat16"}, {"HIDDEN", 8 * n}, {"VEC", 8}, {"THREADS", 256}});
}

void BM_VariantsPerProgram(benchmark::State &state) {
  ScratchCache tier;
  const auto target = target_of(state);
  const std::size_t per_program = static_cast<std::size_t>(state.range(1));
  const std::size_t variants = per_program == 1 ? 4 : per_program;
  std::optional<prebuild::Compilers> compilers;
  try {
    compilers.emplace(std::vector{target});
  } catch (const Error &error) {
    state.SkipWithError(error.summary().c_str());
    return;
  }
  const CompilerIdentity identity = CompilerIdentity::of(compilers->of(target.vendor()));
  double kjit_best = 1e300, raw_best = 1e300;
  int next_n = 512;
  bool raw_first = true;
  for (auto _ : state) {
    std::vector<prebuild::TargetedInstance> fresh;
    for (std::size_t i = 0; i < variants; ++i)
      fresh.push_back({fresh_variant(state.range(2) == 1, next_n++), target});
    const std::vector<prebuild::Batch> batches = prebuild::make_batches(fresh, per_program);
    auto time_kjit = [&] {
      const auto start = std::chrono::steady_clock::now();
      for (const prebuild::Batch &batch : batches)
        if (prebuild::build(batch, *compilers, tier.config().cache_dir).built !=
            batch.variants.size())
          throw std::runtime_error("a variant did not build");
      kjit_best = std::min(kjit_best, ms_since(start) / variants);
    };
    auto time_raw = [&] {
      const auto start = std::chrono::steady_clock::now();
      for (const prebuild::Batch &batch : batches) {
        jit::CompileRequest request =
            describe_variant(batch.variants.front().instance, target, identity).request;
        request.name_expressions.clear();
        for (const prebuild::TargetedInstance &variant : batch.variants)
          request.name_expressions.push_back(
              describe_variant(variant.instance, target, identity).request.name_expressions[0]);
        benchmark::DoNotOptimize(raw_compile(request).data());
      }
      raw_best = std::min(raw_best, ms_since(start) / variants);
    };
    if (!time_both(state, raw_first, time_raw, time_kjit))
      return;
    state.SetIterationTime(kjit_best / 1000.0);
  }
  state.SetLabel(target.id() + ", " + compilers->of(target.vendor()).identity());
  state.counters["kjit_ms_per_variant"] = kjit_best;
  state.counters["raw_ms_per_variant"] = raw_best;
  state.counters["kjit_over_raw"] = kjit_best / raw_best;
}

// range(0): 0 = the AMD target (KJIT_BENCH_AMD_TARGET, gfx90a) through hiprtc, 1 = sm_90 through
// NVRTC.
BENCHMARK(BM_MemoryHit)->ArgName("nvidia")->Arg(0)->Arg(1);
BENCHMARK(BM_MemoryHitBuildingParams)->ArgName("nvidia")->Arg(0)->Arg(1);
BENCHMARK(BM_DiskHitFreshRuntime)->ArgName("nvidia")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DiskReadRawFile)->ArgName("nvidia")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ColdCompileOverhead)
    ->ArgName("nvidia")
    ->Arg(0)
    ->Arg(1)
    ->Iterations(60)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VariantsPerProgram)
    ->ArgNames({"nvidia", "per_program", "operator"})
    ->ArgsProduct({{0, 1}, {1, 16}, {0, 1}})
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

} // namespace
} // namespace kjit::bench

BENCHMARK_MAIN();
