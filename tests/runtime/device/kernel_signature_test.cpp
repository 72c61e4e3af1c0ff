// The argument check a typed launch makes before the driver sees anything, tested without a
// device: Kernel::launch calls KernelSignature::check first.
#include "kjit/error.hpp"
#include "kjit/runtime/kernel.hpp"

#include <cstdint>
#include <gtest/gtest.h>

namespace kjit {
namespace {

struct Pair {
  float first;
  float second;
};

std::string mismatch(auto check) {
  try {
    check();
  } catch (const Error &error) {
    EXPECT_EQ(error.code(), Errc::bad_argument);
    return error.summary();
  }
  ADD_FAILURE() << "the check passed";
  return {};
}

TEST(KernelSignature, OfNamesAndSizesTheHostTypes) {
  const KernelSignature signature = KernelSignature::of<float *, float, int, Pair>();
  ASSERT_EQ(signature.parameters().size(), 4u);
  EXPECT_EQ(signature.parameters()[0], (KernelParameter{"float*", 8, 8}));
  EXPECT_EQ(signature.parameters()[1], (KernelParameter{"float", 4, 4}));
  EXPECT_EQ(signature.parameters()[2], (KernelParameter{"int", 4, 4}));
  EXPECT_EQ(signature.parameters()[3].size, 8u);
  EXPECT_NE(signature.parameters()[3].type.find("Pair"), std::string::npos);
  EXPECT_EQ((KernelSignature::of<float *, float, int>().to_string()), "(float*, float, int)");
  EXPECT_EQ(KernelSignature().to_string(), "()");
}

TEST(KernelSignature, MatchingArgumentsPass) {
  const KernelSignature signature = KernelSignature::of<float *, float, int>();
  EXPECT_NO_THROW((signature.check<float *, float, int>("k")));
  // Only sizes are compared: any pointer for a pointer, an unsigned for an int.
  EXPECT_NO_THROW((signature.check<const std::uint16_t *, float, unsigned>("k")));
  EXPECT_NO_THROW(KernelSignature().check<>("k"));
}

TEST(KernelSignature, AWrongSizeNamesTheArgumentAndBothTypes) {
  // The device type, as the runtime would declare it for scale<__half, 4096>(T *x, float a).
  const KernelSignature signature({{"__half*", 8, 8}, {"float", 4, 4}});
  EXPECT_NO_THROW((signature.check<std::uint16_t *, float>("scale<__half, 4096>")));
  EXPECT_EQ(mismatch([&] { signature.check<std::uint16_t *, double>("scale<__half, 4096>"); }),
            "scale<__half, 4096>: argument 2 is 8 bytes (double), the kernel takes 4 (float)");
  EXPECT_EQ(mismatch([&] { signature.check<int, float>("scale<__half, 4096>"); }),
            "scale<__half, 4096>: argument 1 is 4 bytes (int), the kernel takes 8 (__half*)");
}

TEST(KernelSignature, AWrongCountNamesTheKernelsParameters) {
  const KernelSignature signature = KernelSignature::of<float *, float, int>();
  EXPECT_EQ(mismatch([&] { signature.check<float *>("axpy"); }),
            "axpy: 1 argument given, the kernel takes 3 arguments (float*, float, int)");
  EXPECT_EQ(mismatch([&] { signature.check<float *, float, int, int>("axpy"); }),
            "axpy: 4 arguments given, the kernel takes 3 arguments (float*, float, int)");
  EXPECT_EQ(mismatch([&] { KernelSignature().check<int>("noop"); }),
            "noop: 1 argument given, the kernel takes 0 arguments ()");
}

} // namespace
} // namespace kjit
