#pragma once
// Prebuilding: compiling sets of variants ahead of time into a read-only prebuilt tier
// (`kjit prebuild`, `cmake --install`, kjit_prebuild() in CMake).
//
// Batching. The instantiations of one template for one target share a compiler program: one
// code object holding several kernels, the compiler's fixed cost paid once (BENCHMARKS.md,
// "Prebuild"). Each variant still gets an entry of its
// own, under exactly the key a JIT compile of it would have (the key names what the variant's
// kernel is made from, and that does not change with its neighbours in the program), holding the
// whole code object and its own kernel alone in the header's kernel list, so the Runtime loads it
// as it loads any entry and finds its kernel by its lowered name. The cost is disk: a batch's code
// object is stored once per variant in it.
//
// Reproducible. Batches are a function of the variants and targets alone, never of the number of
// jobs or the order the sets list them: per (template, target), variants sorted by their
// parameters, cut into balanced batches of 4 to 16 (eight batches where that fits, so that the
// jobs have work without a batch serialising the build, and sixteen at most so that no program
// grows into AITER's 551 s module). Entries carry created_unix = 0 and compile_ms = 0 (no clock)
// and nothing path-dependent, so the same inputs give byte-identical files.
//
// The prebuilt tier also holds the compilers' identities (<vendor>.json in its compilers
// directory), so that a process in KJIT_MODE=prebuilt computes keys without a compiler installed.
// One per vendor: prebuilding into a tier with another compiler version leaves the older entries
// unused (their keys name the older compiler); prebuild into a fresh directory then.
#include "kjit/jit/target.hpp"
#include "kjit/runtime/runtime.hpp"
#include "kjit/templates/template.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace kjit::prebuild {

// What `kjit prebuild` and `cmake --install` take when the command line does not say: the level
// (PREBUILD_KERNELS), the targets (GPU_ARCHS) and the jobs (MAX_JOBS), each as set ("" when
// unset), read where every variable is (runtime/src/config.cpp); the command parses them.
struct Environment {
  std::string level;
  std::string targets;
  std::string max_jobs;
};
Environment environment_defaults();

struct TargetedInstance {
  Instance instance;
  jit::Target target;
  // "scale (N=4096,T=half) for gfx90a"
  std::string describe() const;
};

// One of N shares of a prebuild, so that N machines fill one remote tier together
// (`kjit prebuild --shard K/N`). A variant belongs to the share its identity hashes to: SHA-256 of
// TargetedInstance::describe() (template, canonical parameters, target) modulo N. Deterministic and
// independent of the order sets list variants in, of the jobs and of the machine; the N shares
// are disjoint and together the whole set.
struct Shard {
  std::size_t index = 0; // 0-based K-1
  std::size_t count = 1;
  // "K/N" with 1 <= K <= N; throws Error(bad_parameter) naming the form otherwise.
  static Shard parse(std::string_view text);
  bool holds(const TargetedInstance &variant) const;
};

// Variants of one template for one target, compiled as one program.
struct Batch {
  std::vector<TargetedInstance> variants;
};

// The most variants one program holds by default (above).
inline constexpr std::size_t kMaxBatch = 16;

// Sorts, removes duplicates and cuts `variants` into batches (above) of at most `max_batch`
// (1: every variant alone, the baseline the batching is measured against). Deterministic.
std::vector<Batch> make_batches(std::vector<TargetedInstance> variants,
                                std::size_t max_batch = kMaxBatch);

// The indices of `batches`, the costliest first (stable: equal costs keep their order), the order
// to hand them to jobs in so that no long batch starts last and serialises the end of the build.
// Cost is estimated as variants x the template's source and header bytes: each kernel costs the
// compiler roughly in proportion to the code it instantiates (a gemm variant far more than a
// scale). Only the order changes, never a batch, so entries do not depend on it.
std::vector<std::size_t> longest_first(const std::vector<Batch> &batches);

// What keys need of each vendor's compiler, read from the loaded compilers.
class Compilers {
public:
  // Loads the compiler of every vendor `targets` name and checks each target is supported.
  // Throws Error(compiler_unavailable), Error(unsupported_target).
  explicit Compilers(const std::vector<jit::Target> &targets);
  const jit::Compiler &of(Vendor vendor) const;

private:
  const jit::Compiler *compilers_[2] = {nullptr, nullptr};
};

// Whether every variant of `batch` has a valid entry in the tier at `root`.
bool up_to_date(const Batch &batch, const Compilers &compilers, const std::filesystem::path &root);

// A variant that did not build.
struct Failure {
  std::string what;          // "scale (N=..,T=..) for gfx90a: <error>"
  std::string template_name; // "scale"
  std::string log;           // the compiler's log, numbered with the template's own lines; or ""
  auto operator<=>(const Failure &) const = default;
};

struct BatchResult {
  std::size_t built = 0;         // entries written
  std::uint64_t bytes = 0;       // their size on disk
  double compile_ms = 0;         // time in the compiler
  std::vector<Failure> failures; // one per variant
};

// Compiles `batch` as one program and writes one entry per variant into the tier at `root`. When
// the program does not compile, each variant is compiled alone, so that one bad variant does not
// cost the others; those that fail are listed. Throws only when entries cannot be written.
BatchResult build(const Batch &batch, const Compilers &compilers,
                  const std::filesystem::path &root);

// Writes the identity of every compiler `compilers` holds into the tier at `root` and makes the
// tier readable by everyone (directories 0755, files 0644): it is a shared, read-only tier.
void finish_tier(const Compilers &compilers, const std::vector<Vendor> &vendors,
                 const std::filesystem::path &root);

} // namespace kjit::prebuild
