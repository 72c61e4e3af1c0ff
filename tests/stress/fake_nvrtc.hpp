#pragma once
// A stand-in for libnvrtc.so.13 (fake_nvrtc.cpp), found through LD_LIBRARY_PATH by a child process
// of the stress tests: kjit loads it as it loads NVRTC, so the Runtime, the lock and publication
// are kjit's real code while a "compile" costs what the test chooses. Its identity is "nvrtc 99.0",
// so its entries never share a key with the real compiler's.
#include <cstddef>

namespace kjit::testing::fake_nvrtc {

// Environment variables the fake reads when it compiles.
inline constexpr const char *compile_us_variable = "KJIT_FAKE_NVRTC_COMPILE_US"; // default 0
inline constexpr const char *code_bytes_variable = "KJIT_FAKE_NVRTC_CODE_BYTES"; // default 4096
// A file descriptor the fake writes to as a compile goes: compile_started when it starts,
// code_handed_over once kjit has the code object (what follows is kjit's publication).
inline constexpr const char *progress_fd_variable = "KJIT_FAKE_NVRTC_PROGRESS_FD";
inline constexpr char compile_started = 'c';
inline constexpr char code_handed_over = 'p';

// The code object it "compiles": `size` bytes that depend on the index and the size only, so that
// a reader can tell a whole code object from a torn or mixed one.
inline std::byte code_byte(std::size_t index, std::size_t size) {
  return static_cast<std::byte>((index * 131 + size * 7 + index / 4093) & 0xFF);
}

} // namespace kjit::testing::fake_nvrtc
