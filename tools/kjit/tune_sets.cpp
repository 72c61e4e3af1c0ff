#include "tune_sets.hpp"

#include "kjit/input_file.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/element.hpp"
#include "kjit/runtime/tuner.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/sets.hpp"
#include "table.hpp"

#include <chrono>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

namespace kjit::cli {
namespace {

using nlohmann::json;

// A size: factors joined by '*' (product) or '/' (ceiling quotient), left to right; each an
// integer, "rows" or an integer parameter's name.
struct Size {
  std::string text;

  // Throws Error(bad_parameter) naming `where` for a factor that is none of those.
  void check(const Template &tmpl, const std::string &where) const {
    for (const std::string &factor : factors())
      if (!is_number(factor) && factor != "rows" &&
          (tmpl.param(factor) == nullptr ||
           tmpl.param(factor)->param.kind() != ParamSchema::Kind::integer))
        throw Error(Errc::bad_parameter, where + ": '" + factor +
                                             "' is no integer, \"rows\" or integer parameter of " +
                                             tmpl.name());
  }
  std::int64_t value(const ParamValues &params, std::int64_t rows) const {
    std::int64_t result = 0;
    char op = '*';
    std::size_t at = 0;
    for (const std::string &factor : factors()) {
      const std::int64_t n = is_number(factor)  ? std::stoll(factor)
                             : factor == "rows" ? rows
                                                : params.get(factor).integer();
      result = at++ == 0   ? n
               : op == '*' ? result * n
                           : (result + n - 1) / std::max<std::int64_t>(n, 1);
      op = next_op(at);
    }
    return result;
  }

private:
  static bool is_number(const std::string &text) {
    return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
           text.size() < 18;
  }
  std::vector<std::string> factors() const {
    std::vector<std::string> found(1);
    for (char c : text)
      if (c == '*' || c == '/')
        found.emplace_back();
      else if (c != ' ')
        found.back() += c;
    return found;
  }
  char next_op(std::size_t index) const { // the operator after factor `index - 1`
    std::size_t seen = 0;
    for (char c : text)
      if ((c == '*' || c == '/') && ++seen == index)
        return c;
    return '*';
  }
};

struct Argument {
  enum class Kind { input, output, number, size } kind;
  Size size;         // input, output, size
  double number = 0; // number
};

struct Shapes {
  std::vector<ParamValues> problems;
  std::vector<std::int64_t> rows;
  Size grid, block;
  std::vector<Argument> arguments;
};

Size size_at(const json &value, const std::string &where) {
  if (value.is_number_unsigned())
    return {std::to_string(value.get<std::uint64_t>())};
  if (value.is_string())
    return {value.get<std::string>()};
  throw Error(Errc::bad_parameter, where + ": expected a size (an integer or a product)");
}

Shapes read_shapes(const Template &tmpl, const std::string &path) {
  const json file = json::parse(read_input_file(path, "shapes file"), nullptr, false);
  auto field = [&](const json &object, const char *name, json::value_t type) -> const json & {
    if (!object.is_object() || !object.contains(name) || object.at(name).type() != type)
      throw Error(Errc::bad_parameter, path + ": \"" + name + "\" is missing or of another type" +
                                           " (see kjit tune --help: --sets)");
    return object.at(name);
  };
  Shapes shapes;
  for (const json &problem : field(file, "problems", json::value_t::array)) {
    if (!problem.is_object())
      throw Error(Errc::bad_parameter, path + ": each of \"problems\" is an object of parameters");
    ParamValues values;
    for (const auto &[name, value] : problem.items()) {
      if (!value.is_string() && !value.is_number_integer())
        throw Error(Errc::bad_parameter,
                    path + ": problem parameter " + name + " must be a type name or an integer");
      values.add(name, value.is_string() ? Value(value.get<std::string>())
                                         : Value(value.get<std::int64_t>()));
    }
    shapes.problems.push_back(std::move(values));
  }
  for (const json &rows : field(file, "rows", json::value_t::array)) {
    if (!rows.is_number_unsigned() || rows.get<std::uint64_t>() == 0)
      throw Error(Errc::bad_parameter, path + ": \"rows\" must list positive integers");
    shapes.rows.push_back(rows.get<std::int64_t>());
  }
  if (shapes.problems.empty() || shapes.rows.empty())
    throw Error(Errc::bad_parameter, path + ": \"problems\" and \"rows\" must not be empty");
  const json &launch = field(file, "launch", json::value_t::object);
  shapes.grid = size_at(launch.value("grid", json()), path + ": launch grid");
  shapes.block = size_at(launch.value("block", json()), path + ": launch block");
  shapes.grid.check(tmpl, path + ": launch grid");
  shapes.block.check(tmpl, path + ": launch block");
  const json &arguments = field(launch, "arguments", json::value_t::array);
  if (arguments.size() != tmpl.arguments().size())
    throw Error(Errc::bad_parameter, path + ": launch gives " + std::to_string(arguments.size()) +
                                         " arguments, " + tmpl.name() + " declares " +
                                         std::to_string(tmpl.arguments().size()) +
                                         " (the set's \"arguments\")");
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    const json &item = arguments[i];
    const std::string where = path + ": launch argument " + std::to_string(i + 1);
    const bool pointer = tmpl.arguments()[i].find('*') != std::string::npos;
    Argument argument{Argument::Kind::number, {}, 0};
    if (item.is_object() && item.size() == 1 &&
        (item.contains("input") || item.contains("output"))) {
      argument.kind = item.contains("input") ? Argument::Kind::input : Argument::Kind::output;
      argument.size = size_at(item.begin().value(), where);
    } else if (item.is_number() && !pointer) {
      argument.number = item.get<double>();
    } else if (item.is_string() && !pointer) {
      argument.kind = Argument::Kind::size;
      argument.size = {item.get<std::string>()};
    } else {
      throw Error(Errc::bad_parameter,
                  where + " (" + tmpl.arguments()[i] + "): expected " +
                      (pointer ? "{\"input\": SIZE} or {\"output\": SIZE}" : "a number or a size"));
    }
    if (argument.kind != Argument::Kind::number)
      argument.size.check(tmpl, where);
    if (pointer ==
        (argument.kind == Argument::Kind::number || argument.kind == Argument::Kind::size))
      throw Error(Errc::bad_parameter, where + " (" + tmpl.arguments()[i] +
                                           "): a pointer takes a buffer, a scalar a value");
    shapes.arguments.push_back(std::move(argument));
  }
  if (std::none_of(shapes.arguments.begin(), shapes.arguments.end(),
                   [](const Argument &a) { return a.kind == Argument::Kind::output; }))
    throw Error(Errc::bad_parameter, path + ": launch has no {\"output\": SIZE} to compare");
  return shapes;
}

TunedOutput::Element element_of(const ParamValues &problem, const std::string &where) {
  const Value *type = problem.find("T");
  if (type != nullptr && type->is_type()) {
    if (type->type() == "float")
      return TunedOutput::Element::f32;
    if (type->type() == "half")
      return TunedOutput::Element::f16;
    if (type->type() == "bfloat16")
      return TunedOutput::Element::bf16;
  }
  throw Error(Errc::bad_parameter,
              where + ": buffers are of the problem's T, which must be float, half or bfloat16");
}

DeviceBuffer random_buffer(const Device &device, std::size_t elements, TunedOutput::Element element,
                           std::mt19937 &random) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  const std::size_t width = element == TunedOutput::Element::f32 ? 4 : 2;
  std::vector<std::byte> bytes(elements * width);
  for (std::size_t i = 0; i < elements; ++i) {
    const float value = uniform(random);
    if (element == TunedOutput::Element::f32) {
      std::memcpy(bytes.data() + i * 4, &value, 4);
      continue;
    }
    const std::uint16_t bits = element == TunedOutput::Element::bf16
                                   ? ops::from_double<ops::BFloat16>(value).bits
                                   : ops::from_double<ops::Half>(value).bits;
    std::memcpy(bytes.data() + i * 2, &bits, 2);
  }
  DeviceBuffer buffer = device.allocate(std::max<std::size_t>(bytes.size(), 1));
  buffer.write(bytes.data(), bytes.size());
  return buffer;
}

// Tunes one problem over one row count: buffers made once, every candidate launched on them.
TuningRecord tune_one(Runtime &rt, const TuningTable &table, const Template &tmpl,
                      const Shapes &shapes, const ParamValues &problem, std::int64_t rows,
                      const TuneOptions &options) {
  const Device &device = rt.default_device();
  const TuningKey key =
      TuningKey::of(tmpl, problem, {{"rows", rows}},
                    {device.target().id(), device.multiprocessors(), device.name()},
                    rt.compiler_identity(device.vendor()));
  return table.find_or_tune(key, [&] {
    const TunedOutput::Element element = element_of(problem, "--shapes");
    const std::size_t width = element == TunedOutput::Element::f32 ? 4 : 2;
    std::mt19937 random(std::random_device{}());
    // Sizes may name tunable parameters: buffers are made for the largest any candidate asks.
    const TuningProblem tuning{&tmpl, problem};
    const std::vector<ParamValues> candidates =
        tuning_candidates(tuning, options.space, device.target().id()).accepted;
    std::vector<DeviceBuffer> buffers;
    std::vector<TunedOutput> outputs;
    for (const Argument &argument : shapes.arguments) {
      if (argument.kind != Argument::Kind::input && argument.kind != Argument::Kind::output)
        continue;
      std::int64_t elements = 0;
      for (const ParamValues &candidate : candidates) {
        ParamValues all = problem;
        all.add(candidate);
        elements = std::max(elements, argument.size.value(tmpl.bind(all).values(), rows));
      }
      buffers.push_back(argument.kind == Argument::Kind::input
                            ? random_buffer(device, std::size_t(elements), element, random)
                            : device.allocate(std::size_t(elements) * width));
      if (argument.kind == Argument::Kind::output)
        outputs.push_back({buffers.back().data(), std::size_t(elements), element});
    }
    // The tuner launches with every parameter: the problem's and the candidate's tunable ones.
    Launcher launch = [&](const Kernel &kernel, const ParamValues &params, Stream stream) {
      const ParamValues values = tmpl.bind(params).values();
      // One slot of 8 bytes per argument, each written at the size the kernel takes.
      std::vector<std::uint64_t> slots(shapes.arguments.size());
      std::vector<void *> packed;
      std::size_t buffer = 0;
      for (std::size_t i = 0; i < shapes.arguments.size(); ++i) {
        const Argument &argument = shapes.arguments[i];
        const KernelParameter &parameter = kernel.signature().parameters()[i];
        void *slot = &slots[i];
        if (argument.kind == Argument::Kind::input || argument.kind == Argument::Kind::output) {
          void *address = buffers[buffer++].data();
          std::memcpy(slot, &address, sizeof address);
        } else if (argument.kind == Argument::Kind::number && parameter.type == "float") {
          const float value = float(argument.number);
          std::memcpy(slot, &value, 4);
        } else if (argument.kind == Argument::Kind::number && parameter.type == "double") {
          std::memcpy(slot, &argument.number, 8);
        } else {
          const std::int64_t value = argument.kind == Argument::Kind::size
                                         ? argument.size.value(values, rows)
                                         : std::int64_t(argument.number);
          std::memcpy(slot, &value, std::min<std::size_t>(parameter.size, 8)); // little-endian
        }
        packed.push_back(slot);
      }
      packed.push_back(nullptr);
      kernel.launch_packed({.grid = Dim3(unsigned(shapes.grid.value(values, rows))),
                            .block = Dim3(unsigned(shapes.block.value(values, rows))),
                            .stream = stream},
                           packed.data());
    };
    precompile(rt, tuning, candidates, device.target());
    const Measure measure = measure_on_device(rt, device, tmpl, launch, outputs);
    TuneResult result = tune(tuning, options, device.target().id(), measure);
    return TuningRecord{key, result.winner, result.runners_up,
                        std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count()};
  });
}

} // namespace

int tune_set_template(const TuneArgs &args, bool as_json) {
  const templates::VariantSet set = templates::VariantSet::read_file(args.sets);
  const Template *tmpl = nullptr;
  std::string declared;
  for (const Template *own : set.templates()) {
    declared += (declared.empty() ? "" : ", ") + own->name();
    if (own->name() == args.op)
      tmpl = own;
  }
  if (tmpl == nullptr)
    throw Error(Errc::bad_parameter,
                args.sets + " declares no template '" + args.op +
                    "' (its templates: " + (declared.empty() ? "none" : declared) + ")");
  if (std::none_of(tmpl->params().begin(), tmpl->params().end(),
                   [](const ParamDecl &decl) { return decl.param.is_tunable(); }))
    throw Error(Errc::bad_parameter, "template " + tmpl->name() + " in " + args.sets +
                                         " has no tunable parameter (a \"tunable\" list there)");
  if (args.shapes.empty())
    throw Error(Errc::bad_parameter, "kjit tune --sets needs --shapes FILE");
  const Shapes shapes = read_shapes(*tmpl, args.shapes);
  TuneOptions options;
  options.budget_s = args.budget_s;
  options.space = read_space(args.space);
  for (const ParamValues &problem : shapes.problems) {
    element_of(problem, args.shapes);
    check_tune_options({tmpl, problem}, options);
  }
  Runtime rt;
  require_device(rt);
  const TuningTable table = TuningTable::from_config(rt.config());
  json results = json::array();
  Table listing({"problem", "rows", "winner", "time (us)"});
  for (const ParamValues &problem : shapes.problems)
    for (std::int64_t rows : shapes.rows) {
      const TuningRecord record = tune_one(rt, table, *tmpl, shapes, problem, rows, options);
      results.push_back(json::parse(record.to_json()));
      char time[32];
      std::snprintf(time, sizeof time, "%.2f", record.winner.time_us);
      listing.add(
          {problem.to_string(), std::to_string(rows), record.winner.params.to_string(), time});
    }
  if (as_json)
    std::cout << json{{"results", results}}.dump(2) << '\n';
  else
    listing.print(std::cout);
  return 0;
}

} // namespace kjit::cli
