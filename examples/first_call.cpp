// A user's program: a templated kernel compiled on first use, then served from the cache.
// Run it twice: the first process compiles, the second loads every variant from disk.
//
//   first_call [TARGET]     TARGET defaults to gfx90a (e.g. sm_90 for NVIDIA)
#include <kjit/kjit.hpp>

#include <chrono>
#include <cstdio>

static const kjit::Template scale{"scale",
                                  R"(
template <typename T, int N>
__global__ void scale(T* x, float a) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) x[i] = kjit::from_float<T>(kjit::to_float(x[i]) * a);
})",
                                  {{"T", kjit::ParamSchema::type({"float", "half", "bfloat16"})},
                                   {"N", kjit::ParamSchema::integer(1, 1 << 20)}}};

static double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

int main(int argc, char **argv) try {
  const auto target = kjit::Target::parse(argc > 1 ? argv[1] : "gfx90a");
  kjit::Runtime rt; // configured from KJIT_* variables

  std::printf("%-28s %-12s %12s %12s\n", "variant", "found in", "first call", "next call");
  for (const char *type : {"float", "half", "bfloat16"}) {
    for (int n : {4096, 1 << 20}) {
      const kjit::ParamValues params = {{"T", type}, {"N", n}};
      auto start = std::chrono::steady_clock::now();
      const kjit::CodeObject &code = rt.compile(scale, params, target);
      const double first_ms = ms_since(start);
      start = std::chrono::steady_clock::now();
      rt.compile(scale, params, target); // the in-memory tier
      const double next_ms = ms_since(start);
      std::printf("%-28s %-12s %9.3f ms %9.4f ms\n", code.expression().c_str(),
                  std::string(kjit::to_string(code.origin())).c_str(), first_ms, next_ms);
    }
  }
  return 0;
} catch (const kjit::Error &error) {
  std::fprintf(stderr, "first_call: %s\n", error.what());
  return 2;
}
