#pragma once
// The on-disk layout of one tier (the user cache or a prebuilt tier): the one place that names
// kjit's paths. The library, the CLI and, through `kjit cache stats --json` ("layout"), scripts
// ask it; nothing else spells a path.
//
//   <root>/v<N>/                                       the version directory (N: the entry format)
//   <root>/v<N>/<target dir>/<2 hex>/<key hex>.kjit    an entry (its shard: the key's first 2 hex)
//   <root>/v<N>/<target dir>/<2 hex>/<base key hex>.manifest
//                                 a variant's header manifest (header_manifest.hpp), beside entries
//   <root>/v<N>/lock              the per-key OFD lock file (file_lock.hpp)
//   <root>/v<N>/stats/            the user tier's statistics files (stats.hpp)
//   <root>/v<N>/compilers/        the compiler identities keys were made with
//   <root>/v<N>/tuning/<target dir>/<key hex>.json     a tuning record
//                                 (kjit/runtime/tuning_table.hpp)
//   <root>/v<N>/tuning/lock       the tuning table's per-key lock
//   .<stem>.tmp.<pid>.<random>.<n>  a writer's temp file, beside the file it becomes
//                                 (private_file.hpp); <stem> is that file's key hex
//
// <target dir> is the canonical target id with ':' replaced by '_' ("gfx90a_sramecc+_xnack-").
// Key text never becomes a path: only the validated target id and key hex do. A target id that is
// not canonical in jit::Target's grammar ("sm_90a", "gfx90a:sramecc+:xnack-", features in name
// order) is refused: entries come from archives and remotes, and a target such as "tuning",
// "lock" or ".." would name kjit's own folders or leave the tier.
#include "kjit/cache/key.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace kjit::cache {

class Layout {
public:
  explicit Layout(std::filesystem::path root);

  const std::filesystem::path &root() const { return root_; }
  // <root>/v<N>: where this entry format's files live, the entries' target directories among them.
  const std::filesystem::path &version_directory() const { return version_directory_; }
  // "v<N>": a new entry format gets a tree of its own, so kjit versions can share one root.
  static std::string version_name();

  std::filesystem::path lock_path() const { return version_directory_ / kLockFileName; }
  std::filesystem::path stats_directory() const { return version_directory_ / "stats"; }
  std::filesystem::path compilers_directory() const { return version_directory_ / "compilers"; }
  std::filesystem::path tuning_directory() const { return version_directory_ / "tuning"; }
  // The lock file's name in the version directory and in the tuning directory.
  static constexpr std::string_view kLockFileName = "lock";

  // Each throws Error(bad_target) for a target id that cannot name a directory (above).
  std::filesystem::path entry_path(const Key &key, std::string_view target) const;
  std::filesystem::path manifest_path(const Key &base, std::string_view target) const;
  // A tuning record's path relative to tuning_directory(): "<target dir>/<key hex>.json".
  static std::filesystem::path tuning_record_name(const Key &key, std::string_view target);

  // The directory name of a target id, or nullopt for one that is not a canonical target id.
  static std::optional<std::string> target_directory(std::string_view target);
  // The target id a target directory name stands for: the inverse of the ':' -> '_' mapping, where
  // a '_' was a ':' exactly when it introduces a feature (a part ending in '+' or '-'):
  // "gfx90a_sramecc+_xnack-" -> "gfx90a:sramecc+:xnack-", while "sm_90a" stays "sm_90a".
  static std::string target_of_directory(std::string_view directory);
  // Why target_directory refuses `target`: the one line every refusal of a target id says.
  static std::string invalid_target_problem(std::string_view target);

  // What a listing meets in a target directory and in a shard directory.
  static bool is_shard_name(std::string_view name); // two hex digits
  // "<key hex>.kjit" in the shard of its first two hex digits.
  static bool is_entry_name(std::string_view name, std::string_view shard);
  // "<base key hex>.manifest" in the shard of its first two hex digits.
  static bool is_manifest_name(std::string_view name, std::string_view shard);
  // The key an entry or manifest file name holds; only for a name is_entry_name or
  // is_manifest_name accepts.
  static std::string_view entry_key_hex(std::string_view entry_name);
  // A writer's temp file (below), left behind by a crash unless renamed.
  static bool is_temp_name(std::string_view name);
  // ".<stem>.tmp.": what a temp file name starts with; the writer appends what makes it unique.
  static std::string temp_prefix(std::string_view stem);

private:
  std::filesystem::path root_;
  std::filesystem::path version_directory_;
};

} // namespace kjit::cache
