#include "compiler_fixture.hpp"
#include "tests/support/scoped_environment.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <thread>

namespace kjit::jit {
namespace {

using HiprtcTest = CompilerTest<Vendor::amd>;

const std::string scale_source = R"(template <typename T, int N>
__global__ void scale(T* x) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = x[i] + x[i];
}
)";

// EF_AMDGPU_MACH, the processor in an AMDGPU code object's e_flags, and the code object v4
// feature fields (LLVM's AMDGPUUsage: "any" when the target id leaves the feature out).
constexpr std::uint32_t mach_mask = 0x0ff;
constexpr std::uint32_t mach_gfx908 = 0x030, mach_gfx90a = 0x03f, mach_gfx1030 = 0x036;
constexpr std::uint32_t feature_mask = 0xf00;
constexpr std::uint32_t xnack_any = 0x100, xnack_off = 0x200;
constexpr std::uint32_t sramecc_any = 0x400, sramecc_on = 0xc00;

TEST_F(HiprtcTest, IdentityNamesHiprtcHipAndComgrVersionsAndBuilds) {
  EXPECT_TRUE(std::regex_match(
      compiler().identity(),
      std::regex(
          R"(hiprtc \d+\.\d+ \(HIP \d+\.\d+\.\d+, comgr \d+\.\d+; )"
          R"((?:libamdhip64|libhiprtc)\S+ build [0-9a-f]{40}, libamd_comgr\S+ build [0-9a-f]{40}; )"
          R"(device library(?: [0-9a-f]{32}|: comgr's own)\))")))
      << compiler().identity();
  EXPECT_EQ(compiler().name(), "hiprtc");
  EXPECT_EQ(compiler().vendor(), Vendor::amd);
}

TEST_F(HiprtcTest, SupportedTargetsComeWithTheirFeatures) {
  const auto &targets = compiler().supported_targets();
  auto find = [&](const std::string &arch) {
    return std::find_if(targets.begin(), targets.end(),
                        [&](const TargetSupport &target) { return target.arch == arch; });
  };
  for (const char *arch : {"gfx90a", "gfx908", "gfx1030"})
    ASSERT_NE(find(arch), targets.end()) << arch;
  EXPECT_EQ(find("gfx90a")->features, (std::vector<std::string>{"sramecc", "xnack"}));
  EXPECT_EQ(find("gfx908")->features, (std::vector<std::string>{"sramecc", "xnack"}));
  EXPECT_TRUE(find("gfx1030")->features.empty());
}

struct CodeObjectCase {
  const char *target;
  std::uint32_t mach;
  std::uint32_t features;
};

class HiprtcCodeObject : public HiprtcTest, public ::testing::WithParamInterface<CodeObjectCase> {};

TEST_P(HiprtcCodeObject, IsAnAmdgpuElfForTheTargetHoldingTheKernelDescriptor) {
  const CodeObjectCase &expected = GetParam();
  CompileResult result =
      compiler().compile(request("scale.hip", scale_source, expected.target, {"scale<float, 64>"}));
  ASSERT_EQ(result.lowered_names.size(), 1u);
  EXPECT_EQ(result.lowered_names[0], "_Z5scaleIfLi64EEvPT_");
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf) << "not an ELF64 file";
  EXPECT_EQ(elf->machine, elf_machine_amdgpu);
  EXPECT_EQ(elf->flags & mach_mask, expected.mach) << std::hex << elf->flags;
  EXPECT_EQ(elf->flags & feature_mask, expected.features) << std::hex << elf->flags;
  EXPECT_TRUE(contains(elf->symbols, result.lowered_names[0] + ".kd"));
  // An HSA code object of version 4 to 6, the versions kjit's lookups compare with what a
  // device's runtime loads: hiprtc 5.2 emits v4; Debian's 6.4 and 7.2 emit v6 for processors too
  // (their LLVM's default), AMD's own ROCm 6 and 7 v5.
  std::optional<int> version = amdgpu_code_object_version(*elf);
  EXPECT_TRUE(version >= 4 && version <= 6) << version.value_or(-1);
}

INSTANTIATE_TEST_SUITE_P(
    Targets, HiprtcCodeObject,
    ::testing::Values(CodeObjectCase{"gfx90a", mach_gfx90a, sramecc_any | xnack_any},
                      CodeObjectCase{"gfx908", mach_gfx908, sramecc_any | xnack_any},
                      CodeObjectCase{"gfx1030", mach_gfx1030, 0},
                      CodeObjectCase{"gfx90a:sramecc+:xnack-", mach_gfx90a,
                                     sramecc_on | xnack_off}),
    [](const auto &info) {
      std::string name = info.param.target;
      std::replace_if(
          name.begin(), name.end(), [](char c) { return !std::isalnum(c); }, '_');
      return name;
    });

TEST_F(HiprtcTest, HalfAndFloatInstantiationsLowerInOrder) {
  CompileResult result = compiler().compile(
      request("scale.hip", scale_source, "gfx90a", {"scale<__half, 4096>", "scale<float, 4096>"}));
  ASSERT_EQ(result.lowered_names.size(), 2u);
  EXPECT_EQ(result.lowered_names[0], "_Z5scaleI6__halfLi4096EEvPT_");
  EXPECT_EQ(result.lowered_names[1], "_Z5scaleIfLi4096EEvPT_");
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf);
  for (const std::string &lowered : result.lowered_names)
    EXPECT_TRUE(contains(elf->symbols, lowered + ".kd")) << lowered;
}

// hiprtc 5.x compares a name expression's text with the demangled kernel names; from ROCm 6 on it
// resolves the expression as the compiler does, so an alias names the kernel it stands for.
TEST_F(HiprtcTest, AliasInANameExpressionLowersToItsKernelOrIsAClearCompileError) {
  std::string source = "typedef __half half;\n" + scale_source;
  CompileRequest aliased = request("scale.hip", source, "gfx90a", {"scale<half, 4096>"});
  try {
    CompileResult result = compiler().compile(aliased);
    ASSERT_EQ(result.lowered_names.size(), 1u);
    EXPECT_EQ(result.lowered_names[0], "_Z5scaleI6__halfLi4096EEvPT_") << compiler().identity();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::compile_error);
    EXPECT_NE(error.summary().find("name expression 'scale<half, 4096>' could not be lowered"),
              std::string::npos)
        << error.summary();
    EXPECT_NE(error.detail().find("spell each type by its underlying name"), std::string::npos)
        << error.detail();
    EXPECT_NE(error.detail().find("__half, not a typedef or alias such as half"),
              std::string::npos);
    // The kernels the program does hold, so the user sees the spelling that would have worked.
    EXPECT_NE(error.detail().find("void scale<__half, 4096>(__half*)"), std::string::npos)
        << error.detail();
  }
}

TEST_F(HiprtcTest, LogNamesFilesAsTheRequestDoesNotByTemporaryPaths) {
  std::vector<HeaderFile> headers{{"kjit/util.h", "#pragma once\nflaot broken_value;\n"}};
  Error error = error_from([&] {
    compiler().compile(request("k.hip", "#include <kjit/util.h>\n", "gfx90a", {}, headers));
  });
  EXPECT_NE(error.detail().find("In file included from k.hip:1:\n"
                                "kjit/util.h:2:1: error: unknown type name 'flaot'\n"),
            std::string::npos)
      << error.detail();
  EXPECT_EQ(error.detail().find("comgr-"), std::string::npos) << error.detail();
}

// A hiprtc too old for generic targets (ROCm 5) refuses them before hiprtc sees them, as it would
// abort the process.
TEST_F(HiprtcTest, GenericTargetIsRefusedBeforeAnOldHiprtcSeesIt) {
  if (supports(compiler(), "gfx11-generic"))
    GTEST_SKIP() << "this hiprtc lists gfx11-generic";
  Error error = error_from([&] {
    compiler().compile(request("k.hip", scale_source, "gfx11-generic", {"scale<int, 1>"}));
  });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary().find("gfx11-generic is not supported by"), 0u) << error.summary();
}

TEST_F(HiprtcTest, UnsupportedTargetIsRefusedBeforeHiprtcSeesIt) {
  if (supports(compiler(), "gfx942"))
    GTEST_SKIP() << "this hiprtc supports gfx942";
  // hiprtc 5.2 aborts the process on gfx942; this test finishing is half of the check.
  Error error = error_from([&] { compiler().compile(request("k.hip", scale_source, "gfx942")); });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  // The error names the releases that would compile it, as a user's next step.
  EXPECT_EQ(error.summary().find("gfx942 is not supported by " + compiler().release() +
                                 "; ROCm 5.7, 6.4 and 7.2 list it; it supports: gfx"),
            0u)
      << error.summary();
  EXPECT_NE(error.summary().find("gfx90a"), std::string::npos);
  CompileResult after =
      compiler().compile(request("k.hip", scale_source, "gfx90a", {"scale<int, 1>"}));
  EXPECT_FALSE(after.code.empty());
}

TEST_F(HiprtcTest, FeatureTheProcessorLacksIsRefused) {
  Error error =
      error_from([&] { compiler().compile(request("k.hip", scale_source, "gfx1030:xnack+")); });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary(), "gfx1030 has no feature 'xnack'; its features: none");

  error = error_from([&] { compiler().check_supported(Target::parse("gfx90a:tgsplit+")); });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary(), "gfx90a has no feature 'tgsplit'; its features: sramecc, xnack");
}

TEST_F(HiprtcTest, NvidiaTargetIsRefused) {
  Error error = error_from([&] { compiler().check_supported(Target::parse("sm_90")); });
  EXPECT_EQ(error.code(), Errc::unsupported_target);
  EXPECT_EQ(error.summary(), "sm_90 is an NVIDIA target; hiprtc compiles for AMD GPUs only");
}

TEST_F(HiprtcTest, EnvironmentReportsCompileOptionsAppendWhenSet) {
  const char *variable = "HIPRTC_COMPILE_OPTIONS_APPEND";
  std::pair<std::string, std::string> entry{variable, "-ffp-contract=off"};
  unsetenv(variable);
  auto unset = compiler().environment();
  EXPECT_EQ(std::find(unset.begin(), unset.end(), entry), unset.end());
  setenv(variable, entry.second.c_str(), 1);
  auto set = compiler().environment();
  unsetenv(variable);
  EXPECT_NE(std::find(set.begin(), set.end(), entry), set.end());
}

// hiprtc's clang searches CPATH, C_INCLUDE_PATH and CPLUS_INCLUDE_PATH for headers that no key
// hashes: with one set, kjit compiled, and only the variable's value was keyed, so a changed header
// there gave the old code. Now it refuses to compile; an empty one is unset, as clang reads it.
TEST_F(HiprtcTest, RefusesToCompileWhileAnIncludePathVariableIsSet) {
  for (const char *variable : {"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH"}) {
    SCOPED_TRACE(variable);
    setenv(variable, "/tmp/kjit-headers", 1);
    const Error error = error_from([&] {
      compiler().compile(request("k.hip", scale_source, "gfx90a", {"scale<float, 64>"}));
    });
    const auto keyed = compiler().environment();
    setenv(variable, "", 1);
    const CompileResult compiled =
        compiler().compile(request("k.hip", scale_source, "gfx90a", {"scale<float, 64>"}));
    const auto keyed_when_empty = compiler().environment();
    unsetenv(variable);
    EXPECT_EQ(error.code(), Errc::bad_config);
    EXPECT_EQ(error.summary().rfind(std::string(variable) + "='/tmp/kjit-headers' is set", 0), 0u)
        << error.summary();
    EXPECT_FALSE(compiled.code.empty());
    EXPECT_EQ(keyed_when_empty, compiler().environment()) << "an empty variable is unset";
    for (const auto &[name, value] : keyed)
      EXPECT_NE(name, variable) << "refused, so never a key input";
  }
}

TEST_F(HiprtcTest, ConcurrentCompilesGiveTheSameCodeAsSerialOnes) {
  // hiprtc 5.2 alone, compiling from several threads, crashes or emits code objects built with
  // other options (device-library symbols left in, twice the size); kjit serialises its calls.
  // Up to 16 rounds a thread, fewer when compiles are slow (hiprtc 6 takes seconds each, and the
  // calls run one at a time), so that the test stays well inside ctest's timeout.
  constexpr int programs = 4, rounds = 16, least_rounds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  const char *targets[programs] = {"gfx90a", "gfx908", "gfx1030", "gfx90a:sramecc+:xnack-"};
  std::vector<CompileRequest> requests;
  std::vector<CompileResult> expected;
  for (int i = 0; i < programs; ++i) {
    std::string kernel = "k" + std::to_string(i);
    std::string source = "template <typename T, int N> __global__ void " + kernel +
                         "(T* x) {\n"
                         "  for (int j = 0; j < N; ++j)\n"
                         "    x[threadIdx.x + j] = x[j] * T(" +
                         std::to_string(i + 2) + ") + __shfl_xor(x[j], 1);\n}\n";
    requests.push_back(request(kernel + ".hip", source, targets[i],
                               {kernel + "<float, " + std::to_string(8 << i) + ">"}));
    expected.push_back(compiler().compile(requests.back()));
  }
  std::vector<int> mismatches(programs, 0);
  std::vector<std::thread> threads;
  for (int i = 0; i < programs; ++i)
    threads.emplace_back([&, i] {
      for (int round = 0;
           round < rounds && (round < least_rounds || std::chrono::steady_clock::now() < deadline);
           ++round) {
        try {
          CompileResult result = compiler().compile(requests[i]);
          mismatches[i] +=
              result.code != expected[i].code || result.lowered_names != expected[i].lowered_names;
        } catch (const Error &) {
          ++mismatches[i];
        }
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(programs, 0));
}

// The folder of the device library this hiprtc links, where it found one on disk (its files are
// among data_files(), so that the compiler memo follows them).
std::optional<std::filesystem::path> device_library_folder(const Compiler &compiler) {
  for (const std::string &file : compiler.data_files())
    if (file.ends_with("/oclc_isa_version_11-generic.bc"))
      return std::filesystem::path(file).parent_path();
  return std::nullopt;
}

// Where Debian's device library package of some LLVM is installed and no variable names another
// folder, a hiprtc that lists generic targets links it (the ROCm roots install the matching one):
// the generic tests below must not skip there for want of it.
TEST_F(HiprtcTest, FindsTheDeviceLibraryPackageWhereItIsInstalled) {
  if (!supports(compiler(), "gfx11-generic"))
    GTEST_SKIP() << compiler().release() << " lists no generic target";
  if (std::getenv("HIP_DEVICE_LIB_PATH") || std::getenv("KJIT_ROCM_DEVICE_LIB_PATH"))
    GTEST_SKIP() << "a variable names the device library";
  std::error_code error;
  bool installed = false;
  for (const auto &llvm : std::filesystem::directory_iterator("/usr/lib", error))
    if (llvm.path().filename().string().starts_with("llvm-")) {
      const std::string major = llvm.path().filename().string().substr(5);
      installed |= std::filesystem::exists(llvm.path() / "lib/clang" / major / "amdgcn/bitcode");
    }
  if (!installed)
    GTEST_SKIP() << "no rocm-device-libs-<N> package is installed";
  EXPECT_TRUE(device_library_folder(compiler())) << compiler().identity();
  EXPECT_NE(compiler().identity().find("; device library "), std::string::npos);
}

struct GenericCase {
  const char *target;
  std::uint32_t mach; // EF_AMDGPU_MACH_AMDGCN_GFX*_GENERIC (LLVM's AMDGPUUsage)
};

class HiprtcGenericTarget : public HiprtcTest, public ::testing::WithParamInterface<GenericCase> {};

// With the device library on disk (Debian's rocm-device-libs-<LLVM major>, which the ROCm roots
// install), Debian's hiprtc 6.4 and 7.2 compile every generic target: a code object of version 6
// for the generic processor, generic version 1.
TEST_P(HiprtcGenericTarget, CompilesWithTheDeviceLibraryOnDisk) {
  const GenericCase &expected = GetParam();
  if (!supports(compiler(), expected.target))
    GTEST_SKIP() << compiler().release() << " lists no " << expected.target;
  if (!device_library_folder(compiler()))
    GTEST_SKIP() << "no device library on disk (" << compiler().identity() << ")";
  CompileResult result =
      compiler().compile(request("scale.hip", scale_source, expected.target, {"scale<float, 64>"}));
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf) << "not an ELF64 file";
  EXPECT_EQ(elf->machine, elf_machine_amdgpu);
  EXPECT_EQ(elf->flags & mach_mask, expected.mach) << std::hex << elf->flags;
  EXPECT_EQ(elf->flags >> 24, 1u) << "generic version, " << std::hex << elf->flags;
  EXPECT_EQ(amdgpu_code_object_version(*elf), 6);
  EXPECT_TRUE(contains(elf->symbols, result.lowered_names.at(0) + ".kd"));
}

INSTANTIATE_TEST_SUITE_P(
    Generic, HiprtcGenericTarget,
    ::testing::Values(GenericCase{"gfx9-generic", 0x051}, GenericCase{"gfx9-4-generic", 0x05f},
                      GenericCase{"gfx10-1-generic", 0x052}, GenericCase{"gfx10-3-generic", 0x053},
                      GenericCase{"gfx11-generic", 0x054}, GenericCase{"gfx12-generic", 0x059}),
    [](const auto &info) {
      std::string name = info.param.target;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// comgr 7.2 caches compile steps in its own cache, keyed without the device library: a compile
// that failed for want of a generic target's library, then the same compile once the library is
// fixed, used to find the first one's step and fail to link (undefined __ockl_* symbols). The
// second must succeed. AMD_COMGR_CACHE_DIR, which comgr reads at every compile, gives the test its
// own, empty cache.
TEST_F(HiprtcTest, AFailedCompileIsNotFoundAgainInComgrsCacheOnceTheLibraryIsFixed) {
  if (!supports(compiler(), "gfx11-generic"))
    GTEST_SKIP() << compiler().release() << " lists no gfx11-generic";
  const std::optional<std::filesystem::path> installed = device_library_folder(compiler());
  if (!installed)
    GTEST_SKIP() << "no device library on disk (" << compiler().identity() << ")";
  testing::TempDir dir;
  const std::filesystem::path library = dir / "bitcode";
  std::filesystem::copy(*installed, library);
  std::filesystem::remove(library / "oclc_isa_version_11-generic.bc");
  testing::ScopedEnvironment environment;
  environment.set("HIP_DEVICE_LIB_PATH", nullptr);
  environment.set("KJIT_ROCM_DEVICE_LIB_PATH", library.c_str());
  environment.set("AMD_COMGR_CACHE_DIR", (dir / "comgr").c_str());
  const CompileRequest scale =
      request("scale.hip", scale_source, "gfx11-generic", {"scale<float, 64>"});

  const std::unique_ptr<Compiler> lacking = load_compiler(Vendor::amd);
  const Error error = error_from([&] { lacking->compile(scale); });
  EXPECT_EQ(error.code(), Errc::unsupported_target) << error.summary();
  EXPECT_NE(error.summary().find("finds no device library for gfx11-generic"), std::string::npos)
      << error.summary();

  std::filesystem::copy(*installed / "oclc_isa_version_11-generic.bc", library);
  const std::unique_ptr<Compiler> fixed = load_compiler(Vendor::amd);
  EXPECT_NE(fixed->identity(), lacking->identity()) << "the library's content is in every key";
  CompileResult result = fixed->compile(scale);
  std::optional<ElfSummary> elf = read_elf(result.code);
  ASSERT_TRUE(elf);
  EXPECT_TRUE(contains(elf->symbols, result.lowered_names.at(0) + ".kd"));
}

} // namespace
} // namespace kjit::jit
