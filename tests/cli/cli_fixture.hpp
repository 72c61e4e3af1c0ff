#pragma once
// Runs the `kjit` command line as a script would, for the CLI tests.
#include "tests/support/temp_dir.hpp"

#include <cstdio>
#include <fstream>
#include <gtest/gtest.h>
#include <string>
#include <sys/wait.h>

namespace kjit {

using testing::TempDir;

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

class CliTest : public ::testing::Test {
protected:
  // Runs `kjit <args>` with its own cache directory (`cache` under the test's directory); stdout
  // and stderr are kept apart. `environment`: more VARIABLE=value assignments for the command.
  CliRun kjit(const std::string &args, const std::string &environment = "",
              const std::string &cache = "cache") const {
    const auto err_file = dir / "stderr";
    const std::string command = environment + " KJIT_CACHE_DIR='" + (dir / cache).string() + "' '" +
                                program + "' " + args + " 2>'" + err_file.string() + "'";
    CliRun run;
    FILE *pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      run.out.append(buffer, n);
    const int raw = ::pclose(pipe);
    run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    std::ifstream err(err_file);
    run.err.assign(std::istreambuf_iterator<char>(err), {});
    return run;
  }
  // The kjit binary kjit() runs: the build's, unless a test runs a copy (one that another user
  // can reach where the build tree cannot be).
  std::string program = KJIT_CLI;
  bool hiprtc_available() const {
    return kjit("targets --json").out.find("\"compiler\": \"hiprtc\"") != std::string::npos;
  }
  std::string write_source(const std::string &name, const std::string &text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  void expect_bad_input(const std::string &args, const std::string &fragment) const {
    const CliRun run = kjit(args);
    EXPECT_EQ(run.status, 2) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(fragment), std::string::npos) << args << "\nstderr: " << run.err;
    EXPECT_EQ(run.err.rfind("kjit: ", 0), 0u) << run.err;
  }

  TempDir dir;
};

} // namespace kjit
