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

} // namespace kjit::jit
