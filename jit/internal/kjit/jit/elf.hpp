#pragma once
// A minimal reader for the code objects the compilers emit (AMDGPU code objects and cubins are
// both ELF64, little endian): enough to check what a code object is for and which kernels it
// holds, without trusting the compiler's return code or loading it on a device.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::jit {

inline constexpr std::uint16_t elf_machine_amdgpu = 0xE0; // EM_AMDGPU
inline constexpr std::uint16_t elf_machine_cuda = 190;    // EM_CUDA

struct ElfSection {
  std::string name;
  std::uint32_t type = 0;   // sh_type
  std::uint32_t info = 0;   // sh_info
  std::uint64_t offset = 0; // sh_offset; for a section with contents, inside the image
  std::uint64_t size = 0;   // sh_size (a SHT_NOBITS section has a size but no contents)
};

inline constexpr std::uint32_t elf_section_note = 7;   // SHT_NOTE
inline constexpr std::uint32_t elf_section_nobits = 8; // SHT_NOBITS

struct ElfSummary {
  std::uint8_t os_abi = 0;          // e_ident[EI_OSABI]
  std::uint8_t abi_version = 0;     // e_ident[EI_ABIVERSION]
  std::uint16_t machine = 0;        // e_machine: elf_machine_amdgpu, elf_machine_cuda...
  std::uint32_t flags = 0;          // e_flags: the processor and its features on AMDGPU
  std::vector<std::string> symbols; // names in .symtab, in table order (the null entry omitted)
  std::vector<ElfSection> sections; // in table order; contents checked to lie inside the image
};

// The notes of a SHT_NOTE section's contents `notes`: name (without its NUL), type and
// description. Stops at the first note that does not fit.
struct ElfNote {
  std::string_view name;
  std::uint32_t type = 0;
  std::span<const std::byte> description;
};
std::vector<ElfNote> read_notes(std::span<const std::byte> notes);

// Returns nullopt when `image` is not a well-formed little-endian ELF64 file (truncated, or a
// header or section that points outside the image).
std::optional<ElfSummary> read_elf(std::span<const std::byte> image);

// The AMDGPU code object version of an HSA code object (LLVM's AMDGPUUsage, "AMDGPU ELF Header":
// e_ident[EI_OSABI] is ELFOSABI_AMDGPU_HSA, 64, and e_ident[EI_ABIVERSION] is
// ELFABIVERSION_AMDGPU_HSA_V2..V6, 0..4, so the version is the ABI version + 2). Generic targets
// exist only from version 6. nullopt for any other ELF (a cubin, a PAL or Mesa code object).
std::optional<int> amdgpu_code_object_version(const ElfSummary &elf);

// The GNU build id of an ELF64 file (its NT_GNU_BUILD_ID note, in lower-case hex as `readelf -n`
// prints it), found through the PT_NOTE program headers. `image` may be a prefix of the file:
// linkers put the notes in its first page. nullopt when the file has no build id or the prefix
// does not reach it. It names one build of a library exactly, where a version number does not
// (a toolkit patch release keeps "nvrtc 13.0").
std::optional<std::string> read_build_id(std::span<const std::byte> image);
// read_build_id over the first 64 KiB of the file at `path`; nullopt when it cannot be read.
std::optional<std::string> read_build_id_of_file(const std::string &path);

} // namespace kjit::jit
