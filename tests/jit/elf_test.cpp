#include "kjit/jit/elf.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <regex>

namespace kjit::jit {
namespace {

// Builds a small ELF64 image by hand: header, then the .strtab bytes, the .symtab entries and
// three section headers (null, .symtab, .strtab), as a linker lays them out.
class ElfBuilder {
public:
  std::vector<std::byte> build(std::uint16_t machine, std::uint32_t flags,
                               const std::vector<std::string> &symbols) {
    std::string strings(1, '\0');
    std::vector<std::uint32_t> name_offsets;
    for (const std::string &symbol : symbols) {
      name_offsets.push_back(std::uint32_t(strings.size()));
      strings += symbol + '\0';
    }
    image_.assign(64, std::byte{0});
    const unsigned char identity[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    for (std::size_t i = 0; i < sizeof identity; ++i)
      image_[i] = std::byte{identity[i]};
    put(18, 2, machine);
    put(48, 4, flags);

    std::size_t strings_offset = image_.size();
    for (char c : strings)
      image_.push_back(std::byte(c));
    std::size_t symbols_offset = image_.size();
    image_.resize(image_.size() + 24 * (symbols.size() + 1)); // entry 0 is the null symbol
    for (std::size_t i = 0; i < symbols.size(); ++i)
      put(symbols_offset + 24 * (i + 1), 4, name_offsets[i]);

    std::size_t sections_offset = image_.size();
    image_.resize(image_.size() + 64 * 3);
    std::size_t symtab = sections_offset + 64, strtab = sections_offset + 128;
    put(symtab + 4, 4, 2); // SHT_SYMTAB
    put(symtab + 24, 8, symbols_offset);
    put(symtab + 32, 8, 24 * (symbols.size() + 1));
    put(symtab + 40, 4, 2); // sh_link: the .strtab section
    put(strtab + 4, 4, 3);  // SHT_STRTAB
    put(strtab + 24, 8, strings_offset);
    put(strtab + 32, 8, strings.size());
    put(40, 8, sections_offset);
    put(58, 2, 64);
    put(60, 2, 3);
    return image_;
  }

private:
  void put(std::size_t offset, std::size_t bytes, std::uint64_t value) {
    for (std::size_t i = 0; i < bytes; ++i)
      image_[offset + i] = std::byte((value >> (8 * i)) & 0xff);
  }
  std::vector<std::byte> image_;
};

TEST(ReadElf, ReadsMachineFlagsAndSymbols) {
  std::vector<std::byte> image =
      ElfBuilder().build(elf_machine_amdgpu, 0x53f, {"_Z5scalePf", "_Z5scalePf.kd"});
  std::optional<ElfSummary> elf = read_elf(image);
  ASSERT_TRUE(elf);
  EXPECT_EQ(elf->machine, elf_machine_amdgpu);
  EXPECT_EQ(elf->flags, 0x53fu);
  EXPECT_EQ(elf->symbols, (std::vector<std::string>{"_Z5scalePf", "_Z5scalePf.kd"}));
}

// The version is the header's, whatever else the image holds: v4 (ROCm 5), v5 (the default from
// ROCm 6), v6 (generic targets); only an HSA code object has one.
TEST(AmdgpuCodeObjectVersion, IsTheHsaAbiVersionPlusTwo) {
  std::vector<std::byte> image = ElfBuilder().build(elf_machine_amdgpu, 0x53f, {"k"});
  image[7] = std::byte{64}; // ELFOSABI_AMDGPU_HSA
  for (int abi_version : {2, 3, 4}) {
    image[8] = std::byte(abi_version);
    std::optional<ElfSummary> elf = read_elf(image);
    ASSERT_TRUE(elf);
    EXPECT_EQ(amdgpu_code_object_version(*elf), abi_version + 2);
  }
  std::vector<std::byte> pal = image;
  pal[7] = std::byte{65}; // ELFOSABI_AMDGPU_PAL
  EXPECT_EQ(amdgpu_code_object_version(*read_elf(pal)), std::nullopt);
  std::vector<std::byte> cubin = ElfBuilder().build(elf_machine_cuda, 0, {"k"});
  cubin[7] = std::byte{64};
  EXPECT_EQ(amdgpu_code_object_version(*read_elf(cubin)), std::nullopt);
}

TEST(ReadElf, RefusesWhatIsNotAnElf64LittleEndianFile) {
  std::vector<std::byte> image = ElfBuilder().build(elf_machine_cuda, 0, {"k"});
  EXPECT_FALSE(read_elf({}));
  EXPECT_FALSE(read_elf(std::span(image).first(63))) << "shorter than the header";
  std::vector<std::byte> not_elf = image;
  not_elf[1] = std::byte{'X'};
  EXPECT_FALSE(read_elf(not_elf));
  std::vector<std::byte> elf32 = image;
  elf32[4] = std::byte{1};
  EXPECT_FALSE(read_elf(elf32));
  std::vector<std::byte> big_endian = image;
  big_endian[5] = std::byte{2};
  EXPECT_FALSE(read_elf(big_endian));
}

TEST(ReadElf, RefusesTablesThatPointOutsideTheImage) {
  std::vector<std::byte> image = ElfBuilder().build(elf_machine_cuda, 0, {"kernel"});
  EXPECT_TRUE(read_elf(image));
  EXPECT_FALSE(read_elf(std::span(image).first(image.size() - 1))) << "truncated section table";
  std::vector<std::byte> bad_name = image;
  std::size_t first_symbol_name = 64 + std::string("\0kernel\0", 8).size() + 24;
  bad_name[first_symbol_name] = std::byte{0xff}; // name offset beyond .strtab
  EXPECT_FALSE(read_elf(bad_name));
}

// Checked against binutils' reader on a real file: this test program, which Debian's toolchain
// links with a build id.
TEST(ReadBuildId, AgreesWithReadelf) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string readelf;
  if (FILE *pipe = popen(("readelf -n '" + self + "' 2>/dev/null").c_str(), "r")) {
    char buffer[4096];
    while (std::size_t n = fread(buffer, 1, sizeof buffer, pipe))
      readelf.append(buffer, n);
    pclose(pipe);
  }
  std::smatch found;
  ASSERT_TRUE(std::regex_search(readelf, found, std::regex("Build ID: ([0-9a-f]+)")))
      << "readelf printed no build id:\n"
      << readelf;
  EXPECT_EQ(read_build_id_of_file(self), found[1].str());
}

TEST(ReadBuildId, NoneInAFileWithoutNotesOrOutsideThePrefix) {
  EXPECT_EQ(read_build_id(ElfBuilder().build(elf_machine_cuda, 0, {"kernel"})), std::nullopt);
  EXPECT_EQ(read_build_id_of_file("/nonexistent/library.so"), std::nullopt);
  std::vector<std::byte> not_elf(100, std::byte{0x7f});
  EXPECT_EQ(read_build_id(not_elf), std::nullopt);
}

} // namespace
} // namespace kjit::jit
