// Builds a large user tier for measuring the `kjit cache` commands (BENCHMARKS.md):
//
//   kjit_make_cache DIR COUNT [CODE_MIB]
//
// Every entry is written by kjit's own writer with the key, header and key inputs that the
// Runtime gives that variant: the built-in scale template over three element types and COUNT
// values of N, for each target whose compiler is installed (gfx90a and gfx1030 through hiprtc,
// sm_80 and sm_90 through NVRTC). Compiling 100,000 variants would take an hour here, so only the
// first 16 per (type, target) are compiled; the others carry one of those real code objects
// under their own key. Their sizes and headers are what a real cache holds, but their code is
// not the variant their key names: a fixture to list, verify and prune, never a cache to run
// from. With CODE_MIB, those others' code objects are padded with zeros to that many MiB: a
// cache of a few large entries (to measure what export and import hold in memory). DIR must not
// exist yet, so that no real cache is ever filled with them.
#include "kjit/cache/disk_store.hpp"
#include "kjit/kjit.hpp"
#include "runtime/src/variant.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using namespace kjit;

struct Base {
  jit::Target target;
  const jit::Compiler *compiler;
  std::string type;
  std::vector<const CodeObject *> compiled; // real compiles of this (type, target)
};

} // namespace

int main(int argc, char **argv) try {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: kjit_make_cache DIR COUNT [CODE_MIB]\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  const long count = std::stol(argv[2]);
  const std::size_t code_bytes = argc == 4 ? std::stoul(argv[3]) << 20 : 0;
  if (std::filesystem::exists(dir)) {
    std::fprintf(stderr, "kjit_make_cache: %s exists; give a new directory\n", dir.c_str());
    return 2;
  }
  Config config;
  config.cache_dir = dir;
  config.prebuilt_dir = dir / "none";
  Runtime rt(config);
  const Template &scale = templates::find("scale");
  constexpr int real_per_base = 16;

  std::vector<Base> bases;
  for (const char *id : {"gfx90a", "gfx1030", "sm_80", "sm_90"}) {
    const jit::Target target = jit::Target::parse(id);
    const jit::Compiler *compiler = nullptr;
    try {
      compiler = &rt.compiler(target.vendor());
    } catch (const Error &error) {
      std::fprintf(stderr, "skipping %s: %s\n", id, error.summary().c_str());
      continue;
    }
    for (const char *type : {"float", "half", "bfloat16"}) {
      Base base{target, compiler, type, {}};
      for (int n = 1; n <= real_per_base; ++n)
        base.compiled.push_back(&rt.compile(scale, {{"T", type}, {"N", n}}, target));
      bases.push_back(std::move(base));
    }
  }
  if (bases.empty()) {
    std::fprintf(stderr, "kjit_make_cache: no compiler found\n");
    return 1;
  }

  const cache::DiskStore store(dir, cache::Access::read_write);
  const auto started = std::chrono::steady_clock::now();
  long written = static_cast<long>(bases.size()) * real_per_base;
  for (long i = 0; written < count; ++i, ++written) {
    const Base &base = bases[static_cast<std::size_t>(i) % bases.size()];
    const Instance instance =
        scale.bind({{"T", base.type}, {"N", real_per_base + 1 + static_cast<int>(i)}});
    const VariantDescription variant =
        describe_variant(instance, base.target, CompilerIdentity::of(*base.compiler));
    const CodeObject &code = *base.compiled[static_cast<std::size_t>(i) % real_per_base];
    jit::CompileResult result{.code = {code.code().begin(), code.code().end()},
                              .lowered_names = {code.lowered_name()},
                              .log = {}};
    if (result.code.size() < code_bytes)
      result.code.resize(code_bytes);
    store.write(
        make_entry(instance, variant, *base.compiler, std::move(result), code.compile_ms()));
  }
  std::printf("%ld entries in %s (%zu real compiles per type and target), written in %.1f s\n",
              written, dir.c_str(), static_cast<std::size_t>(real_per_base),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return 0;
} catch (const std::exception &error) {
  std::fprintf(stderr, "kjit_make_cache: %s\n", error.what());
  return 1;
}
