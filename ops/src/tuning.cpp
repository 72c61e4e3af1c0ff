#include "kjit/ops/tuning.hpp"

#include "kjit/error.hpp"
#include "launch.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

namespace kjit::ops {

namespace {

// What a shape is tuned as: the template, its problem parameters and the extents the table keys.
struct Tunable {
  const Template *tmpl;
  ParamValues problem;
  ParamValues extents;
  std::size_t element_bytes;
  TunedOutput::Element element;
};

Tunable describe(const OperatorShape &shape) {
  const auto &ops = tunable_operators();
  if (std::find(ops.begin(), ops.end(), shape.op) == ops.end())
    throw Error(Errc::bad_parameter, "cannot tune '" + shape.op +
                                         "': the tunable operators are rms_norm, softmax, "
                                         "silu_and_mul");
  Tunable tunable;
  if (shape.type == "float")
    tunable.element_bytes = 4, tunable.element = TunedOutput::Element::f32;
  else if (shape.type == "half")
    tunable.element_bytes = 2, tunable.element = TunedOutput::Element::f16;
  else if (shape.type == "bfloat16")
    tunable.element_bytes = 2, tunable.element = TunedOutput::Element::bf16;
  else
    throw Error(Errc::bad_parameter,
                shape.op + ": type '" + shape.type + "' is not float, half or bfloat16");
  const int max_length = shape.op == "silu_and_mul" ? (1 << 24) : detail::max_row_length;
  if (shape.rows < 1 || shape.length < 1 || shape.length > max_length)
    throw Error(Errc::bad_parameter, shape.op + ": rows " + std::to_string(shape.rows) +
                                         " and length " + std::to_string(shape.length) +
                                         ": rows >= 1, length in [1, " +
                                         std::to_string(max_length) + "]");
  const std::int64_t rows = detail::rows_bucket(shape.rows);
  if (shape.op == "silu_and_mul") {
    tunable.tmpl = &templates::find("gated_activation");
    tunable.problem = {{"ACT", "silu"}, {"T", shape.type}};
    tunable.extents = {{"d", shape.length}, {"rows", rows}};
  } else {
    tunable.tmpl = &templates::find(shape.op);
    tunable.problem = {{"T", shape.type},
                       {shape.op == "softmax" ? "COLS" : "HIDDEN", shape.length}};
    tunable.extents = {{"rows", rows}};
  }
  return tunable;
}

// A device buffer of `elements` random values in [-2, 2) of the shape's type.
DeviceBuffer random_buffer(const Device &device, std::size_t elements, const Tunable &tunable,
                           std::mt19937 &random) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<std::byte> bytes(elements * tunable.element_bytes);
  for (std::size_t i = 0; i < elements; ++i) {
    const float value = uniform(random);
    std::byte *at = bytes.data() + i * tunable.element_bytes;
    if (tunable.element == TunedOutput::Element::f32) {
      std::memcpy(at, &value, 4);
    } else {
      const std::uint16_t bits = tunable.element == TunedOutput::Element::bf16
                                     ? from_double<BFloat16>(value).bits
                                     : from_double<Half>(value).bits;
      std::memcpy(at, &bits, 2);
    }
  }
  DeviceBuffer buffer = device.allocate(bytes.size());
  buffer.write(bytes.data(), bytes.size());
  return buffer;
}

// What the wrapper picks for the shape at 16-byte-aligned pointers (ops/src/launch.hpp), as
// tunable values in the order the search space lists them.
TimedVariant heuristic_variant(const OperatorShape &shape, const Tunable &tunable, int warp) {
  int aligned = static_cast<int>(16 / tunable.element_bytes);
  while (shape.length % aligned != 0)
    aligned /= 2;
  if (shape.op == "silu_and_mul")
    return {{{"VEC", aligned}}, 0};
  const detail::RowShape row = detail::row_shape(aligned, shape.length, warp);
  return {{{"VEC", row.vec}, {"THREADS", row.threads}}, 0};
}

} // namespace

const std::vector<std::string> &tunable_operators() {
  static const std::vector<std::string> ops = {"rms_norm", "softmax", "silu_and_mul"};
  return ops;
}

void check_tuning(const OperatorShape &shape, const TuneOptions &options) {
  const Tunable tunable = describe(shape);
  check_tune_options({tunable.tmpl, tunable.problem}, options);
}

TuningKey operator_tuning_key(Runtime &rt, const OperatorShape &shape) {
  const Tunable tunable = describe(shape);
  const Device &device = rt.default_device();
  return TuningKey::of(*tunable.tmpl, tunable.problem, tunable.extents,
                       {device.target().id(), device.multiprocessors(), device.name()},
                       rt.compiler_identity(device.vendor()));
}

OperatorTuning tune_operator(Runtime &rt, const TuningTable &table, const OperatorShape &shape,
                             TuneOptions options) {
  const Tunable tunable = describe(shape);
  const TuningKey key = operator_tuning_key(rt, shape);
  const Device &device = rt.default_device();
  OperatorTuning outcome{{}, false, std::nullopt, {}};
  outcome.record = table.find_or_tune(key, [&] {
    std::mt19937 random(std::random_device{}());
    const std::size_t rows = static_cast<std::size_t>(shape.rows);
    const std::size_t length = static_cast<std::size_t>(shape.length);
    const bool gated = shape.op == "silu_and_mul";
    DeviceBuffer x = random_buffer(device, rows * length * (gated ? 2 : 1), tunable, random);
    DeviceBuffer weight = random_buffer(device, length, tunable, random);
    DeviceBuffer out = device.allocate(rows * length * tunable.element_bytes);
    const int warp = device.target().warp_size();
    Launcher launch = [&](const Kernel &kernel, const ParamValues &candidate, Stream stream) {
      const int vec = static_cast<int>(candidate.get("VEC").integer());
      if (gated) {
        detail::launch_gated(kernel, vec, out.data(), x.data(), tunable.element_bytes, shape.rows,
                             shape.length, stream);
        return;
      }
      const int threads = static_cast<int>(candidate.get("THREADS").integer());
      const int per_block = threads <= warp ? std::max(1, 256 / threads) : 1;
      const Dim3 grid(static_cast<unsigned>((shape.rows + per_block - 1) / per_block));
      const Dim3 block(static_cast<unsigned>(threads), static_cast<unsigned>(per_block));
      if (shape.op == "rms_norm")
        kernel.launch({.grid = grid, .block = block, .stream = stream}, out.data(), x.data(),
                      weight.data(), 1e-6f, shape.rows);
      else
        kernel.launch({.grid = grid, .block = block, .stream = stream}, out.data(), x.data(), 1.0f,
                      shape.rows, 0);
    };
    if (gated && options.space.empty()) {
      // The gated kernel's vectors must divide d.
      std::vector<Value> widths;
      for (int vec : {1, 2, 4, 8})
        if (shape.length % vec == 0)
          widths.emplace_back(vec);
      options.space = {{"VEC", widths}};
    }
    const TuningProblem problem{tunable.tmpl, tunable.problem};
    precompile(rt, problem,
               tuning_candidates(problem, options.space, device.target().id()).accepted,
               device.target());
    const Measure measure =
        measure_on_device(rt, device, *tunable.tmpl, launch,
                          {TunedOutput{out.data(), rows * length, tunable.element}});
    TuneResult result = tune(problem, options, device.target().id(), measure);
    outcome.tuned = true;
    outcome.heuristic = heuristic_variant(shape, tunable, warp);
    for (const TimedVariant &timed : result.timed)
      if (timed.params == outcome.heuristic.params)
        outcome.heuristic.time_us = timed.time_us;
    TuningRecord record{key, result.winner, result.runners_up,
                        std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()};
    outcome.result = std::move(result);
    return record;
  });
  return outcome;
}

} // namespace kjit::ops
