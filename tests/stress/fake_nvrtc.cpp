// The fake NVRTC of fake_nvrtc.hpp: the calls kjit makes, with NVRTC's signatures.
#include "fake_nvrtc.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

namespace fake = kjit::testing::fake_nvrtc;

struct Program {
  std::vector<std::string> expressions;
  std::vector<std::string> lowered; // "fake_<expression>", same order
  std::size_t code_bytes = 0;
};

std::size_t variable(const char *name, std::size_t fallback) {
  const char *value = std::getenv(name);
  return value == nullptr || *value == '\0' ? fallback : std::strtoull(value, nullptr, 10);
}

void report(char progress) {
  if (const char *fd = std::getenv(fake::progress_fd_variable); fd != nullptr)
    (void)!::write(std::atoi(fd), &progress, 1);
}

void sleep_us(std::size_t microseconds) {
  struct timespec left {
    static_cast<time_t>(microseconds / 1000000), static_cast<long>(microseconds % 1000000) * 1000
  };
  while (::nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

} // namespace

extern "C" {

const char *nvrtcGetErrorString(int status) { return status == 0 ? "NVRTC_SUCCESS" : "fake error"; }

int nvrtcVersion(int *major, int *minor) {
  *major = 99;
  *minor = 0;
  return 0;
}

int nvrtcGetNumSupportedArchs(int *count) {
  *count = 1;
  return 0;
}

int nvrtcGetSupportedArchs(int *archs) {
  archs[0] = 90;
  return 0;
}

int nvrtcCreateProgram(Program **program, const char *, const char *, int, const char *const *,
                       const char *const *) {
  *program = new Program;
  return 0;
}

int nvrtcDestroyProgram(Program **program) {
  delete *program;
  *program = nullptr;
  return 0;
}

int nvrtcAddNameExpression(Program *program, const char *expression) {
  program->expressions.emplace_back(expression);
  return 0;
}

int nvrtcCompileProgram(Program *program, int, const char *const *) {
  report(fake::compile_started);
  sleep_us(variable(fake::compile_us_variable, 0));
  for (const std::string &expression : program->expressions)
    program->lowered.push_back("fake_" + expression);
  program->code_bytes = variable(fake::code_bytes_variable, 4096);
  return 0;
}

int nvrtcGetProgramLogSize(Program *, std::size_t *size) {
  *size = 1; // the terminating NUL of an empty log
  return 0;
}

int nvrtcGetProgramLog(Program *, char *log) {
  *log = '\0';
  return 0;
}

int nvrtcGetCUBINSize(Program *program, std::size_t *size) {
  *size = program->code_bytes;
  return 0;
}

int nvrtcGetCUBIN(Program *program, char *code) {
  for (std::size_t i = 0; i < program->code_bytes; ++i)
    code[i] = static_cast<char>(fake::code_byte(i, program->code_bytes));
  report(fake::code_handed_over);
  return 0;
}

int nvrtcGetLoweredName(Program *program, const char *expression, const char **lowered) {
  for (std::size_t i = 0; i < program->expressions.size(); ++i)
    if (program->expressions[i] == expression && i < program->lowered.size()) {
      *lowered = program->lowered[i].c_str();
      return 0;
    }
  return 1;
}

} // extern "C"
