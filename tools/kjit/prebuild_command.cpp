#include "prebuild_command.hpp"

#include "exit_status.hpp"
#include "json_output.hpp"
#include "kjit/input_file.hpp"
#include "kjit/kjit.hpp"
#include "kjit/runtime/prebuild.hpp"
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/runtime/worker_pool.hpp"
#include "kjit/templates/sets.hpp"
#include "kjit/text.hpp"
#include "kjit/units.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <set>
#include <sstream>
#include <sys/auxv.h>
#include <thread>
#include <unistd.h>

namespace kjit::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char *kWorkerCommand = "__prebuild-worker";
// What one hiprtc job can take (docs/ARCHITECTURE.md, "Prebuilding"): jobs are bounded by free
// memory as well as cores.
constexpr std::uint64_t kJobMemoryBytes = 1536ull << 20;

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t");
  const auto last = text.find_last_not_of(" \t");
  return first == std::string::npos ? "" : text.substr(first, last - first + 1);
}

// ---- what to build ----------------------------------------------------------------------------

struct Plan {
  int level = 0; // 0: every set given
  std::vector<jit::Target> targets;
  std::vector<templates::VariantSet> user_sets;
  fs::path out;
  std::vector<prebuild::Batch> batches;
  std::size_t variants = 0;
  std::vector<TuningRecord> tuned_records; // --tuned: shipped in the tier beside the variants
};

std::optional<int> parse_level(const std::string &text, const char *source) {
  if (text.empty())
    return std::nullopt;
  if (text == "1" || text == "2" || text == "3")
    return text[0] - '0';
  throw Error(source[0] == '-' ? Errc::bad_usage : Errc::bad_config,
              std::string(source) + " '" + text +
                  "' is not a level: 1 (core), 2 (inference), 3 (minimal)");
}

std::vector<jit::Target> parse_targets(const std::string &list, const char *source) {
  std::vector<jit::Target> targets;
  std::string item;
  std::istringstream in(list);
  while (std::getline(in, item, ';')) {
    item = trim(item);
    if (item.empty())
      continue;
    if (item == "native") {
      for (const Device &device : devices())
        targets.push_back(device.target());
      continue;
    }
    targets.push_back(jit::Target::parse(item));
  }
  if (targets.empty())
    throw Error(Errc::bad_target, std::string(source) + " names no target (e.g. \"gfx90a;sm_90\")");
  std::vector<jit::Target> unique;
  for (jit::Target &target : targets)
    if (std::find(unique.begin(), unique.end(), target) == unique.end())
      unique.push_back(std::move(target));
  return unique;
}

fs::path output_directory(const PrebuildArgs &args) {
  if (!args.out.empty())
    return args.out;
  return Config::from_environment().prebuilt_dir;
}

// Creates the tier and checks it can be written before anything is compiled. A path that cannot
// be a directory is bad input; a directory the system does not let kjit write, an I/O failure.
void check_writable(const fs::path &out) {
  std::error_code error;
  fs::create_directories(out, error);
  if (!error && ::access(out.c_str(), W_OK | X_OK) != 0)
    error = std::error_code(errno, std::generic_category());
  if (!error)
    return;
  const bool bad_path = error == std::errc::not_a_directory || error == std::errc::file_exists ||
                        error == std::errc::filename_too_long ||
                        error == std::errc::no_such_file_or_directory;
  throw Error(bad_path ? Errc::file_io : Errc::cache_io,
              "cannot write the prebuilt tier " + out.string() + ": " + error.message());
}

// --skip-unsupported: the targets the installed compilers can build, each of the others named in a
// warning with the reason (no compiler for its vendor, or one that lacks the target).
std::vector<jit::Target> buildable(std::vector<jit::Target> targets) {
  std::vector<jit::Target> kept;
  for (jit::Target &target : targets) {
    try {
      (void)prebuild::Compilers({target});
      kept.push_back(std::move(target));
    } catch (const Error &error) {
      if (error.code() != Errc::unsupported_target && error.code() != Errc::compiler_unavailable)
        throw;
      std::cerr << "kjit: warning: skipping " << target.id() << ": " << error.summary() << '\n';
    }
  }
  return kept;
}

// Batches `variants` into the plan and names where they go.
Plan finish_plan(Plan plan, std::vector<prebuild::TargetedInstance> variants,
                 const PrebuildArgs &args) {
  if (args.max_batch < 1 || args.max_batch > prebuild::kMaxBatch)
    throw Error(Errc::bad_usage, "--max-batch " + std::to_string(args.max_batch) + ": from 1 to " +
                                     std::to_string(prebuild::kMaxBatch));
  plan.batches = prebuild::make_batches(std::move(variants), args.max_batch);
  for (const auto &batch : plan.batches)
    plan.variants += batch.variants.size();
  plan.out = output_directory(args);
  return plan;
}

// --tuned: exactly the winners of a `kjit tune export` file, each for the target it was tuned on
// (only those --targets names, when given); the records ship in the tier with them.
Plan make_tuned_plan(const PrebuildArgs &args) {
  Plan plan;
  std::vector<jit::Target> wanted;
  if (!args.targets.empty())
    wanted = parse_targets(args.targets, "--targets");
  const std::string text = read_input_file(args.tuned, "--tuned");
  std::vector<prebuild::TargetedInstance> variants;
  for (const TuningRecord &record : parse_tuning_records(text, args.tuned)) {
    const jit::Target target = jit::Target::parse(record.key.device.target);
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), target) == wanted.end())
      continue;
    ParamValues params = record.key.problem;
    params.add(record.winner.params);
    variants.push_back({templates::find(record.key.template_name).bind(params), target});
    plan.tuned_records.push_back(record);
    if (std::find(plan.targets.begin(), plan.targets.end(), target) == plan.targets.end())
      plan.targets.push_back(target);
  }
  if (variants.empty())
    throw Error(Errc::bad_parameter,
                "--tuned " + args.tuned + " holds no records" +
                    (wanted.empty() ? std::string() : " for the targets --targets names"));
  return finish_plan(std::move(plan), std::move(variants), args);
}

Plan make_plan(const PrebuildArgs &args) {
  if (!args.tuned.empty())
    return make_tuned_plan(args);
  Plan plan;
  // PREBUILD_KERNELS is the level of kjit's own install: it chooses among the built-in sets and
  // never filters a library's own (a library's build passes --level where it wants one).
  if (auto level = parse_level(args.level, "--level"))
    plan.level = *level;
  else if (!args.sets.empty())
    plan.level = 0;
  else if (auto from_env = parse_level(prebuild::environment_defaults().level, "PREBUILD_KERNELS"))
    plan.level = *from_env;
  else
    plan.level = 1;

  if (!args.targets.empty())
    plan.targets = parse_targets(args.targets, "--targets");
  else if (const std::string gpu_archs = prebuild::environment_defaults().targets;
           !gpu_archs.empty())
    plan.targets = parse_targets(gpu_archs, "GPU_ARCHS");
  else
    throw Error(Errc::bad_target, "no targets: give --targets \"gfx90a;sm_90\" or set GPU_ARCHS");
  if (args.skip_unsupported)
    plan.targets = buildable(std::move(plan.targets));

  for (const std::string &file : args.sets)
    plan.user_sets.push_back(templates::VariantSet::read_file(file));
  const auto &sets = args.sets.empty() ? templates::builtin_sets() : plan.user_sets;

  const prebuild::Shard shard =
      args.shard.empty() ? prebuild::Shard{} : prebuild::Shard::parse(args.shard);
  std::vector<prebuild::TargetedInstance> variants;
  std::size_t in_every_shard = 0;
  std::string names;
  for (const templates::VariantSet &set : sets) {
    if (plan.level != 0 && set.level() != plan.level)
      continue;
    names += (names.empty() ? "" : ", ") + set.name();
    for (const templates::SetVariant &variant : set.variants()) {
      Instance instance = [&] {
        try {
          return variant.tmpl->bind(variant.params);
        } catch (const Error &error) {
          throw Error(error.code(), set.origin() + ": " + error.summary());
        }
      }();
      for (const jit::Target &target : plan.targets)
        if (variant.for_target(target.vendor(), target.arch()))
          if (prebuild::TargetedInstance each{instance, target};
              ++in_every_shard, shard.holds(each))
            variants.push_back(std::move(each));
    }
  }
  if (in_every_shard == 0 && plan.targets.empty()) // --skip-unsupported left none
    return finish_plan(std::move(plan), {}, args);
  if (in_every_shard == 0)
    throw Error(Errc::bad_usage,
                "level " + std::to_string(plan.level) + " has no variants in " +
                    (args.sets.empty() ? std::string("the built-in sets") : "the sets given"));
  return finish_plan(std::move(plan), std::move(variants), args);
}

// ---- how many jobs ----------------------------------------------------------------------------

std::uint64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> name >> kib >> unit)
    if (name == "MemAvailable:")
      return kib * 1024;
  return 0;
}

int default_jobs() {
  cpu_set_t cpus;
  const int cores = sched_getaffinity(0, sizeof cpus, &cpus) == 0
                        ? CPU_COUNT(&cpus)
                        : static_cast<int>(std::thread::hardware_concurrency());
  const std::uint64_t memory = available_memory();
  const int by_memory = memory == 0 ? cores : static_cast<int>(memory / kJobMemoryBytes);
  return std::max(1, std::min(cores, by_memory));
}

int job_count(const PrebuildArgs &args) {
  if (args.jobs) {
    if (*args.jobs < 1)
      throw Error(Errc::bad_usage, "--jobs " + std::to_string(*args.jobs) + ": at least 1");
    return *args.jobs;
  }
  if (const std::string max_jobs = prebuild::environment_defaults().max_jobs; !max_jobs.empty()) {
    char *end = nullptr;
    const long value = std::strtol(max_jobs.c_str(), &end, 10);
    if (*end != '\0' || value < 1)
      throw Error(Errc::bad_config, "MAX_JOBS='" + max_jobs + "': expected a whole number >= 1");
    return static_cast<int>(value);
  }
  return default_jobs();
}

// ---- progress ---------------------------------------------------------------------------------

class Progress {
public:
  Progress(std::size_t total, bool quiet) : total_(total), bar_(!quiet && ::isatty(2) != 0) {}

  void batch_done(const prebuild::Batch &batch, const prebuild::BatchResult &result) {
    std::lock_guard lock(mutex_);
    done_ += batch.variants.size();
    const prebuild::TargetedInstance &first = batch.variants.front();
    if (bar_) {
      constexpr int width = 30;
      const int filled = static_cast<int>(width * done_ / total_);
      std::cerr << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
                << done_ << "/" << total_ << " variants" << std::flush;
      if (done_ == total_)
        std::cerr << '\n';
    } else {
      std::cerr << "prebuild: " << done_ << "/" << total_ << " " << batch.variants.size() << " "
                << first.instance.source_template().name() << " for " << first.target.id() << " in "
                << static_cast<long>(result.compile_ms) << " ms"
                << (result.failures.empty()
                        ? ""
                        : " (" + std::to_string(result.failures.size()) + " failed)")
                << '\n';
    }
  }

private:
  std::mutex mutex_;
  std::size_t total_;
  std::size_t done_ = 0;
  bool bar_;
};

// ---- running the batches ----------------------------------------------------------------------

using BatchDone = std::function<void(std::size_t, prebuild::BatchResult)>;

json failure_json(const prebuild::Failure &failure) {
  return {{"what", failure.what}, {"template", failure.template_name}, {"log", failure.log}};
}

json result_json(const prebuild::BatchResult &result) {
  json failures = json::array();
  for (const prebuild::Failure &failure : result.failures)
    failures.push_back(failure_json(failure));
  return {{"built", result.built},
          {"bytes", result.bytes},
          {"compile_ms", result.compile_ms},
          {"failures", failures}};
}

prebuild::BatchResult result_of(const json &line) {
  prebuild::BatchResult result{line.at("built").get<std::size_t>(),
                               line.at("bytes").get<std::uint64_t>(),
                               line.at("compile_ms").get<double>(),
                               {}};
  for (const json &failure : line.at("failures"))
    result.failures.push_back({failure.at("what").get<std::string>(),
                               failure.at("template").get<std::string>(),
                               failure.at("log").get<std::string>()});
  return result;
}

// A failure of every variant of `batch` that is not the compiler's (the tier cannot be written,
// the worker died): "<variant>: <why>", no log.
std::vector<prebuild::Failure> all_failed(const prebuild::Batch &batch, const std::string &why) {
  std::vector<prebuild::Failure> failures;
  for (const prebuild::TargetedInstance &variant : batch.variants)
    failures.push_back(
        {variant.describe() + ": " + why, variant.instance.source_template().name(), ""});
  return failures;
}

// Each failure ("<variant>: <error>") on a line of its own, except that those sharing one error
// are one line, with their count and the first of them: a target the compiler cannot build fails
// each of its variants alike, and hundreds of copies of one line hide the one line that matters.
// Then the compiler's log of the first failure of each template (`verbose`: of every failure),
// so that the cause is on screen without a second command.
void report_failures(const std::vector<prebuild::Failure> &failures, bool verbose) {
  std::map<std::string, std::vector<const std::string *>> by_error;
  for (const prebuild::Failure &failure : failures) {
    const std::string &what = failure.what;
    const std::size_t colon = what.find(": ");
    by_error[colon == std::string::npos ? what : what.substr(colon + 2)].push_back(&what);
  }
  for (const auto &[error, alike] : by_error)
    if (alike.size() == 1)
      std::cerr << "  " << *alike.front() << '\n';
    else
      std::cerr << "  " << alike.size() << " variants, the first " << *alike.front() << '\n';
  std::set<std::string> logged;
  for (const prebuild::Failure &failure : failures)
    if (!failure.log.empty() && (verbose || logged.insert(failure.template_name).second))
      std::cerr << "the compiler's log for " << failure.what << ":\n" << failure.log << '\n';
}

prebuild::BatchResult build_or_report(const Plan &plan, const prebuild::Compilers &compilers,
                                      std::size_t index) {
  const prebuild::Batch &batch = plan.batches[index];
  try {
    return prebuild::build(batch, compilers, plan.out);
  } catch (const Error &error) { // the tier cannot be written: every variant failed
    prebuild::BatchResult failed;
    failed.failures = all_failed(batch, error.summary());
    return failed;
  }
}

// One job: the batches one after another, in this process.
void run_here(const Plan &plan, const prebuild::Compilers &compilers,
              const std::vector<std::size_t> &pending, const BatchDone &done) {
  for (std::size_t index : pending)
    done(index, build_or_report(plan, compilers, index));
}

// This program's own file, which workers run: /proc/self/exe where /proc is mounted, else the path
// it was started by (AT_EXECFN; a chroot often lacks /proc).
std::string own_executable() {
  std::error_code error;
  const fs::path resolved = fs::read_symlink("/proc/self/exe", error);
  if (!error)
    return resolved.string();
  const auto *started_as = reinterpret_cast<const char *>(::getauxval(AT_EXECFN));
  return started_as != nullptr ? started_as : "/proc/self/exe";
}

// Worker processes (kjit/runtime/worker_pool.hpp), each `kjit __prebuild-worker <the same plan>`:
// each loads the compiler once and builds batch after batch. A worker that dies fails its batch.
void run_in_processes(const Plan &plan, const WorkerCommand &command,
                      const std::vector<std::size_t> &pending, int jobs, const BatchDone &done) {
  WorkerEvents events;
  events.answered = [&](std::size_t index, const std::string &line) {
    const json answer = json::parse(line, nullptr, false);
    if (answer.is_discarded())
      return false;
    done(index, result_of(answer));
    return true;
  };
  events.lost = [&](std::size_t index, const std::string &how) {
    prebuild::BatchResult failed;
    failed.failures = all_failed(plan.batches[index], "the worker compiling it ended with " + how);
    done(index, failed);
  };
  try {
    run_worker_pool(command, pending, jobs, events);
  } catch (const Error &error) {
    if (error.code() != Errc::process_error)
      throw;
    throw Error(error.code(),
                "prebuild: " + error.summary() + " (--jobs 1 builds in this process instead)");
  }
}

WorkerCommand worker_command(const Plan &plan, const PrebuildArgs &args) {
  std::string targets;
  for (const jit::Target &target : plan.targets)
    targets += (targets.empty() ? "" : ";") + target.id();
  std::vector<std::string> argv = {
      "kjit",  kWorkerCommand,    "--targets",   targets,
      "--out", plan.out.string(), "--max-batch", std::to_string(args.max_batch)};
  if (plan.level != 0)
    argv.insert(argv.end(), {"--level", std::to_string(plan.level)});
  if (!args.shard.empty())
    argv.insert(argv.end(), {"--shard", args.shard});
  for (const std::string &file : args.sets)
    argv.insert(argv.end(), {"--sets", fs::absolute(file).string()});
  if (!args.tuned.empty())
    argv.insert(argv.end(), {"--tuned", fs::absolute(args.tuned).string()});
  return {args.worker.empty() ? own_executable() : args.worker, std::move(argv)};
}

// ---- what one prebuild did ---------------------------------------------------------------------

struct PrebuildReport {
  std::string skipped; // why nothing was planned (PREBUILD_KERNELS=0); nothing else is set then
  std::string out;
  std::vector<std::string> targets;
  int level = 0;
  std::size_t variants = 0;
  std::size_t batches = 0;
  std::size_t to_build = 0;    // the variants that were not up to date
  int jobs = 0;                // 0 when every batch was up to date
  prebuild::BatchResult total; // its failures sorted
  double seconds = 0;
};

// Plans, builds what is not up to date into the tier and finishes it. `quiet`: no progress bar.
PrebuildReport prebuild_tier(const PrebuildArgs &args, bool quiet) {
  if (args.level.empty() && args.sets.empty() && args.tuned.empty() &&
      prebuild::environment_defaults().level == "0") {
    PrebuildReport nothing;
    nothing.skipped = "PREBUILD_KERNELS=0: nothing to prebuild (JIT only)";
    return nothing;
  }
  const auto started = std::chrono::steady_clock::now();
  const Plan plan = make_plan(args);
  const int requested_jobs = job_count(args);
  check_writable(plan.out);
  const prebuild::Compilers compilers(plan.targets);

  std::vector<std::size_t> pending; // handed out in this order
  for (std::size_t i : prebuild::longest_first(plan.batches))
    if (!prebuild::up_to_date(plan.batches[i], compilers, plan.out))
      pending.push_back(i);
  PrebuildReport report;
  report.out = plan.out.string();
  report.level = plan.level;
  report.variants = plan.variants;
  report.batches = plan.batches.size();
  std::vector<Vendor> vendors;
  for (const jit::Target &target : plan.targets) {
    report.targets.push_back(target.id());
    if (std::find(vendors.begin(), vendors.end(), target.vendor()) == vendors.end())
      vendors.push_back(target.vendor());
  }

  for (std::size_t i : pending)
    report.to_build += plan.batches[i].variants.size();
  const int jobs = std::max(1, std::min<int>(requested_jobs, static_cast<int>(pending.size())));
  Progress progress(report.to_build, quiet);
  prebuild::BatchResult &total = report.total;
  std::mutex total_mutex;
  const BatchDone done = [&](std::size_t index, prebuild::BatchResult result) {
    progress.batch_done(plan.batches[index], result);
    std::lock_guard lock(total_mutex);
    total.built += result.built;
    total.bytes += result.bytes;
    total.compile_ms += result.compile_ms;
    for (prebuild::Failure &failure : result.failures)
      total.failures.push_back(std::move(failure));
  };
  if (!pending.empty()) {
    report.jobs = jobs;
    if (jobs > 1)
      run_in_processes(plan, worker_command(plan, args), pending, jobs, done);
    else
      run_here(plan, compilers, pending, done);
  }
  if (!pending.empty() || !plan.tuned_records.empty()) {
    // The records travel with their variants: a process reading this tier launches the winners
    // without tuning or compiling.
    TuningTable(plan.out).import_records(plan.tuned_records);
    prebuild::finish_tier(compilers, vendors, plan.out);
  }
  std::sort(total.failures.begin(), total.failures.end());
  report.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

json to_json(const PrebuildReport &report) {
  if (!report.skipped.empty())
    return {{"variants", 0}, {"built", 0}, {"failed", json::array()}, {"skipped", report.skipped}};
  json failed = json::array(), failures = json::array();
  for (const prebuild::Failure &failure : report.total.failures) {
    failed.push_back(failure.what);
    failures.push_back(failure_json(failure));
  }
  return {{"out", report.out},           {"targets", join(report.targets, ", ")},
          {"level", report.level},       {"variants", report.variants},
          {"batches", report.batches},   {"up_to_date", report.variants - report.to_build},
          {"built", report.total.built}, {"failed", failed},
          {"failures", failures},        {"bytes", report.total.bytes},
          {"jobs", report.jobs},         {"seconds", report.seconds}};
}

void print_summary(const PrebuildReport &report, std::ostream &out) {
  const std::string targets = join(report.targets, ", ");
  if (!report.skipped.empty()) {
    out << report.skipped << '\n';
  } else if (report.targets.empty()) {
    out << "nothing to prebuild: the installed compilers support none of the targets\n";
  } else if (report.jobs == 0) {
    out << "nothing to do: all " << report.variants << " variants for " << targets
        << " are up to date in " << report.out << '\n';
  } else {
    char time[32];
    std::snprintf(time, sizeof time, "%.1f s", report.seconds);
    out << "prebuilt " << report.total.built << " of " << report.to_build << " variants for "
        << targets << " in " << time << " with " << report.jobs << " jobs (" << report.batches
        << " programs; " << report.variants - report.to_build
        << " up to date): " << human_bytes(report.total.bytes) << " in " << report.out << '\n';
  }
}

} // namespace

std::pair<CLI::App *, CLI::App *> add_prebuild_command(CLI::App &app, PrebuildArgs &args,
                                                       bool &as_json) {
  auto *command = app.add_subcommand("prebuild", "compile sets of variants into a prebuilt tier");
  auto *worker = app.add_subcommand(kWorkerCommand, "");
  worker->group(""); // hidden: started by prebuild itself
  for (auto *each : {command, worker}) {
    each->add_option("--targets", args.targets,
                     "\"gfx90a;sm_90\" (default GPU_ARCHS; native: the GPUs found)");
    each->add_option("--level", args.level,
                     "1 core, 2 inference, 3 minimal (default PREBUILD_KERNELS, else 1)");
    each->add_option("--sets", args.sets,
                     "a set file to build instead of the built-in sets (repeatable)");
    each->add_option("--max-batch", args.max_batch,
                     "variants per program at most (default 16; 1 compiles each alone)");
    each->add_option("--shard", args.shard,
                     "K/N: build the K-th of N disjoint shares of the variants (by their "
                     "identity), so that N machines fill one remote tier together");
    each->add_option("--tuned", args.tuned,
                     "a `kjit tune export` file: build exactly its winners and ship its records");
    each->add_flag("--skip-unsupported", args.skip_unsupported,
                   "build for the targets the installed compilers support; warn about the others");
    each->add_option(
        "--out", args.out,
        "the prebuilt tier (default KJIT_PREBUILT_DIR, else <prefix>/share/kjit/prebuilt)");
  }
  command->add_option("--jobs", args.jobs,
                      "parallel compile jobs (default MAX_JOBS, else cores and free memory)");
  command->add_flag("--json", as_json, "print one JSON document instead of a summary");
  command->add_flag("-v,--verbose", args.verbose,
                    "print the compiler's log of every variant that failed (default: the first of "
                    "each template)");
  return {command, worker};
}

int run_prebuild(const PrebuildArgs &args, bool as_json, std::ostream &out) {
  const PrebuildReport report = prebuild_tier(args, /*quiet=*/as_json);
  if (as_json)
    print_json(out, to_json(report));
  else
    print_summary(report, out);
  if (report.total.failures.empty())
    return 0;
  std::cerr << "kjit: " << report.total.failures.size() << " of " << report.to_build
            << " variants not built:\n";
  report_failures(report.total.failures, args.verbose);
  return exit_check_failed;
}

int run_prebuild_worker(const PrebuildArgs &args) {
  const Plan plan = make_plan(args);
  const prebuild::Compilers compilers(plan.targets);
  for (std::string line; std::getline(std::cin, line);) {
    const std::size_t index = std::stoul(line);
    if (index >= plan.batches.size())
      return exit_bad_input;
    std::cout << result_json(build_or_report(plan, compilers, index)).dump() << std::endl;
  }
  return 0;
}

} // namespace kjit::cli
