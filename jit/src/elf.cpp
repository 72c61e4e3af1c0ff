#include "kjit/jit/elf.hpp"

#include <cstring>
#include <fstream>

namespace kjit::jit {
namespace {

// Offsets and sizes from the ELF64 specification (the structures of <elf.h>, read field by field
// so that an image of any alignment and a host of any byte order read the same).
constexpr std::size_t elf_header_size = 64;
constexpr std::size_t section_header_size = 64;
constexpr std::size_t symbol_size = 24;
constexpr std::uint32_t section_type_symtab = 2;
constexpr std::size_t program_header_size = 56;
constexpr std::uint32_t program_type_note = 4; // PT_NOTE
constexpr std::uint32_t note_type_gnu_build_id = 3;

constexpr std::uint64_t align4(std::uint64_t n) { return (n + 3) & ~std::uint64_t(3); }

class Reader {
public:
  explicit Reader(std::span<const std::byte> image) : image_(image) {}

  bool has_elf64_header() const {
    constexpr unsigned char magic[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */};
    return contains(0, elf_header_size) && std::memcmp(image_.data(), magic, sizeof magic) == 0;
  }

  bool contains(std::uint64_t offset, std::uint64_t size) const {
    return offset <= image_.size() && size <= image_.size() - offset;
  }

  // Little-endian unsigned integer of `bytes` bytes at `offset`; the caller checked the range.
  std::uint64_t read(std::uint64_t offset, std::size_t bytes) const {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i)
      value |= std::uint64_t(std::to_integer<std::uint8_t>(image_[offset + i])) << (8 * i);
    return value;
  }

  // The NUL-terminated string at `offset` in the string table [table, table + size).
  std::optional<std::string> string_at(std::uint64_t table, std::uint64_t size,
                                       std::uint64_t offset) const {
    if (offset >= size)
      return std::nullopt;
    const char *begin = reinterpret_cast<const char *>(image_.data() + table + offset);
    const void *end = std::memchr(begin, '\0', size - offset);
    if (end == nullptr)
      return std::nullopt;
    return std::string(begin, static_cast<const char *>(end));
  }

private:
  std::span<const std::byte> image_;
};

} // namespace

std::optional<ElfSummary> read_elf(std::span<const std::byte> image) {
  Reader elf(image);
  if (!elf.has_elf64_header())
    return std::nullopt;

  ElfSummary summary;
  summary.os_abi = std::uint8_t(elf.read(7, 1));
  summary.abi_version = std::uint8_t(elf.read(8, 1));
  summary.machine = std::uint16_t(elf.read(18, 2));
  summary.flags = std::uint32_t(elf.read(48, 4));
  std::uint64_t section_table = elf.read(40, 8);
  std::uint64_t section_entry_size = elf.read(58, 2);
  std::uint64_t section_count = elf.read(60, 2);
  if (section_count == 0)
    return summary;
  if (section_entry_size < section_header_size ||
      !elf.contains(section_table, section_count * section_entry_size))
    return std::nullopt;

  auto section = [&](std::uint64_t index) { return section_table + index * section_entry_size; };
  // Section names are optional (e_shstrndx 0 means none); a name that cannot be read is empty,
  // and the readers that look sections up by name then do not find it.
  const std::uint64_t names_index = elf.read(62, 2); // e_shstrndx
  std::uint64_t names = 0, names_size = 0;
  if (names_index != 0 && names_index < section_count) {
    names = elf.read(section(names_index) + 24, 8);
    names_size = elf.read(section(names_index) + 32, 8);
    if (!elf.contains(names, names_size))
      return std::nullopt;
  }
  for (std::uint64_t i = 0; i < section_count; ++i) {
    ElfSection entry;
    entry.type = std::uint32_t(elf.read(section(i) + 4, 4));
    entry.info = std::uint32_t(elf.read(section(i) + 44, 4));
    entry.offset = elf.read(section(i) + 24, 8);
    entry.size = elf.read(section(i) + 32, 8);
    if (entry.type != elf_section_nobits && !elf.contains(entry.offset, entry.size))
      return std::nullopt;
    entry.name = elf.string_at(names, names_size, elf.read(section(i), 4)).value_or("");
    summary.sections.push_back(std::move(entry));
  }
  for (std::uint64_t i = 0; i < section_count; ++i) {
    if (elf.read(section(i) + 4, 4) != section_type_symtab)
      continue;
    std::uint64_t symbols = elf.read(section(i) + 24, 8);
    std::uint64_t symbols_size = elf.read(section(i) + 32, 8);
    std::uint64_t strings_index = elf.read(section(i) + 40, 4); // sh_link
    if (strings_index >= section_count || !elf.contains(symbols, symbols_size))
      return std::nullopt;
    std::uint64_t strings = elf.read(section(strings_index) + 24, 8);
    std::uint64_t strings_size = elf.read(section(strings_index) + 32, 8);
    if (!elf.contains(strings, strings_size))
      return std::nullopt;
    // Entry 0 is the reserved null symbol.
    for (std::uint64_t symbol = symbol_size; symbol + symbol_size <= symbols_size;
         symbol += symbol_size) {
      auto name = elf.string_at(strings, strings_size, elf.read(symbols + symbol, 4));
      if (!name)
        return std::nullopt;
      summary.symbols.push_back(std::move(*name));
    }
  }
  return summary;
}

std::vector<ElfNote> read_notes(std::span<const std::byte> notes) {
  Reader elf(notes);
  std::vector<ElfNote> found;
  // Each note: name size, description size, type, then name and description, each padded to
  // four bytes.
  for (std::uint64_t note = 0; note + 12 <= notes.size();) {
    const std::uint64_t name_size = elf.read(note, 4), description_size = elf.read(note + 4, 4);
    const std::uint64_t name = note + 12, description = name + align4(name_size);
    const std::uint64_t next = description + align4(description_size);
    if (next > notes.size())
      break;
    std::string_view name_text(reinterpret_cast<const char *>(notes.data() + name), name_size);
    if (!name_text.empty() && name_text.back() == '\0')
      name_text.remove_suffix(1);
    found.push_back({name_text, std::uint32_t(elf.read(note + 8, 4)),
                     notes.subspan(description, description_size)});
    note = next;
  }
  return found;
}

std::optional<int> amdgpu_code_object_version(const ElfSummary &elf) {
  constexpr std::uint8_t os_abi_amdgpu_hsa = 64; // ELFOSABI_AMDGPU_HSA
  if (elf.machine != elf_machine_amdgpu || elf.os_abi != os_abi_amdgpu_hsa)
    return std::nullopt;
  return elf.abi_version + 2;
}

std::optional<std::string> read_build_id(std::span<const std::byte> image) {
  Reader elf(image);
  if (!elf.has_elf64_header())
    return std::nullopt;
  const std::uint64_t table = elf.read(32, 8);      // e_phoff
  const std::uint64_t entry_size = elf.read(54, 2); // e_phentsize
  const std::uint64_t count = elf.read(56, 2);      // e_phnum
  if (entry_size < program_header_size || !elf.contains(table, count * entry_size))
    return std::nullopt;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t header = table + i * entry_size;
    if (elf.read(header, 4) != program_type_note)
      continue;
    const std::uint64_t notes = elf.read(header + 8, 8), notes_size = elf.read(header + 32, 8);
    if (!elf.contains(notes, notes_size))
      continue;
    for (const ElfNote &note : read_notes(image.subspan(notes, notes_size))) {
      if (note.type == note_type_gnu_build_id && note.name == "GNU" && !note.description.empty()) {
        static constexpr char digits[] = "0123456789abcdef";
        std::string hex;
        for (const std::byte byte : note.description) {
          hex += digits[std::to_integer<unsigned>(byte) >> 4];
          hex += digits[std::to_integer<unsigned>(byte) & 15];
        }
        return hex;
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> read_build_id_of_file(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::vector<std::byte> prefix(64 * 1024);
  file.read(reinterpret_cast<char *>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  prefix.resize(static_cast<std::size_t>(file.gcount()));
  return read_build_id(prefix);
}

} // namespace kjit::jit
