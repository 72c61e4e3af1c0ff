#pragma once
// A minimal reader for the code objects the compilers emit (AMDGPU code objects and cubins are
// both ELF64, little endian): enough to check what a code object is for and which kernels it
// holds, without trusting the compiler's return code or loading it on a device.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kjit::jit {

inline constexpr std::uint16_t elf_machine_amdgpu = 0xE0; // EM_AMDGPU
inline constexpr std::uint16_t elf_machine_cuda = 190;    // EM_CUDA

struct ElfSummary {
  std::uint16_t machine = 0;        // e_machine: elf_machine_amdgpu, elf_machine_cuda...
  std::uint32_t flags = 0;          // e_flags: the processor and its features on AMDGPU
  std::vector<std::string> symbols; // names in .symtab, in table order (the null entry omitted)
};

// Returns nullopt when `image` is not a well-formed little-endian ELF64 file (truncated, or a
// header or section that points outside the image).
std::optional<ElfSummary> read_elf(std::span<const std::byte> image);

// The GNU build id of an ELF64 file (its NT_GNU_BUILD_ID note, in lower-case hex as `readelf -n`
// prints it), found through the PT_NOTE program headers. `image` may be a prefix of the file:
// linkers put the notes in its first page. nullopt when the file has no build id or the prefix
// does not reach it. It names one build of a library exactly, where a version number does not
// (a toolkit patch release keeps "nvrtc 13.0").
std::optional<std::string> read_build_id(std::span<const std::byte> image);
// read_build_id over the first 64 KiB of the file at `path`; nullopt when it cannot be read.
std::optional<std::string> read_build_id_of_file(const std::string &path);

} // namespace kjit::jit
