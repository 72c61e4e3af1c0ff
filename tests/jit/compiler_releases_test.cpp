// The releases an unsupported-target error names, from the known-releases table.
#include "compiler_releases.hpp"

#include <gtest/gtest.h>

namespace kjit::jit {
namespace {

TEST(CompilerReleasesTest, AmdNamesEveryKnownReleaseThatListsTheProcessor) {
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx942"), "ROCm 5.7, 6.4 and 7.2 list it");
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx950"), "ROCm 6.4 and 7.2 list it");
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx11-generic"), "ROCm 6.4 and 7.2 list it");
  // Listed by 5.7 and gone since: "or later" would be wrong.
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx941"), "ROCm 5.7 lists it");
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx1250"), "ROCm 7.2 lists it");
  EXPECT_EQ(releases_supporting(Vendor::amd, "gfx9999"), "");
}

TEST(CompilerReleasesTest, NvidiaNamesListedReleasesAndDocumentedChanges) {
  EXPECT_EQ(releases_supporting(Vendor::nvidia, "sm_90a"), "NVRTC 13.0 lists it");
  EXPECT_EQ(releases_supporting(Vendor::nvidia, "sm_70"),
            "NVRTC of CUDA 12 was the last to support it (CUDA 13 begins at sm_75)");
  EXPECT_EQ(releases_supporting(Vendor::nvidia, "sm_101a"), "CUDA 13 renumbered sm_101 as sm_110");
  EXPECT_EQ(releases_supporting(Vendor::nvidia, "sm_99"), "");
}

TEST(CompilerReleasesTest, RowsAreFoundByTheNameTheCompilerGivesItsRelease) {
  EXPECT_EQ(release_name(Vendor::amd, "6.4"), "hiprtc, ROCm 6.4");
  EXPECT_EQ(release_name(Vendor::nvidia, "13.0"), "nvrtc 13.0");
  const std::vector<std::string> rocm_5_2 = known_release_archs(Vendor::amd, "hiprtc, ROCm 5.2");
  ASSERT_FALSE(rocm_5_2.empty());
  EXPECT_EQ(rocm_5_2.front(), "gfx600");
  EXPECT_EQ(rocm_5_2.back(), "gfx1036");
  EXPECT_TRUE(known_release_archs(Vendor::amd, "hiprtc, ROCm 4.0").empty());
}

} // namespace
} // namespace kjit::jit
