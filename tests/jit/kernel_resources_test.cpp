#include "compiler_fixture.hpp"
#include "kjit/jit/kernel_resources.hpp"

#include <cstring>

namespace kjit::jit {
namespace {

// Three kernels with known needs: few registers, a static shared array, and a private array
// indexed at run time (which the compilers place in scratch / local memory).
const std::string kernels_source = R"(
extern "C" __global__ void light(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void with_shared(float* x) {
  __shared__ float tile[256];
  tile[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = tile[255 - threadIdx.x];
}
extern "C" __global__ void with_stack(float* x, int n) {
  float local[64];
  for (int i = 0; i < 64; ++i) local[(i * n) & 63] = x[i * n + threadIdx.x];
  x[threadIdx.x] = local[n & 63];
}
)";

const KernelResources *find(const std::vector<KernelResources> &all, const std::string &symbol) {
  for (const KernelResources &kernel : all)
    if (kernel.symbol == symbol)
      return &kernel;
  return nullptr;
}

// The three kernels of kernels_source, each null when the code object lacks it.
struct Three {
  const KernelResources *light = nullptr, *shared = nullptr, *stack = nullptr;
  explicit Three(const std::optional<std::vector<KernelResources>> &all) {
    if (!all || all->size() != 3)
      return;
    light = find(*all, "light");
    shared = find(*all, "with_shared");
    stack = find(*all, "with_stack");
  }
  bool found() const { return light && shared && stack; }
};

using AmdResources = CompilerTest<Vendor::amd>;
using NvidiaResources = CompilerTest<Vendor::nvidia>;

TEST_F(AmdResources, MetadataNoteGivesEachKernelsRegistersLdsScratchAndWavefront) {
  const auto resources =
      read_kernel_resources(compiler().compile(request("k.hip", kernels_source, "gfx90a")).code);
  const Three three(resources);
  ASSERT_TRUE(three.found()) << "no metadata read, or not the three kernels";
  const auto [light, shared, stack] = three;
  EXPECT_GT(light->registers, 0u);
  EXPECT_GT(light->sgprs.value_or(0), 0u);
  EXPECT_TRUE(light->agprs) << "gfx90a records its AGPRs";
  EXPECT_EQ(light->shared_bytes, 0u);
  EXPECT_EQ(light->scratch_bytes, 0u);
  EXPECT_EQ(light->spills, 0u);
  EXPECT_EQ(light->wavefront_size, 64u);
  EXPECT_EQ(light->max_workgroup_size, 1024u);
  EXPECT_EQ(shared->shared_bytes, 256u * 4);
  EXPECT_GE(stack->scratch_bytes, 64u * 4);
}

TEST_F(AmdResources, RdnaReportsWave32) {
  const CompileResult result = compiler().compile(request("k.hip", kernels_source, "gfx1030"));
  const auto resources = read_kernel_resources(result.code);
  ASSERT_TRUE(resources);
  const KernelResources *light = find(*resources, "light");
  ASSERT_TRUE(light);
  EXPECT_EQ(light->wavefront_size, 32u);
  EXPECT_FALSE(light->agprs) << "RDNA has no AGPRs";
}

TEST_F(NvidiaResources, CubinGivesRegistersSharedAndStackFrame) {
  const auto resources =
      read_kernel_resources(compiler().compile(request("k.cu", kernels_source, "sm_80")).code);
  const Three three(resources);
  ASSERT_TRUE(three.found()) << "no cubin records read, or not the three kernels";
  const auto [light, shared, stack] = three;
  EXPECT_GT(light->registers, 0u);
  EXPECT_FALSE(light->spills) << "cubins do not record spills";
  EXPECT_EQ(light->shared_bytes, 0u);
  EXPECT_EQ(light->scratch_bytes, 0u);
  EXPECT_EQ(shared->shared_bytes, 256u * 4) << "sm_80 reserves no shared memory in the section";
  EXPECT_GE(stack->scratch_bytes, 64u * 4);
}

// Arguments of known sizes, a struct by value among them: what a KernelSignature is checked
// against without a device.
const std::string arguments_source = R"(
struct Twelve { int a, b, c; };
extern "C" __global__ void mixed(char c, double d, Twelve s, float *p, short h) {
  p[0] = c + d + s.a + h;
}
extern "C" __global__ void none() {}
)";

void expect_argument_sizes(const std::optional<std::vector<KernelResources>> &resources) {
  ASSERT_TRUE(resources);
  const KernelResources *mixed = find(*resources, "mixed");
  const KernelResources *none = find(*resources, "none");
  ASSERT_TRUE(mixed && none);
  EXPECT_EQ(mixed->argument_sizes, (std::vector<std::uint32_t>{1, 8, 12, 8, 2}));
  EXPECT_EQ(none->argument_sizes, std::vector<std::uint32_t>{});
}

TEST_F(AmdResources, MetadataGivesTheSizeOfEachDeclaredArgument) {
  expect_argument_sizes(
      read_kernel_resources(compiler().compile(request("k.hip", arguments_source, "gfx90a")).code));
}

TEST_F(NvidiaResources, CubinGivesTheSizeOfEachDeclaredArgument) {
  expect_argument_sizes(
      read_kernel_resources(compiler().compile(request("k.cu", arguments_source, "sm_90")).code));
}

// The note's bytes come from cache files: every cut of a real code object, and a hostile
// description, read as "no resources" without reading past the input.
TEST_F(AmdResources, TruncatedOrHostileCodeObjectsReadAsNothing) {
  const CompileResult result = compiler().compile(request("k.hip", kernels_source, "gfx90a"));
  for (std::size_t size = 0; size < result.code.size(); size += 97)
    (void)read_kernel_resources(std::span(result.code).first(size)); // ASan checks the bounds
  std::vector<std::byte> corrupted = result.code;
  std::size_t replaced = 0;
  // Every "amdhsa.kernels" array header becomes a 2^32-1 element array32 claim.
  const std::string key = "amdhsa.kernels";
  for (std::size_t at = 0; at + key.size() + 5 < corrupted.size(); ++at) {
    if (std::memcmp(corrupted.data() + at, key.data(), key.size()) != 0)
      continue;
    const std::size_t header = at + key.size();
    corrupted[header] = std::byte{0xdd};
    for (int i = 1; i <= 4; ++i)
      corrupted[header + i] = std::byte{0xff};
    ++replaced;
  }
  ASSERT_GT(replaced, 0u);
  EXPECT_FALSE(read_kernel_resources(corrupted));
}

TEST(KernelResources, NotACodeObjectReadsAsNothing) {
  EXPECT_FALSE(read_kernel_resources({}));
  const std::vector<std::byte> text(100, std::byte{'x'});
  EXPECT_FALSE(read_kernel_resources(text));
}

} // namespace
} // namespace kjit::jit
