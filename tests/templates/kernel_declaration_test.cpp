// kernel_mismatch reads the kernel's declaration from the source and says in one line why it does
// not fit the schema, or "" when it fits or cannot be read (the compiler's log then stands).
#include "kjit/templates/kernel_declaration.hpp"

#include <gtest/gtest.h>

namespace kjit::templates {
namespace {

const ParamDecl T{"T", ParamSchema::type({"float", "half"})};
const ParamDecl N{"N", ParamSchema::integer(1, 4096)};
const ParamDecl X{"X", ParamSchema::integer(1, 8)};

std::string mismatch(std::string source, std::vector<ParamDecl> params,
                     TemplateOptions options = {}) {
  return kernel_mismatch(Template("k", std::move(source), std::move(params), std::move(options)));
}

const std::string two = "#include \"x.h\"\n// template <typename T> __global__ void k(T *x);\n"
                        "template <typename T, int N>\n__global__ void k(T *x) {}\n";

TEST(KernelMismatch, ADeclarationThatFitsTheSchemaIsNoMismatch) {
  EXPECT_EQ(mismatch(two, {T, N}), "");
  EXPECT_EQ(mismatch("template <typename T, int N = 4> __global__ void k(T *x) {}", {T}), "")
      << "a defaulted parameter may be left to its default";
  EXPECT_EQ(mismatch("template <int... Ns> __global__ void k() {}", {N, X}), "");
  EXPECT_EQ(mismatch("__global__ void k(float *x) {}", {}), "");
}

TEST(KernelMismatch, ACountThatDiffersIsSaidInOneLine) {
  EXPECT_EQ(mismatch(two, {T, N, X}), "the kernel template k takes 2 parameters (typename T, int "
                                      "N), the schema declares 3 (T, N, X)");
  EXPECT_EQ(mismatch(two, {T}), "the kernel template k takes 2 parameters (typename T, int N), "
                                "the schema declares 1 (T)");
  EXPECT_EQ(mismatch("template <typename T, int N, int V = 4>\n__global__ void k(T *x) {}", {T}),
            "the kernel template k takes 2 to 3 parameters (typename T, int N, int V = 4), the "
            "schema declares 1 (T)");
  EXPECT_EQ(mismatch("__global__ void k(float *x) {}", {N}),
            "the kernel template k takes 0 parameters (), the schema declares 1 (N)");
}

TEST(KernelMismatch, AKindThatDiffersIsSaidInOneLine) {
  EXPECT_EQ(mismatch(two, {N, X}), "the kernel template k's parameter 1 (typename T) is a type, "
                                   "the schema's N an integer");
}

TEST(KernelMismatch, AKernelNameTheSourceLacksIsSaid) {
  EXPECT_EQ(mismatch(two, {T, N}, {.kernel = "kk"}),
            "the source declares no kernel named kk (the template's kernel; "
            "TemplateOptions::kernel, a set's \"kernel\")");
}

TEST(KernelMismatch, TheKernelMayBeDeclaredInAHeader) {
  const std::string header = "template <typename T> __global__ void kernel_in_header(T *x) {}\n";
  EXPECT_EQ(mismatch("#include \"h.h\"\n", {T},
                     {.kernel = "kernel_in_header", .headers = {{"h.h", header}}}),
            "");
  EXPECT_NE(mismatch("#include \"h.h\"\n", {T, N},
                     {.kernel = "kernel_in_header", .headers = {{"h.h", header}}}),
            "");
}

TEST(KernelMismatch, ADeclarationItCannotReadLeavesTheCompilersLog) {
  EXPECT_EQ(mismatch("#define KERNEL(name) template <typename T> __global__ void name(T *x) {}\n"
                     "KERNEL(k)\n",
                     {T, N}),
            "")
      << "a kernel declared through a macro";
  EXPECT_EQ(mismatch("template <template <typename> class C> __global__ void k() {}", {T, N}), "");
}

} // namespace
} // namespace kjit::templates
