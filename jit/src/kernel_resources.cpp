#include "kjit/jit/kernel_resources.hpp"

#include "kjit/jit/elf.hpp"

#include <map>
#include <string_view>

namespace kjit::jit {
namespace {

// ---- a bounded MessagePack reader (the msgpack.org specification), for the AMDGPU metadata ----

constexpr std::uint32_t note_type_amdgpu_metadata = 32; // NT_AMDGPU_METADATA, note name "AMDGPU"
constexpr int deepest_nesting = 16; // the metadata nests 4 deep; deeper input is hostile

struct Value {
  enum class Kind { other, integer, string, array, map } kind = Kind::other;
  std::int64_t integer = 0;
  std::string_view string;
  std::vector<Value> items; // array elements
  // Map entries in input order, keys[i] naming values[i]: two vectors, since a pair of Values
  // would need Value complete here (clang 14 with libstdc++ 12 refuses it, the fuzz preset's).
  std::vector<Value> keys;
  std::vector<Value> values;

  const Value *find(std::string_view key) const {
    for (std::size_t i = 0; i < keys.size(); ++i)
      if (keys[i].kind == Kind::string && keys[i].string == key)
        return &values[i];
    return nullptr;
  }
};

class MessagePack {
public:
  explicit MessagePack(std::span<const std::byte> bytes) : bytes_(bytes) {}

  // The one value at the start of the input; nullopt on any truncation, unknown byte or depth.
  std::optional<Value> parse() {
    Value value;
    if (!read_value(value, 0))
      return std::nullopt;
    return value;
  }

private:
  bool take(std::size_t count, std::uint64_t &value) { // big-endian unsigned of `count` bytes
    if (count > bytes_.size() - at_)
      return false;
    value = 0;
    for (std::size_t i = 0; i < count; ++i)
      value = (value << 8) | std::to_integer<std::uint8_t>(bytes_[at_++]);
    return true;
  }
  bool skip(std::uint64_t count) {
    if (count > bytes_.size() - at_)
      return false;
    at_ += count;
    return true;
  }
  bool read_string(std::uint64_t size, Value &value) {
    if (size > bytes_.size() - at_)
      return false;
    value.kind = Value::Kind::string;
    value.string = {reinterpret_cast<const char *>(bytes_.data() + at_), size};
    at_ += size;
    return true;
  }
  bool read_array(std::uint64_t count, Value &value, int depth) {
    // Each element takes at least one byte: a count beyond what is left is a lie, caught before
    // any allocation.
    if (count > bytes_.size() - at_)
      return false;
    value.kind = Value::Kind::array;
    value.items.resize(count);
    for (Value &item : value.items)
      if (!read_value(item, depth + 1))
        return false;
    return true;
  }
  bool read_map(std::uint64_t count, Value &value, int depth) {
    if (count > (bytes_.size() - at_) / 2)
      return false;
    value.kind = Value::Kind::map;
    value.keys.resize(count);
    value.values.resize(count);
    for (std::size_t i = 0; i < count; ++i)
      if (!read_value(value.keys[i], depth + 1) || !read_value(value.values[i], depth + 1))
        return false;
    return true;
  }

  bool read_value(Value &value, int depth) {
    std::uint64_t tag = 0, n = 0;
    if (depth > deepest_nesting || !take(1, tag))
      return false;
    if (tag <= 0x7f || tag >= 0xe0) { // positive and negative fixint
      value.kind = Value::Kind::integer;
      value.integer = static_cast<std::int8_t>(tag);
      if (tag <= 0x7f)
        value.integer = std::int64_t(tag);
      return true;
    }
    if (tag >= 0xa0 && tag <= 0xbf)
      return read_string(tag & 0x1f, value);
    if (tag >= 0x90 && tag <= 0x9f)
      return read_array(tag & 0x0f, value, depth);
    if (tag >= 0x80 && tag <= 0x8f)
      return read_map(tag & 0x0f, value, depth);
    switch (tag) {
    case 0xc0: // nil
    case 0xc2: // false
    case 0xc3: // true
      return true;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf: // uint 8/16/32/64
      if (!take(std::size_t(1) << (tag - 0xcc), n))
        return false;
      value.kind = Value::Kind::integer;
      value.integer = std::int64_t(n); // metadata values are far below 2^63
      return true;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: { // int 8/16/32/64
      const std::size_t size = std::size_t(1) << (tag - 0xd0);
      if (!take(size, n))
        return false;
      value.kind = Value::Kind::integer;
      const unsigned shift = unsigned(64 - 8 * size);
      value.integer = std::int64_t(n << shift) >> shift;
      return true;
    }
    case 0xca:
      return skip(4); // float 32
    case 0xcb:
      return skip(8); // float 64
    case 0xd9:
    case 0xda:
    case 0xdb: // str 8/16/32
      return take(std::size_t(1) << (tag - 0xd9), n) && read_string(n, value);
    case 0xc4:
    case 0xc5:
    case 0xc6: // bin 8/16/32
      return take(std::size_t(1) << (tag - 0xc4), n) && skip(n);
    case 0xdc:
    case 0xdd: // array 16/32
      return take(tag == 0xdc ? 2 : 4, n) && read_array(n, value, depth);
    case 0xde:
    case 0xdf: // map 16/32
      return take(tag == 0xde ? 2 : 4, n) && read_map(n, value, depth);
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: // fixext 1/2/4/8/16: type + data
      return skip(1 + (std::uint64_t(1) << (tag - 0xd4)));
    case 0xc7:
    case 0xc8:
    case 0xc9: // ext 8/16/32: size, type, data
      return take(std::size_t(1) << (tag - 0xc7), n) && skip(1 + n);
    default: // 0xc1 is never used
      return false;
    }
  }

  std::span<const std::byte> bytes_;
  std::size_t at_ = 0;
};

std::optional<std::uint32_t> integer_field(const Value &kernel, std::string_view key) {
  const Value *value = kernel.find(key);
  if (value == nullptr || value->kind != Value::Kind::integer || value->integer < 0 ||
      value->integer > std::int64_t(UINT32_MAX))
    return std::nullopt;
  return std::uint32_t(value->integer);
}

// The sizes of the kernel's own arguments: each .args map's .size, leaving out the hidden ones
// (.value_kind "hidden_*": the implicit arguments the runtime appends). nullopt when malformed.
std::optional<std::vector<std::uint32_t>> amdgpu_argument_sizes(const Value &kernel) {
  const Value *args = kernel.find(".args");
  if (args == nullptr)
    return std::vector<std::uint32_t>{}; // a kernel without arguments may omit the field
  if (args->kind != Value::Kind::array)
    return std::nullopt;
  std::vector<std::uint32_t> sizes;
  for (const Value &arg : args->items) {
    const Value *kind = arg.find(".value_kind");
    const auto size = integer_field(arg, ".size");
    if (kind == nullptr || kind->kind != Value::Kind::string || !size)
      return std::nullopt;
    if (!kind->string.starts_with("hidden_"))
      sizes.push_back(*size);
  }
  return sizes;
}

// LLVM's AMDGPUUsage, "Code Object V3 Metadata" and later: the note's map holds
// "amdhsa.kernels", an array of one map per kernel with the fields read here.
std::optional<std::vector<KernelResources>> read_amdgpu(std::span<const std::byte> image,
                                                        const ElfSummary &elf) {
  for (const ElfSection &section : elf.sections) {
    if (section.type != elf_section_note)
      continue;
    for (const ElfNote &note : read_notes(image.subspan(section.offset, section.size))) {
      if (note.type != note_type_amdgpu_metadata || note.name != "AMDGPU")
        continue;
      const std::optional<Value> root = MessagePack(note.description).parse();
      const Value *kernels = root ? root->find("amdhsa.kernels") : nullptr;
      if (kernels == nullptr || kernels->kind != Value::Kind::array)
        return std::nullopt;
      std::vector<KernelResources> found;
      for (const Value &kernel : kernels->items) {
        const Value *symbol = kernel.find(".name");
        const auto vgprs = integer_field(kernel, ".vgpr_count");
        const auto lds = integer_field(kernel, ".group_segment_fixed_size");
        const auto scratch = integer_field(kernel, ".private_segment_fixed_size");
        if (symbol == nullptr || symbol->kind != Value::Kind::string || !vgprs || !lds || !scratch)
          return std::nullopt;
        KernelResources resources;
        resources.symbol = std::string(symbol->string);
        resources.registers = *vgprs;
        resources.agprs = integer_field(kernel, ".agpr_count");
        resources.sgprs = integer_field(kernel, ".sgpr_count");
        resources.shared_bytes = *lds;
        resources.scratch_bytes = *scratch;
        const auto vgpr_spills = integer_field(kernel, ".vgpr_spill_count");
        const auto sgpr_spills = integer_field(kernel, ".sgpr_spill_count");
        if (vgpr_spills || sgpr_spills)
          resources.spills = vgpr_spills.value_or(0) + sgpr_spills.value_or(0);
        resources.wavefront_size = integer_field(kernel, ".wavefront_size");
        resources.max_workgroup_size = integer_field(kernel, ".max_flat_workgroup_size");
        resources.argument_sizes = amdgpu_argument_sizes(kernel);
        found.push_back(std::move(resources));
      }
      return found;
    }
  }
  return std::nullopt;
}

// ---- cubins ------------------------------------------------------------------------------------

// The EIATTR records of .nv.info sections: a format byte, an attribute byte, then either two
// bytes of value (formats 1 to 3: none, byte, half) or, for the sized format, a 16-bit length and
// that many bytes (the layout cuobjdump -elf prints).
constexpr std::uint8_t eiattr_format_sized = 0x04;
constexpr std::uint8_t eiattr_regcount = 0x2f;   // symbol index, registers per thread
constexpr std::uint8_t eiattr_frame_size = 0x11; // symbol index, stack frame bytes per thread
// In a kernel's own .nv.info.<kernel>: one per argument, 12 bytes: u32 index (0), u16 ordinal, u16
// offset, u32 whose bits 18 to 31 are the argument's size in bytes (as cuobjdump -elf reads it,
// checked against kernels of known arguments in tests/jit/kernel_resources_test.cpp).
constexpr std::uint8_t eiattr_kparam_info = 0x17;

std::optional<std::vector<KernelResources>> read_cubin(std::span<const std::byte> image,
                                                       const ElfSummary &elf) {
  auto read = [&](std::uint64_t offset, std::size_t bytes) {
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < bytes; ++i)
      value |= std::uint64_t(std::to_integer<std::uint8_t>(image[offset + i])) << (8 * i);
    return value;
  };
  std::map<std::string, KernelResources> kernels; // by symbol
  for (const ElfSection &section : elf.sections) {
    if (section.name.starts_with(".text."))
      kernels[section.name.substr(6)].symbol = section.name.substr(6);
  }
  for (const ElfSection &section : elf.sections) {
    if (section.name.starts_with(".nv.shared.")) {
      auto kernel = kernels.find(section.name.substr(11));
      if (kernel != kernels.end())
        kernel->second.shared_bytes = section.size;
    }
    // Each record: `visit(attribute, value offset, value size)`; false when the section is
    // malformed.
    auto records = [&](auto visit) {
      for (std::uint64_t at = section.offset; at + 4 <= section.offset + section.size;) {
        const auto format = std::uint8_t(read(at, 1)), attribute = std::uint8_t(read(at + 1, 1));
        if (format >= 1 && format < eiattr_format_sized) {
          at += 4;
          continue;
        }
        if (format != eiattr_format_sized)
          return false;
        const std::uint64_t size = read(at + 2, 2), value = at + 4;
        if (size > section.offset + section.size - value || !visit(attribute, value, size))
          return false;
        at = value + size;
      }
      return true;
    };
    bool well_formed = true;
    if (section.name == ".nv.info") {
      well_formed = records([&](std::uint8_t attribute, std::uint64_t value, std::uint64_t size) {
        if ((attribute != eiattr_regcount && attribute != eiattr_frame_size) || size != 8)
          return true;
        const std::uint64_t symbol = read(value, 4);
        if (symbol == 0 || symbol > elf.symbols.size())
          return false;
        auto kernel = kernels.find(elf.symbols[symbol - 1]);
        if (kernel != kernels.end()) {
          const auto amount = std::uint32_t(read(value + 4, 4));
          if (attribute == eiattr_regcount)
            kernel->second.registers = amount;
          else
            kernel->second.scratch_bytes = amount;
        }
        return true;
      });
    } else if (section.name.starts_with(".nv.info.")) {
      auto kernel = kernels.find(section.name.substr(9));
      if (kernel == kernels.end())
        continue;
      std::map<std::uint64_t, std::uint32_t> by_ordinal;
      well_formed = records([&](std::uint8_t attribute, std::uint64_t value, std::uint64_t size) {
        if (attribute != eiattr_kparam_info)
          return true;
        return size == 12 &&
               by_ordinal.emplace(read(value + 4, 2), std::uint32_t(read(value + 8, 4) >> 18))
                   .second;
      });
      std::vector<std::uint32_t> sizes;
      for (const auto &[ordinal, bytes] : by_ordinal)
        if (ordinal == sizes.size()) // ordinals 0, 1, ... with none missing
          sizes.push_back(bytes);
      if (sizes.size() == by_ordinal.size())
        kernel->second.argument_sizes = std::move(sizes);
    }
    if (!well_formed)
      return std::nullopt;
  }
  std::vector<KernelResources> found;
  for (auto &[symbol, resources] : kernels)
    found.push_back(std::move(resources));
  return found;
}

} // namespace

std::optional<std::vector<KernelResources>>
read_kernel_resources(std::span<const std::byte> image) {
  const std::optional<ElfSummary> elf = read_elf(image);
  if (!elf)
    return std::nullopt;
  if (elf->machine == elf_machine_amdgpu)
    return read_amdgpu(image, *elf);
  if (elf->machine == elf_machine_cuda)
    return read_cubin(image, *elf);
  return std::nullopt;
}

} // namespace kjit::jit
