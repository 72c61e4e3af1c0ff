#pragma once
// What a code object records about each kernel's use of the hardware: registers, shared memory,
// scratch, spills, wavefront size and argument sizes, read offline from the ELF (no device, no
// driver).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kjit::jit {

struct KernelResources {
  std::string symbol;                 // the kernel's lowered name
  std::uint32_t registers = 0;        // AMD: VGPRs (arch VGPRs); NVIDIA: registers per thread
  std::optional<std::uint32_t> agprs; // AMD: accumulation VGPRs (gfx908/gfx90a/gfx94x/gfx950)
  std::optional<std::uint32_t> sgprs; // AMD: scalar registers
  // AMD: static LDS per workgroup. NVIDIA: the .nv.shared.<kernel> section, which from sm_90 on
  // includes the 1 KiB the toolchain reserves in every block (ptxas's "smem" figure leaves it out).
  std::uint64_t shared_bytes = 0;
  std::uint64_t scratch_bytes = 0;     // private segment / local memory (stack frame) per thread
  std::optional<std::uint32_t> spills; // VGPR + SGPR spills (AMD); cubins do not record them
  std::optional<std::uint32_t> wavefront_size;     // AMD only; NVIDIA's warp is always 32
  std::optional<std::uint32_t> max_workgroup_size; // AMD: .max_flat_workgroup_size
  // The bytes of each argument the kernel declares, in order (AMD: its .args without the hidden
  // ones the runtime adds; NVIDIA: the EIATTR_KPARAM_INFO records). nullopt where the code object
  // does not say.
  std::optional<std::vector<std::uint32_t>> argument_sizes;
};

// Every kernel's resources from an AMDGPU code object (its NT_AMDGPU_METADATA note, code-object
// v3 to v6) or a cubin (the EIATTR records of .nv.info and the .nv.shared.<kernel> sections).
// nullopt when `image` is not such an ELF or its records are malformed: the image may come from
// a cache file, so every length and nesting depth is checked before it is used.
std::optional<std::vector<KernelResources>> read_kernel_resources(std::span<const std::byte> image);

} // namespace kjit::jit
