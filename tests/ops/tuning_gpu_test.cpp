// Tuning on the GPU: two operators tuned end to end and then launched by their wrappers with the
// winner (checked against the reference), a template variant that writes garbage dropped, and a
// second Runtime (as a second process would) finding the record instead of tuning.
#include "kjit/ops/tuning.hpp"
#include "kjit/runtime/tuner.hpp"
#include "tests/ops/gpu_support.hpp"
#include "tests/support/log_capture.hpp"

#include <random>

namespace kjit::ops::gpu_testing {
namespace {

class TuningGpu : public OpsGpuTest {
protected:
  TuningTable table() { return TuningTable::from_config(runtime().config()); }
  std::mt19937 rng{std::random_device{}()};
};

TEST_F(TuningGpu, TunesRmsNormAndTheWrapperLaunchesTheWinner) {
  const OperatorShape shape{"rms_norm", "bfloat16", 64, 4096};
  const OperatorTuning tuned = tune_operator(runtime(), table(), shape);
  ASSERT_TRUE(tuned.tuned);
  ASSERT_TRUE(tuned.result);
  EXPECT_GT(tuned.result->timed.size(), 1u);
  EXPECT_GT(tuned.record.winner.time_us, 0);
  std::printf("[ TUNED    ] rms_norm bf16 64x4096: winner %s %.2f us, heuristic %.2f us, %zu "
              "candidates, %zu dropped, %.1f s\n",
              tuned.record.winner.params.to_string().c_str(), tuned.record.winner.time_us,
              tuned.heuristic.time_us, tuned.result->tried, tuned.result->dropped.size(),
              tuned.result->seconds);

  // A second Runtime on the same cache finds the record: nothing is tuned again.
  Runtime second(runtime().config());
  const OperatorTuning again = tune_operator(second, table(), shape);
  EXPECT_FALSE(again.tuned);
  EXPECT_EQ(again.record, tuned.record);

  // The wrapper reads the record for this shape and its result is still right.
  const std::size_t count = 64 * 4096;
  const auto x = random_elements<BFloat16>(count, rng, -2.0, 2.0);
  const auto w = random_elements<BFloat16>(4096, rng, -2.0, 2.0);
  DeviceBuffer dx = upload(x), dw = upload(w);
  DeviceBuffer out = poisoned<BFloat16>(count);
  rms_norm(second, out.as<BFloat16>(), dx.as<BFloat16>(), dw.as<BFloat16>(), 1e-6f, 64, 4096);
  const auto expected = reference::rms_norm(to_doubles(x), to_doubles(w), 1e-6, 64, 4096);
  EXPECT_TRUE(
      all_close(download<BFloat16>(out, count), expected, 0x1p-24, epsilon<BFloat16>() + 0x1p-16));
}

TEST_F(TuningGpu, TunesSiluAndMulAndTheWrapperLaunchesTheWinner) {
  const OperatorShape shape{"silu_and_mul", "bfloat16", 64, 1000};
  const OperatorTuning tuned = tune_operator(runtime(), table(), shape);
  ASSERT_TRUE(tuned.tuned);
  EXPECT_EQ(tuned.result->tried, 4u); // VEC 1, 2, 4, 8 divide 1000
  const std::size_t count = 64 * 1000;
  const auto x = random_elements<BFloat16>(2 * count, rng, -2.0, 2.0);
  DeviceBuffer dx = upload(x);
  DeviceBuffer out = poisoned<BFloat16>(count);
  silu_and_mul(runtime(), out.as<BFloat16>(), dx.as<BFloat16>(), 64, 1000);
  const auto expected = reference::gated(reference::silu, to_doubles(x), 64, 1000);
  EXPECT_TRUE(
      all_close(download<BFloat16>(out, count), expected, 0x1p-24, epsilon<BFloat16>() + 0x1p-12));
}

// A record planted in the table whose winner rms_norm does not take (VEC=3) is ignored with one
// warning: the wrapper launches its heuristic instead of throwing, and the result is right.
TEST_F(TuningGpu, AWinnerTheTemplateDoesNotTakeIsIgnoredForTheHeuristic) {
  const Template &tmpl = templates::find("rms_norm");
  const TuningKey key =
      TuningKey::of(tmpl, {{"T", "bfloat16"}, {"HIDDEN", 4096}}, {{"rows", 64}},
                    {device().target().id(), device().multiprocessors(), device().name()},
                    runtime().compiler_identity(device().vendor()));
  table().store({key, {{{"THREADS", 256}, {"VEC", 3}}, 1.0}, {}, 0});
  const std::size_t count = 64 * 4096;
  const auto x = random_elements<BFloat16>(count, rng, -2.0, 2.0);
  const auto w = random_elements<BFloat16>(4096, rng, -2.0, 2.0);
  DeviceBuffer dx = upload(x), dw = upload(w);
  DeviceBuffer out = poisoned<BFloat16>(count);
  const kjit::testing::LogCapture log;
  rms_norm(runtime(), out.as<BFloat16>(), dx.as<BFloat16>(), dw.as<BFloat16>(), 1e-6f, 64, 4096);
  EXPECT_EQ(log.warnings(), 1) << log.text();
  EXPECT_NE(log.text().find("VEC = 3 is not allowed"), std::string::npos) << log.text();
  const auto expected = reference::rms_norm(to_doubles(x), to_doubles(w), 1e-6, 64, 4096);
  EXPECT_TRUE(
      all_close(download<BFloat16>(out, count), expected, 0x1p-24, epsilon<BFloat16>() + 0x1p-16));
}

// A template whose variant MODE=1 writes garbage (its input plus one), MODE=2 fails to compile.
const Template copy_or_garbage("copy_or_garbage", R"(
template <int MODE, int THREADS>
__global__ void copy_or_garbage(float *out, const float *x, int n) {
  static_assert(MODE != 2, "MODE 2 does not compile");
  const int i = blockIdx.x * THREADS + threadIdx.x;
  if (i < n) out[i] = MODE == 0 ? x[i] : x[i] + 1.0f;
})",
                               {{"MODE", ParamSchema::one_of({0, 1, 2}).tunable()},
                                {"THREADS", ParamSchema::one_of({128, 256}).tunable()}},
                               {.arguments = {"float*", "const float*", "int"}});

TEST_F(TuningGpu, DropsAVariantThatWritesGarbageOrDoesNotCompile) {
  const int n = 1 << 20;
  const auto x = random_elements<float>(n, rng, -2.0, 2.0);
  DeviceBuffer dx = upload(x);
  DeviceBuffer out = device().allocate(n * sizeof(float));
  const Launcher launch = [&](const Kernel &kernel, const ParamValues &candidate, Stream stream) {
    const int threads = static_cast<int>(candidate.get("THREADS").integer());
    kernel.launch(
        {.grid = Dim3((n + threads - 1) / threads), .block = Dim3(threads), .stream = stream},
        out.as<float>(), dx.as<float>(), n);
  };
  const Measure measure = measure_on_device(
      runtime(), device(), copy_or_garbage, launch,
      {TunedOutput{out.data(), static_cast<std::size_t>(n), TunedOutput::Element::f32}});
  const TuneResult result = tune({&copy_or_garbage, {}}, {}, device().target().id(), measure);
  EXPECT_EQ(result.winner.params.get("MODE").integer(), 0);
  EXPECT_EQ(result.timed.size(), 2u); // MODE 0 at both thread counts
  int garbage = 0, uncompiled = 0;
  for (const auto &[params, why] : result.dropped) {
    garbage += params.get("MODE").integer() == 1 && why.find("differs") != std::string::npos;
    uncompiled += params.get("MODE").integer() == 2;
  }
  EXPECT_EQ(garbage, 2);
  EXPECT_EQ(uncompiled, 2);
}

} // namespace
} // namespace kjit::ops::gpu_testing
