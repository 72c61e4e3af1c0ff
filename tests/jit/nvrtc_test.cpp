#include "compiler_fixture.hpp"

#include <filesystem>
#include <fstream>
#include <regex>
#include <unistd.h>

namespace kjit::jit {
namespace {

using NvrtcTest = CompilerTest<Vendor::nvidia>;

const std::string scale_source = R"(template <typename T, int N>
__global__ void scale(T* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = x[i] + x[i];
}
)";

// The version alone has no patch level; the build ids of libnvrtc and its builtins tell a toolkit
// update apart.
TEST_F(NvrtcTest, IdentityNamesTheNvrtcVersionAndBuild) {
  EXPECT_TRUE(std::regex_match(compiler().identity(),
                               std::regex(R"(nvrtc \d+\.\d+ \(libnvrtc\S+ build [0-9a-f]{40}, )"
                                          R"(libnvrtc-builtins\S+ build [0-9a-f]{40}\))")))
      << compiler().identity();
  EXPECT_EQ(compiler().name(), "nvrtc");
  EXPECT_EQ(compiler().vendor(), Vendor::nvidia);
}

TEST_F(NvrtcTest, SupportedTargetsIncludeSm90AndItsArchSpecificVariant) {
  EXPECT_TRUE(supports(compiler(), "sm_90"));
  EXPECT_TRUE(supports(compiler(), "sm_90a"));
  for (const TargetSupport &target : compiler().supported_targets())
    EXPECT_TRUE(target.features.empty()) << target.arch;
}

// NVRTC found an undeclared "probe.h" in the current directory, a file no key hashes: after it
// changed, the old code came back under the old key. It must not be found.
TEST_F(NvrtcTest, AQuotedIncludeIsNotSearchedForInTheCurrentDirectory) {
  const std::filesystem::path directory =
      std::filesystem::temp_directory_path() / ("kjit-nvrtc-cwd-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  std::ofstream(directory / "probe.h") << "#define PROBE 7\n";
  const std::filesystem::path previous = std::filesystem::current_path();
  std::filesystem::current_path(directory);
  const Error error = error_from([&] {
    compiler().compile(request("probe.cu", "#include \"probe.h\"\n" + scale_source, "sm_90",
                               {"scale<float, 64>"}));
  });
  std::filesystem::current_path(previous);
  std::filesystem::remove_all(directory);
  EXPECT_EQ(error.code(), Errc::compile_error) << error.summary();
  EXPECT_NE(error.detail().find("probe.h"), std::string::npos) << error.detail();
}

TEST_F(NvrtcTest, Sm90CubinHoldsTheLoweredKernel) {
  CompileResult result =
      compiler().compile(request("scale.cu", scale_source, "sm_90", {"scale<float, 4096>"}));
  ASSERT_EQ(result.lowered_names.size(), 1u);
  EXPECT_EQ(result.lowered_names[0], "_Z5scaleIfLi4096EEvPT_");
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf) << "not an ELF64 file";
  EXPECT_EQ(elf->machine, elf_machine_cuda);
  EXPECT_TRUE(contains(elf->symbols, result.lowered_names[0]));
}

TEST_F(NvrtcTest, EveryListedTargetCompiles) {
  // The list adds the 'a' and 'f' variants by rule; NVRTC itself must accept each of them.
  for (const TargetSupport &target : compiler().supported_targets()) {
    CompileResult result = compiler().compile(
        request("k.cu", "extern \"C\" __global__ void k(int* x) { x[0] = 1; }\n", target.arch));
    std::optional<ElfSummary> elf = read_elf(result.code);
    ASSERT_TRUE(elf) << target.arch;
    EXPECT_EQ(elf->machine, elf_machine_cuda) << target.arch;
    EXPECT_TRUE(contains(elf->symbols, "k")) << target.arch;
  }
}

TEST_F(NvrtcTest, VariantsNvrtcRejectsAreUnsupported) {
  for (const char *arch : {"sm_89a", "sm_90f", "sm_60"}) {
    Error error = error_from([&] { compiler().check_supported(Target::parse(arch)); });
    EXPECT_EQ(error.code(), Errc::unsupported_target) << arch;
    EXPECT_EQ(error.summary().find(std::string(arch) + " is not supported by nvrtc "), 0u)
        << error.summary();
    EXPECT_NE(error.summary().find("sm_90a"), std::string::npos) << error.summary();
  }
}

// A Volta target on NVRTC 13 names the CUDA release that still compiles it.
TEST_F(NvrtcTest, DroppedArchitectureNamesTheLastReleaseThatHadIt) {
  if (supports(compiler(), "sm_70"))
    GTEST_SKIP() << compiler().release() << " supports sm_70";
  Error error = error_from([&] { compiler().check_supported(Target::parse("sm_70")); });
  EXPECT_EQ(error.summary().find("sm_70 is not supported by " + compiler().release() +
                                 "; NVRTC of CUDA 12 was the last to support it (CUDA 13 begins "
                                 "at sm_75); it supports: sm_75"),
            0u)
      << error.summary();
}

TEST_F(NvrtcTest, AmdTargetIsRefused) {
  Error error = error_from([&] { compiler().check_supported(Target::parse("gfx90a")); });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary(), "gfx90a is an AMD target; nvrtc compiles for NVIDIA GPUs only");
}

TEST_F(NvrtcTest, HalfAndBfloat16HeadersAreFoundWithoutAnIncludeOption) {
  std::string source = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + scale_source;
  CompileResult result = compiler().compile(
      request("scale.cu", source, "sm_90", {"scale<__half, 64>", "scale<__nv_bfloat16, 64>"}));
  EXPECT_EQ(result.lowered_names, (std::vector<std::string>{"_Z5scaleI6__halfLi64EEvPT_",
                                                            "_Z5scaleI13__nv_bfloat16Li64EEvPT_"}));
}

TEST_F(NvrtcTest, NameExpressionsMayUseAliases) {
  // Unlike hiprtc 5.2, NVRTC resolves a name expression as C++, so a typedef names the same kernel.
  std::string source = "#include <cuda_fp16.h>\ntypedef __half half;\n" + scale_source;
  CompileResult result =
      compiler().compile(request("scale.cu", source, "sm_90", {"scale<half, 64>"}));
  EXPECT_EQ(result.lowered_names, std::vector<std::string>{"_Z5scaleI6__halfLi64EEvPT_"});
}

TEST_F(NvrtcTest, EnvironmentIsEmpty) { EXPECT_TRUE(compiler().environment().empty()); }

} // namespace
} // namespace kjit::jit
