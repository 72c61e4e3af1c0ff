#include "kjit/jit/elf.hpp"

#include <cstring>

namespace kjit::jit {
namespace {

// Offsets and sizes from the ELF64 specification (the structures of <elf.h>, read field by field
// so that an image of any alignment and a host of any byte order read the same).
constexpr std::size_t elf_header_size = 64;
constexpr std::size_t section_header_size = 64;
constexpr std::size_t symbol_size = 24;
constexpr std::uint32_t section_type_symtab = 2;

class Reader {
public:
  explicit Reader(std::span<const std::byte> image) : image_(image) {}

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
  constexpr unsigned char magic[] = {0x7f, 'E', 'L', 'F', 2 /* 64-bit */, 1 /* little endian */};
  if (!elf.contains(0, elf_header_size) || std::memcmp(image.data(), magic, sizeof magic) != 0)
    return std::nullopt;

  ElfSummary summary;
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

} // namespace kjit::jit
