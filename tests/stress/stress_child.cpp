// The process the stress tests start, many at once: a Runtime asked for one variant of the built-in
// `scale` template by several threads, each of which checks the code object it gets. Prints one
// line, "compiled=N user_hits=N prebuilt_hits=N remote_hits=N valid=N threads=N code=<sha256 of
// the code>", and exits 0 when every thread got a valid code object, 1 otherwise (what failed goes
// to stderr). The KJIT_* variables configure its Runtime (KJIT_REMOTE_STORAGE for the fleet tests).
//
//   kjit_stress_child [--cache DIR] [--prebuilt DIR] --target ID [-p K=V]... [--threads N]
//       [--expect elf|fake] [--ready-fd FD] [--go-fd FD] [--as-uid UID] [--file-size-limit BYTES]
//
// --ready-fd: a byte is written there once the threads wait; --go-fd: they start when it reads
// end of file (the parent closes it for every child at once). --as-uid: drop root for that user
// first (permission tests, which root would bypass). --file-size-limit: RLIMIT_FSIZE, a full disk
// for this process only.
#include "fake_nvrtc.hpp"
#include "kjit/jit/elf.hpp"
#include "kjit/kjit.hpp"
#include "kjit/templates/library.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <grp.h>
#include <iostream>
#include <latch>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct Options {
  kjit::Config config;
  std::string target;
  kjit::ParamValues params;
  int threads = 1;
  std::string expect = "elf";
  int ready_fd = -1;
  int go_fd = -1;
  long as_uid = -1;
  long long file_size_limit = -1;
};

[[noreturn]] void usage(const std::string &problem) {
  std::cerr << "kjit_stress_child: " << problem << "\n";
  std::exit(2);
}

kjit::Value param_value(const std::string &text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit))
    return std::stoi(text);
  return text;
}

Options parse(int argc, char **argv) {
  Options options;
  options.config = kjit::Config::from_environment(); // the KJIT_* variables, then the flags
  options.config.prebuilt_dir = "/nonexistent/kjit-prebuilt";
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc)
      usage(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--cache")
      options.config.cache_dir = value;
    else if (flag == "--prebuilt")
      options.config.prebuilt_dir = value;
    else if (flag == "--target")
      options.target = value;
    else if (flag == "-p" && value.find('=') != std::string::npos)
      options.params.add(value.substr(0, value.find('=')),
                         param_value(value.substr(value.find('=') + 1)));
    else if (flag == "--threads")
      options.threads = std::stoi(value);
    else if (flag == "--expect" && (value == "elf" || value == "fake"))
      options.expect = value;
    else if (flag == "--ready-fd")
      options.ready_fd = std::stoi(value);
    else if (flag == "--go-fd")
      options.go_fd = std::stoi(value);
    else if (flag == "--as-uid")
      options.as_uid = std::stol(value);
    else if (flag == "--file-size-limit")
      options.file_size_limit = std::stoll(value);
    else
      usage("unknown argument " + flag);
  }
  if (options.target.empty())
    usage("--target is required");
  return options;
}

void limit_the_process(const Options &options) {
  if (options.as_uid >= 0) {
    const auto id = static_cast<uid_t>(options.as_uid);
    if (::setgroups(0, nullptr) != 0 || ::setgid(id) != 0 || ::setuid(id) != 0)
      usage("cannot drop to uid " + std::to_string(id));
  }
  if (options.file_size_limit >= 0) {
    std::signal(SIGXFSZ, SIG_IGN); // a write past the limit fails with EFBIG instead of killing
    const rlimit limit{static_cast<rlim_t>(options.file_size_limit),
                       static_cast<rlim_t>(options.file_size_limit)};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0)
      usage("cannot set RLIMIT_FSIZE");
  }
}

// "" when `code` is what the compiler of `options.expect` makes for this kernel, else why not.
std::string problem_with(const kjit::CodeObject &code, const Options &options) {
  const auto bytes = code.code();
  if (options.expect == "fake") {
    const char *size_text = std::getenv(kjit::testing::fake_nvrtc::code_bytes_variable);
    const std::size_t size = size_text ? std::strtoull(size_text, nullptr, 10) : 4096;
    if (bytes.size() != size)
      return "code is " + std::to_string(bytes.size()) + " bytes, expected " + std::to_string(size);
    for (std::size_t i = 0; i < size; ++i)
      if (bytes[i] != kjit::testing::fake_nvrtc::code_byte(i, size))
        return "code differs from the fake compiler's at byte " + std::to_string(i);
    return {};
  }
  const std::optional<kjit::jit::ElfSummary> elf = kjit::jit::read_elf(bytes);
  if (!elf)
    return "code is not an ELF64 image";
  const auto machine = code.target().vendor() == kjit::Vendor::nvidia
                           ? kjit::jit::elf_machine_cuda
                           : kjit::jit::elf_machine_amdgpu;
  if (elf->machine != machine)
    return "ELF machine " + std::to_string(elf->machine) + ", expected " + std::to_string(machine);
  if (std::find(elf->symbols.begin(), elf->symbols.end(), code.lowered_name()) ==
      elf->symbols.end())
    return "the ELF has no symbol " + code.lowered_name();
  return {};
}

} // namespace

int main(int argc, char **argv) {
  const Options options = parse(argc, argv);
  limit_the_process(options);
  try {
    kjit::Runtime rt(options.config);
    const kjit::Template &scale = kjit::templates::find("scale");
    const kjit::jit::Target target = kjit::jit::Target::parse(options.target);

    std::latch go(1);
    std::atomic<int> valid{0};
    std::vector<const kjit::CodeObject *> got(static_cast<std::size_t>(options.threads));
    std::vector<std::thread> threads;
    for (int t = 0; t < options.threads; ++t)
      threads.emplace_back([&, t] {
        go.wait();
        try {
          const kjit::CodeObject &code = rt.compile(scale, options.params, target);
          got[static_cast<std::size_t>(t)] = &code;
          if (std::string problem = problem_with(code, options); !problem.empty())
            std::cerr << "thread " << t << ": " << problem << "\n";
          else
            ++valid;
        } catch (const std::exception &error) {
          std::cerr << "thread " << t << ": " << error.what() << "\n";
        }
      });
    const char ready = 'r';
    if (options.ready_fd >= 0 && ::write(options.ready_fd, &ready, 1) != 1)
      usage("cannot write to --ready-fd");
    char byte;
    while (options.go_fd >= 0 && ::read(options.go_fd, &byte, 1) > 0) {
    }
    go.count_down();
    for (std::thread &thread : threads)
      thread.join();

    const kjit::Runtime::Counters counters = rt.counters();
    const std::string code =
        got[0] ? kjit::cache::sha256_hex(
                     {reinterpret_cast<const char *>(got[0]->code().data()), got[0]->code().size()})
               : "none";
    std::cout << "compiled=" << counters.compiled << " user_hits=" << counters.user_cache_hits
              << " prebuilt_hits=" << counters.prebuilt_hits
              << " remote_hits=" << counters.remote_hits << " valid=" << valid
              << " threads=" << options.threads << " code=" << code << std::endl;
    return valid == options.threads ? 0 : 1;
  } catch (const std::exception &error) {
    std::cerr << "kjit_stress_child: " << error.what() << "\n";
    return 1;
  }
}
