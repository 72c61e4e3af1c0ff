// What a header library costs a cached variant (docs/ARCHITECTURE.md, "Header libraries"), on the
// CPU, against the same kernel with no includes, measured in the same run:
//
//   kjit_header_library [TARGET]             TARGET: sm_90 (default, NVRTC) or gfx90a (hiprtc)
//       a generated tree of 500 headers; 30 fresh processes each for the disk hit of the kernel
//       that includes it and of the one that includes nothing (medians), then google-benchmark:
//       a disk hit in a new Runtime, a memory hit, and the include scan a miss adds, beside the
//       miss's compile.
//   kjit_header_library --generate DIR [N]   writes the tree (N headers, default 500) under DIR:
//       DIR/tree/lib/d<k>/h<i>.h, every one reached from lib/d0/h0.h through #include <...>,
//       each defining lib::f<i>; and DIR/tree.cu, a kernel that calls lib::f0.
//
// The tree: header i includes headers 2i+1 and 2i+2 and defines f<i>(x) = i + f<2i+1>(x) +
// f<2i+2>(x) (a leaf: i + x), padded with a comment to about 1 KiB.
#include "bench/child_process.hpp"
#include "kjit/kjit.hpp"
#include "runtime/src/include_scan.hpp"
#include "runtime/src/variant.hpp"

#include <algorithm>
#include <benchmark/benchmark.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using kjit::bench::median;
using kjit::bench::run_child;

std::string header_path(int i) {
  return "lib/d" + std::to_string(i % 10) + "/h" + std::to_string(i) + ".h";
}

void generate(const fs::path &dir, int count) {
  for (int i = 0; i < count; ++i) {
    const fs::path path = dir / "tree" / header_path(i);
    fs::create_directories(path.parent_path());
    std::string text = "#pragma once\n";
    std::string body = std::to_string(i);
    for (int child : {2 * i + 1, 2 * i + 2})
      if (child < count) {
        text += "#include <" + header_path(child) + ">\n";
        body += " + f" + std::to_string(child) + "(x)";
      }
    if (2 * i + 1 >= count)
      body += " + x";
    text += "// " + std::string(1000, 'x') + "\n";
    text += "namespace lib {\n__device__ inline int f" + std::to_string(i) + "(int x) { return " +
            body + "; }\n}\n";
    std::ofstream(path) << text;
  }
  std::ofstream(dir / "tree.cu") << "#include <lib/d0/h0.h>\n"
                                    "template <typename T> __global__ void tree(T *out) {\n"
                                    "  out[0] = static_cast<T>(lib::f0(1));\n}\n";
}

const char *kFlatSource = "template <typename T> __global__ void flat(T *out) {\n"
                          "  out[0] = static_cast<T>(1);\n}\n";

std::string read_text(const fs::path &path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

// The two templates: the tree's kernel with its include directory, the flat one with none.
struct Kernels {
  explicit Kernels(const fs::path &dir)
      : tree("tree", read_text(dir / "tree.cu"), {{"T", kjit::ParamSchema::type({"int"})}},
             {.include_dirs = {(dir / "tree").string()}}),
        flat("flat", kFlatSource, {{"T", kjit::ParamSchema::type({"int"})}}) {}
  kjit::Template tree, flat;
};

// Prints the origin and the milliseconds from main to the code object.
int child(const std::string &which, const std::string &target) {
  const auto start = std::chrono::steady_clock::now();
  const Kernels kernels(std::getenv("KJIT_BENCH_TREE"));
  kjit::Runtime rt;
  const kjit::CodeObject &code = rt.compile(which == "tree" ? kernels.tree : kernels.flat,
                                            {{"T", "int"}}, kjit::jit::Target::parse(target));
  const auto done = std::chrono::steady_clock::now();
  kjit::bench::report_child(kjit::to_string(code.origin()), start, done);
  return 0;
}

std::string target_id = "sm_90";

void BM_DiskHit(benchmark::State &state, bool with_tree) {
  const Kernels kernels(std::getenv("KJIT_BENCH_TREE"));
  const kjit::jit::Target target = kjit::jit::Target::parse(target_id);
  for (auto _ : state) {
    kjit::Runtime rt;
    const kjit::CodeObject &code =
        rt.compile(with_tree ? kernels.tree : kernels.flat, {{"T", "int"}}, target);
    if (code.origin() != kjit::Origin::user_cache)
      state.SkipWithError("not a disk hit");
    benchmark::DoNotOptimize(code.code().data());
  }
}

void BM_MemoryHit(benchmark::State &state, bool with_tree) {
  const Kernels kernels(std::getenv("KJIT_BENCH_TREE"));
  const kjit::jit::Target target = kjit::jit::Target::parse(target_id);
  kjit::Runtime rt;
  const kjit::Template &tmpl = with_tree ? kernels.tree : kernels.flat;
  rt.compile(tmpl, {{"T", "int"}}, target);
  for (auto _ : state)
    benchmark::DoNotOptimize(&rt.compile(tmpl, {{"T", "int"}}, target));
}

// A miss's extra work: following the includes, reading and hashing every header.
void BM_MissScan(benchmark::State &state) {
  const Kernels kernels(std::getenv("KJIT_BENCH_TREE"));
  const kjit::jit::Target target = kjit::jit::Target::parse(target_id);
  const kjit::VariantDescription variant =
      kjit::describe_variant(kernels.tree.bind({{"T", "int"}}), target, {"bench", {}});
  for (auto _ : state)
    benchmark::DoNotOptimize(kjit::scan_includes(variant.request, "tree").size());
}

// The miss's compile, for scale: KJIT_REBUILD compiles every time.
void BM_MissCompile(benchmark::State &state) {
  const Kernels kernels(std::getenv("KJIT_BENCH_TREE"));
  const kjit::jit::Target target = kjit::jit::Target::parse(target_id);
  kjit::Config config = kjit::Config::from_environment();
  config.rebuild = true;
  for (auto _ : state) {
    kjit::Runtime rt(config);
    benchmark::DoNotOptimize(rt.compile(kernels.tree, {{"T", "int"}}, target).code().data());
  }
}

} // namespace

int main(int argc, char **argv) try {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--generate" && argc > 2) {
    generate(argv[2], argc > 3 ? std::atoi(argv[3]) : 500);
    return 0;
  }
  if (mode.rfind("--child=", 0) == 0) {
    const std::string spec = mode.substr(8); // tree:sm_90
    return child(spec.substr(0, spec.find(':')), spec.substr(spec.find(':') + 1));
  }
  if (!mode.empty() && mode.front() != '-')
    target_id = mode;

  const fs::path dir =
      fs::temp_directory_path() / ("kjit-header-library-" + std::to_string(getpid()));
  generate(dir, 500);
  setenv("KJIT_BENCH_TREE", dir.c_str(), 1);
  setenv("KJIT_CACHE_DIR", (dir / "cache").c_str(), 1);
  setenv("KJIT_PREBUILT_DIR", (dir / "none").c_str(), 1);
  const std::string tree_flag = "--child=tree:" + target_id;
  const std::string flat_flag = "--child=flat:" + target_id;
  const std::string first_tree = run_child(argv[0], tree_flag.c_str()).line; // compiles
  const std::string first_flat = run_child(argv[0], flat_flag.c_str()).line;
  std::vector<double> tree_wall, tree_inside, flat_wall, flat_inside;
  for (int i = 0; i < 30; ++i) {
    for (auto [flag, wall, inside] : {std::tuple{&tree_flag, &tree_wall, &tree_inside},
                                      std::tuple{&flat_flag, &flat_wall, &flat_inside}}) {
      const auto hit = run_child(argv[0], flag->c_str());
      if (hit.line.rfind("user cache ", 0) != 0)
        throw std::runtime_error("not a disk hit: " + hit.line);
      wall->push_back(hit.wall_ms);
      inside->push_back(std::stod(hit.line.substr(11)));
    }
  }
  std::printf("fresh process, warm cache, %s, median of 30 (first: tree %s, flat %s):\n"
              "  500 headers: spawn to code object      %8.3f ms   inside main %8.3f ms\n"
              "  no includes: spawn to code object      %8.3f ms   inside main %8.3f ms\n"
              "  difference                              %8.3f ms               %8.3f ms\n",
              target_id.c_str(), first_tree.c_str(), first_flat.c_str(), median(tree_wall),
              median(tree_inside), median(flat_wall), median(flat_inside),
              median(tree_wall) - median(flat_wall), median(tree_inside) - median(flat_inside));
  std::fflush(stdout);

  benchmark::RegisterBenchmark("disk hit, new Runtime/500 headers", BM_DiskHit, true);
  benchmark::RegisterBenchmark("disk hit, new Runtime/no includes", BM_DiskHit, false);
  benchmark::RegisterBenchmark("memory hit/500 headers", BM_MemoryHit, true);
  benchmark::RegisterBenchmark("memory hit/no includes", BM_MemoryHit, false);
  benchmark::RegisterBenchmark("miss: include scan of 500 headers", BM_MissScan);
  benchmark::RegisterBenchmark("miss: compile of the 500-header kernel", BM_MissCompile)
      ->Unit(benchmark::kMillisecond)
      ->Iterations(5);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fs::remove_all(dir);
  return 0;
} catch (const std::exception &error) {
  std::fprintf(stderr, "kjit_header_library: %s\n", error.what());
  return 1;
}
