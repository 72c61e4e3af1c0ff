#pragma once
// A pool of worker processes that take numbered jobs (`kjit prebuild`'s workers, which build the
// batches of runtime/src/prebuild.cpp; docs/ARCHITECTURE.md, "Prebuilding"). Processes, not
// threads: hiprtc 5.2 crashes or returns other code when threads compile at once, and whether
// NVRTC compiles in parallel within one process is not established (bench/rtc_threads.cpp;
// BENCHMARKS.md, "Evidence behind the code's choices"); processes do, for both.
//
// The protocol: a worker reads job numbers, one a line, on its stdin and answers each with one
// line on its stdout; it exits at the end of its stdin. Each worker holds one job at a time, so a
// worker that starts slowly (loading a compiler) costs its own jobs only.
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace kjit {

struct WorkerCommand {
  std::string executable;        // the program file
  std::vector<std::string> argv; // its arguments, argv[0] first
};

struct WorkerEvents {
  // A line the worker holding `job` printed: true when it is the job's answer (the worker then
  // gets the next job), false for a line to skip.
  std::function<bool(std::size_t job, const std::string &line)> answered;
  // The worker holding `job` ended before answering it; `how` is "exit status 3" or
  // "signal 9 (Killed)". Another worker takes its place while jobs remain.
  std::function<void(std::size_t job, const std::string &how)> lost;
};

// Hands `jobs` out in order to at most `workers` processes running `command` and returns when
// every one has ended, each job answered or lost exactly once. The events are called on this
// thread. Ignores SIGPIPE in this process, so that writing to a worker that died fails rather
// than kills it (the worker's end of file reports its job).
// Throws Error(process_error) when a worker cannot be started or its pipes cannot be read.
void run_worker_pool(const WorkerCommand &command, const std::vector<std::size_t> &jobs,
                     int workers, const WorkerEvents &events);

} // namespace kjit
