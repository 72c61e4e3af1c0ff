#include "kjit/runtime/prebuild.hpp"

#include "compiler_memo.hpp"
#include "header_manifests.hpp"
#include "include_scan.hpp"
#include "kjit/cache/disk_store.hpp"
#include "kjit/cache/key.hpp"
#include "kjit/error.hpp"
#include "variant.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <sys/stat.h>

namespace kjit::prebuild {

namespace fs = std::filesystem;

namespace {

// Batch sizes (prebuild.hpp): aim for this many batches per (template, target)...
constexpr std::size_t kBatchesPerGroup = 8;
// ...of at least this many variants (below it the compiler's fixed cost dominates), and at most
// kMaxBatch (one program's compile time grows with it).
constexpr std::size_t kMinBatch = 4;

// Variants that may share a program: one template (by name, then content, so that two set files'
// templates of one name stay apart) and one target. Sorts by name first.
std::string group_of(const TargetedInstance &variant) {
  const Template &tmpl = variant.instance.source_template();
  char fingerprint[34];
  std::snprintf(fingerprint, sizeof fingerprint, "%016llx%016llx",
                static_cast<unsigned long long>(tmpl.fingerprint().first),
                static_cast<unsigned long long>(tmpl.fingerprint().second));
  return tmpl.name() + '\n' + fingerprint + '\n' + variant.target.id();
}

// Prebuilt entries are stamped with no clock: the same inputs give the same bytes.
cache::Entry reproducible_entry(cache::Entry entry) {
  entry.header.created_unix = 0;
  entry.header.compile_ms = 0;
  return entry;
}

std::uint64_t size_on_disk(const fs::path &path) {
  std::error_code ignored;
  const auto size = fs::file_size(path, ignored);
  return ignored ? 0 : size;
}

} // namespace

std::string TargetedInstance::describe() const {
  return instance.source_template().name() + " (" + instance.canonical_params() + ") for " +
         target.id();
}

Shard Shard::parse(std::string_view text) {
  auto number = [](std::string_view digits, std::size_t &value) {
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return error == std::errc() && end == digits.data() + digits.size() && !digits.empty();
  };
  const std::size_t slash = text.find('/');
  std::size_t k = 0, n = 0;
  if (slash == std::string_view::npos || !number(text.substr(0, slash), k) ||
      !number(text.substr(slash + 1), n) || k < 1 || k > n)
    throw Error(Errc::bad_usage,
                "--shard '" + std::string(text) + "': expected K/N with 1 <= K <= N (\"2/8\")");
  return {k - 1, n};
}

bool Shard::holds(const TargetedInstance &variant) const {
  const std::string digest = cache::sha256_hex(variant.describe());
  std::uint64_t value = 0;
  std::from_chars(digest.data(), digest.data() + 16, value, 16);
  return value % count == index;
}

std::vector<Batch> make_batches(std::vector<TargetedInstance> variants, std::size_t max_batch) {
  // Grouped by template and target, each group in parameter order: the order sets list them in
  // does not change a program.
  std::map<std::string, std::map<std::string, TargetedInstance>> groups;
  for (TargetedInstance &variant : variants) {
    std::string params = variant.instance.canonical_params();
    groups[group_of(variant)].try_emplace(std::move(params), std::move(variant));
  }
  std::vector<Batch> batches;
  for (auto &[group, members] : groups) {
    const std::size_t n = members.size();
    max_batch = std::max<std::size_t>(max_batch, 1);
    const std::size_t size = std::clamp((n + kBatchesPerGroup - 1) / kBatchesPerGroup,
                                        std::min(kMinBatch, max_batch), max_batch);
    const std::size_t count = (n + size - 1) / size;
    auto next = members.begin();
    for (std::size_t b = 0; b < count; ++b) {
      // Balanced: the first n % count batches take one more.
      const std::size_t take = n / count + (b < n % count ? 1 : 0);
      Batch batch;
      for (std::size_t i = 0; i < take; ++i, ++next)
        batch.variants.push_back(std::move(next->second));
      batches.push_back(std::move(batch));
    }
  }
  return batches;
}

std::vector<std::size_t> longest_first(const std::vector<Batch> &batches) {
  auto cost = [](const Batch &batch) -> std::size_t {
    if (batch.variants.empty())
      return 0;
    const Template &tmpl = batch.variants.front().instance.source_template();
    std::size_t bytes = tmpl.source().size();
    for (const auto &header : tmpl.headers())
      bytes += header.content.size();
    return batch.variants.size() * bytes;
  };
  std::vector<std::size_t> costs, order(batches.size());
  for (std::size_t i = 0; i < batches.size(); ++i) {
    costs.push_back(cost(batches[i]));
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return costs[a] > costs[b]; });
  return order;
}

Compilers::Compilers(const std::vector<jit::Target> &targets) {
  static std::unique_ptr<jit::Compiler> loaded[2]; // once per process, as the Runtime does
  for (const jit::Target &target : targets) {
    auto &slot = loaded[static_cast<int>(target.vendor())];
    if (!slot)
      slot = jit::load_compiler(target.vendor());
    slot->check_supported(target);
    compilers_[static_cast<int>(target.vendor())] = slot.get();
  }
}

const jit::Compiler &Compilers::of(Vendor vendor) const {
  const jit::Compiler *compiler = compilers_[static_cast<int>(vendor)];
  if (compiler == nullptr)
    throw Error(Errc::compiler_unavailable,
                "no " + std::string(to_string(vendor)) + " compiler was loaded for this prebuild");
  return *compiler;
}

bool up_to_date(const Batch &batch, const Compilers &compilers, const fs::path &root) {
  const cache::DiskStore store(root, cache::Access::read_only);
  return std::all_of(
      batch.variants.begin(), batch.variants.end(), [&](const TargetedInstance &variant) {
        const kjit::VariantDescription described =
            describe_variant(variant.instance, variant.target,
                             CompilerIdentity::of(compilers.of(variant.target.vendor())));
        std::optional<cache::Key> key = described.key;
        if (described.has_include_dirs())
          key = find_by_headers(store, described.key, variant.target.id(),
                                described.request.include_dirs, true);
        return key && store.read(*key, variant.target.id()).status == cache::Lookup::Status::hit;
      });
}

BatchResult build(const Batch &batch, const Compilers &compilers, const fs::path &root) {
  BatchResult result;
  if (batch.variants.empty())
    return result;
  const cache::DiskStore store(root, cache::Access::read_write);
  const jit::Compiler &compiler = compilers.of(batch.variants.front().target.vendor());
  const CompilerIdentity identity = CompilerIdentity::of(compiler);

  std::vector<kjit::VariantDescription> described;
  for (const TargetedInstance &variant : batch.variants)
    described.push_back(describe_variant(variant.instance, variant.target, identity));
  // A batch is one template for one target: one program, so one set of headers for all of it.
  std::vector<cache::RecordedHeader> headers;
  std::vector<cache::Key> bases; // the keys of the variants' manifests
  const bool has_include_dirs = described.front().has_include_dirs();
  if (has_include_dirs) {
    headers = scan_includes(described.front().request,
                            batch.variants.front().instance.source_template().name());
    for (kjit::VariantDescription &variant : described) {
      bases.push_back(variant.key);
      variant = keyed_with_headers(std::move(variant), headers);
    }
  }

  // Compiles variants [first, first + count) as one program and writes their entries.
  auto compile = [&](std::size_t first, std::size_t count) {
    jit::CompileRequest request = described[first].request;
    request.name_expressions.clear();
    for (std::size_t i = first; i < first + count; ++i)
      request.name_expressions.push_back(described[i].request.name_expressions.front());
    const auto started = std::chrono::steady_clock::now();
    jit::CompileResult program =
        compile_variant(compiler, request, batch.variants[first].instance.source_template());
    result.compile_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    for (std::size_t i = first; i < first + count; ++i) {
      jit::CompileResult own{program.code, {program.lowered_names[i - first]}, {}};
      const cache::Entry entry = reproducible_entry(
          make_entry(batch.variants[i].instance, described[i], compiler, std::move(own), 0));
      store.write(entry);
      if (has_include_dirs)
        record_headers(store, bases[i], entry.header.target,
                       static_cast<std::uint32_t>(request.include_dirs.size()),
                       {entry.header.key, headers});
      result.bytes +=
          size_on_disk(store.layout().entry_path(entry.header.key, entry.header.target));
      ++result.built;
    }
  };

  try {
    compile(0, described.size());
  } catch (const Error &error) {
    if (error.code() != Errc::compile_error)
      throw;
    for (std::size_t i = 0; i < described.size(); ++i) {
      try {
        compile(i, 1);
      } catch (const Error &alone) {
        if (alone.code() != Errc::compile_error)
          throw;
        result.failures.push_back({batch.variants[i].describe() + ": " + alone.summary(),
                                   batch.variants[i].instance.source_template().name(),
                                   alone.detail()});
      }
    }
  }
  return result;
}

void finish_tier(const Compilers &compilers, const std::vector<Vendor> &vendors,
                 const fs::path &root) {
  const cache::DiskStore store(root, cache::Access::read_only);
  for (Vendor vendor : vendors)
    write_tier_identity(store, compilers.of(vendor));
  for (const fs::directory_entry &item :
       fs::recursive_directory_iterator(store.layout().version_directory())) {
    if (item.is_symlink())
      continue;
    const bool directory = item.is_directory();
    if (!directory && item.path().filename() == cache::Layout::kLockFileName)
      continue;
    ::chmod(item.path().c_str(), directory ? 0755 : 0644);
  }
  ::chmod(store.layout().version_directory().c_str(), 0755);
}

} // namespace kjit::prebuild
