#include "tune_command.hpp"

#include "json_output.hpp"
#include "kjit/input_file.hpp"
#include "kjit/kjit.hpp"
#include "kjit/ops/tuning.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "table.hpp"
#include "tune_sets.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

namespace kjit::cli {
namespace {

using nlohmann::json;

// Every combination the shapes file lists, for `op`.
std::vector<ops::OperatorShape> read_shapes(const std::string &op, const std::string &path) {
  const json file = json::parse(read_input_file(path, "shapes file"), nullptr, false);
  auto list = [&](const char *field) {
    if (file.is_discarded() || !file.is_object() || !file.contains(field) ||
        !file.at(field).is_array() || file.at(field).empty())
      throw Error(Errc::bad_parameter,
                  path +
                      ": expected {\"types\": [...], \"rows\": [...], \"lengths\": [...]}, "
                      "each a non-empty list; \"" +
                      field + "\" is missing or empty");
    return file.at(field);
  };
  std::vector<ops::OperatorShape> shapes;
  try {
    for (const json &type : list("types"))
      for (const json &rows : list("rows"))
        for (const json &length : list("lengths"))
          shapes.push_back({op, type.get<std::string>(), rows.get<int>(), length.get<int>()});
  } catch (const json::exception &error) {
    throw Error(Errc::bad_parameter, path + ": " + error.what());
  }
  return shapes;
}

// "[#####.....] 12/24 candidates of rms_norm bfloat16 4096x4096 (3/20)" on a terminal.
class ProgressBar {
public:
  explicit ProgressBar(bool quiet) : on_(!quiet && ::isatty(2) != 0) {}
  void show(const std::string &what, std::size_t done, std::size_t total) const {
    if (!on_ || total == 0)
      return;
    constexpr std::size_t width = 24;
    const std::size_t filled = width * done / total;
    std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
              << done << "/" << total << " candidates of " << what << "\x1b[K" << std::flush;
  }
  void finish() const {
    if (on_)
      std::cerr << "\r\x1b[K" << std::flush;
  }

private:
  bool on_;
};

json record_summary(const TuningRecord &record) {
  return json::parse(tuning_records_json({record})).at("records").at(0);
}

// What `kjit tune OP` did for one shape.
struct TunedShape {
  ops::OperatorShape shape;
  ops::OperatorTuning outcome;
};

// Each shape's record: the table's, or tuned on the Runtime's GPU now.
std::vector<TunedShape> tune_each(const TuneArgs &args, bool quiet) {
  const auto &known = ops::tunable_operators();
  if (std::find(known.begin(), known.end(), args.op) == known.end())
    throw Error(Errc::bad_parameter, "cannot tune '" + args.op +
                                         "': the tunable operators are rms_norm, softmax, "
                                         "silu_and_mul");
  const std::vector<ops::OperatorShape> shapes = read_shapes(args.op, args.shapes);
  TuneOptions checked;
  checked.budget_s = args.budget_s;
  checked.space = read_space(args.space);
  for (const ops::OperatorShape &shape : shapes)
    ops::check_tuning(shape, checked);
  Runtime rt;
  require_device(rt);
  const TuningTable table = TuningTable::from_config(rt.config());
  const ProgressBar bar(quiet);
  std::vector<TunedShape> tuned;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const ops::OperatorShape &shape = shapes[i];
    const std::string what = shape.op + " " + shape.type + " " + std::to_string(shape.rows) + "x" +
                             std::to_string(shape.length) + " (" + std::to_string(i + 1) + "/" +
                             std::to_string(shapes.size()) + ")";
    TuneOptions options = checked;
    options.progress = [&](std::size_t done, std::size_t total) { bar.show(what, done, total); };
    tuned.push_back({shape, ops::tune_operator(rt, table, shape, options)});
    bar.finish();
  }
  return tuned;
}

// How long the tuning took; 0 when the table had the record.
double seconds_of(const ops::OperatorTuning &outcome) {
  return outcome.result ? outcome.result->seconds : 0.0;
}

std::size_t dropped_count(const ops::OperatorTuning &outcome) {
  return outcome.result ? outcome.result->dropped.size() : 0;
}

json to_json(const std::vector<TunedShape> &tuned) {
  json results = json::array();
  for (const auto &[shape, outcome] : tuned) {
    json dropped = json::array();
    if (outcome.result)
      for (const auto &[params, why] : outcome.result->dropped)
        dropped.push_back({{"params", params.to_string()}, {"reason", why}});
    json item = record_summary(outcome.record);
    item["tuned_now"] = outcome.tuned;
    item["seconds"] = seconds_of(outcome);
    item["dropped"] = dropped;
    item["rows"] = shape.rows;
    item["heuristic"] = {{"params", outcome.heuristic.params.to_string()},
                         {"time_us", outcome.heuristic.time_us}};
    results.push_back(item);
  }
  return {{"results", results}};
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

void print_table(const std::vector<TunedShape> &tuned, std::ostream &out) {
  Table listing(
      {"shape", "winner", "time (us)", "heuristic", "time (us)", "tuned", "seconds", "dropped"});
  for (const auto &[shape, outcome] : tuned)
    listing.add({shape.op + " " + shape.type + " " + std::to_string(shape.rows) + "x" +
                     std::to_string(shape.length),
                 outcome.record.winner.params.to_string(), fixed(outcome.record.winner.time_us, 2),
                 outcome.heuristic.params.to_string(), fixed(outcome.heuristic.time_us, 2),
                 outcome.tuned ? "now" : "table", fixed(seconds_of(outcome), 1),
                 std::to_string(dropped_count(outcome))});
  listing.print(out);
}

} // namespace

int tune_shapes(const TuneArgs &args, bool as_json, std::ostream &out) {
  const std::vector<TunedShape> tuned = tune_each(args, /*quiet=*/as_json);
  if (as_json)
    print_json(out, to_json(tuned));
  else
    print_table(tuned, out);
  return 0;
}

namespace {

std::vector<TuningRecord> matching(const TuningTable &table, const std::string &prefix) {
  std::vector<TuningRecord> found;
  for (TuningRecord &record : table.list())
    if (record.key.key().hex().starts_with(prefix))
      found.push_back(std::move(record));
  return found;
}

// `tune ls` as a table (its JSON is the table's export format, tuning_records_json).
void print_table(const std::vector<TuningRecord> &records, std::ostream &out) {
  Table listing({"key", "template", "problem", "extents", "target", "units", "winner", "us"});
  for (const TuningRecord &record : records) {
    char time[32];
    std::snprintf(time, sizeof time, "%.2f", record.winner.time_us);
    listing.add({record.key.key().hex().substr(0, 12), record.key.template_name,
                 record.key.problem.to_string(), record.key.extents.to_string(),
                 record.key.device.target, std::to_string(record.key.device.compute_units),
                 record.winner.params.to_string(), time});
  }
  listing.print(out);
}

// What `tune export` wrote or `tune import` added.
struct TableTransfer {
  bool exported = false; // else imported
  std::size_t records = 0;
  std::string file;
};

TableTransfer export_table(const TuningTable &table, const TuneArgs &args) {
  const std::vector<TuningRecord> records = table.list();
  std::ofstream out(args.file, std::ios::binary | std::ios::trunc);
  out << (args.csv ? tuning_csv(records) : tuning_records_json(records));
  out.close(); // what is still buffered is written here: a full disk fails here, not later
  if (!out)
    throw Error(Errc::cache_io, "cannot write " + args.file + ": " + std::strerror(errno));
  return {true, records.size(), args.file};
}

TableTransfer import_table(const TuningTable &table, const TuneArgs &args) {
  const std::size_t count = table.import_records(
      parse_tuning_records(read_input_file(args.file, "tuning table"), args.file));
  return {false, count, args.file};
}

json to_json(const TableTransfer &done) {
  return {{done.exported ? "exported" : "imported", done.records}, {"file", done.file}};
}

void print_table(const TableTransfer &done, std::ostream &out) {
  out << (done.exported ? "exported " : "imported ") << done.records << " tuning records "
      << (done.exported ? "to " : "from ") << done.file << '\n';
}

} // namespace

// --space NAME=V1,V2 as a search space: integers where they parse whole, type names otherwise.
SearchSpace read_space(const std::vector<std::string> &items) {
  SearchSpace space;
  for (const std::string &item : items) {
    const std::size_t equals = item.find('=');
    if (equals == 0 || equals == std::string::npos || equals + 1 == item.size())
      throw Error(Errc::bad_usage, "--space " + item + ": expected NAME=V1,V2,...");
    std::vector<Value> values;
    std::stringstream list(item.substr(equals + 1));
    for (std::string text; std::getline(list, text, ',');) {
      if (text.empty())
        throw Error(Errc::bad_usage, "--space " + item + ": an empty value");
      std::int64_t integer = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), integer);
      values.push_back(error == std::errc() && end == text.data() + text.size() ? Value(integer)
                                                                                : Value(text));
    }
    space.emplace_back(item.substr(0, equals), std::move(values));
  }
  return space;
}

void require_device(Runtime &rt) {
  try {
    rt.default_device();
  } catch (const Error &error) {
    if (error.code() != Errc::no_device)
      throw;
    throw Error(Errc::no_device, "cannot tune: " + error.summary());
  }
}

CLI::App *add_tune_command(CLI::App &app, TuneArgs &args, bool &as_json) {
  auto *tune = app.add_subcommand("tune", "tune the operators on this GPU; manage the table");
  tune->add_option("op", args.op, "rms_norm, softmax or silu_and_mul; with --sets, a template");
  tune->add_option("--sets", args.sets,
                   "a set file: tune its template named instead of an operator (--shapes then "
                   "lists problems, rows and the launch: README, \"Tuning\")");
  tune->add_option("--shapes", args.shapes,
                   "JSON: {\"types\": [...], \"rows\": [...], \"lengths\": [...]}");
  tune->add_option("--budget", args.budget_s, "seconds of measuring per shape (default 60)");
  tune->add_option("--space", args.space,
                   "NAME=V1,V2,...: the values of a tunable parameter to try (repeatable; "
                   "default: every value each allows)");
  auto *ls = tune->add_subcommand("ls", "the records of the tuning table");
  auto *show = tune->add_subcommand("show", "one record in full");
  show->add_option("key", args.key_prefix, "a prefix of the record's key")->required();
  auto *exported = tune->add_subcommand("export", "write the table (JSON, or CSV for people)");
  exported->add_option("file", args.file, "where to write it")->required();
  exported->add_flag("--csv", args.csv, "one row per record");
  auto *imported = tune->add_subcommand("import", "add the records of an exported table");
  imported->add_option("file", args.file, "a file `kjit tune export` wrote")->required();
  for (auto *command : {tune, ls, show, exported, imported})
    command->add_flag("--json", as_json, "print one JSON document instead of a table");
  return tune;
}

int run_tune(const CLI::App &tune, const TuneArgs &args, bool as_json) {
  const TuningTable table = TuningTable::from_config(Config::from_environment());
  if (tune.got_subcommand("ls")) {
    const std::vector<TuningRecord> records = table.list();
    if (as_json)
      std::cout << tuning_records_json(records);
    else
      print_table(records, std::cout);
    return 0;
  }
  if (tune.got_subcommand("show")) {
    const std::vector<TuningRecord> found = matching(table, args.key_prefix);
    if (found.size() != 1)
      throw Error(Errc::bad_parameter, "'" + args.key_prefix + "' names " +
                                           std::to_string(found.size()) +
                                           " tuning records; give a prefix that names one");
    std::cout << found.front().to_json(); // JSON either way: a record is a document
    return 0;
  }
  if (tune.got_subcommand("export") || tune.got_subcommand("import")) {
    const TableTransfer done =
        tune.got_subcommand("export") ? export_table(table, args) : import_table(table, args);
    if (as_json)
      print_json(to_json(done));
    else
      print_table(done, std::cout);
    return 0;
  }
  if (!args.sets.empty() && !args.op.empty())
    return tune_set_template(args, as_json);
  if (args.op.empty() || args.shapes.empty())
    throw Error(Errc::bad_parameter,
                "kjit tune needs an operator and --shapes FILE, or ls, show, export, import");
  return tune_shapes(args, as_json, std::cout);
}

} // namespace kjit::cli
