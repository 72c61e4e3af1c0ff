#include "compiler_releases.hpp"

#include <algorithm>
#include <sstream>

namespace kjit::jit {
namespace {

// Read from each release's own compiler with `kjit targets --json`: ROCm 5.2 (Debian 12), 5.7
// (the GPU machines' image), 6.4 (Debian sid) and 7.2 (Debian experimental); CUDA 13.0. A test
// compares the loaded compiler's list with its row, so a row cannot drift from what the release
// lists (tests/jit/compiler_releases_test.cpp).
const std::vector<KnownRelease> amd_releases = {
    {"5.2", "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 "
            "gfx805 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx1010 gfx1011 "
            "gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036"},
    {"5.7",
     "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 "
     "gfx805 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx940 gfx941 "
     "gfx942 gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 "
     "gfx1036 gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151"},
    {"6.4", "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 "
            "gfx805 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx942 gfx950 "
            "gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 "
            "gfx1036 gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153 gfx1200 "
            "gfx1201 gfx9-generic gfx9-4-generic gfx10-1-generic gfx10-3-generic gfx11-generic "
            "gfx12-generic"},
    {"7.2", "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 "
            "gfx805 gfx810 gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c gfx942 gfx950 "
            "gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 "
            "gfx1036 gfx1100 gfx1101 gfx1102 gfx1103 gfx1150 gfx1151 gfx1152 gfx1153 gfx1200 "
            "gfx1201 gfx1250 gfx1251 gfx9-generic gfx9-4-generic gfx10-1-generic gfx10-3-generic "
            "gfx11-generic gfx12-generic"},
};

const std::vector<KnownRelease> nvidia_releases = {
    {"13.0",
     "sm_75 sm_80 sm_86 sm_87 sm_88 sm_89 sm_90 sm_90a sm_100 sm_100a sm_100f sm_103 sm_103a "
     "sm_103f sm_110 sm_110a sm_110f sm_120 sm_120a sm_120f sm_121 sm_121a sm_121f"},
};

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> words;
  std::istringstream stream{std::string(text)};
  for (std::string word; stream >> word;)
    words.push_back(word);
  return words;
}

// "a", "a and b", "a, b and c".
std::string join_with_and(const std::vector<std::string> &items) {
  std::string joined;
  for (std::size_t i = 0; i < items.size(); ++i)
    joined += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return joined;
}

// NVIDIA's release notes rather than a list read from a release: CUDA 13.0 supports Turing
// (sm_75) and later, so Maxwell, Pascal and Volta were last supported by CUDA 12; and CUDA 13.0
// renumbered sm_101 as sm_110.
std::string nvidia_documented_support(const std::string &arch) {
  static const std::vector<std::string> dropped_in_cuda_13 = {"sm_50", "sm_52", "sm_53", "sm_60",
                                                              "sm_61", "sm_62", "sm_70", "sm_72"};
  if (std::find(dropped_in_cuda_13.begin(), dropped_in_cuda_13.end(), arch) !=
      dropped_in_cuda_13.end())
    return "NVRTC of CUDA 12 was the last to support it (CUDA 13 begins at sm_75)";
  if (arch.rfind("sm_101", 0) == 0)
    return "CUDA 13 renumbered sm_101 as sm_110";
  return "";
}

} // namespace

const std::vector<KnownRelease> &known_releases(Vendor vendor) {
  return vendor == Vendor::amd ? amd_releases : nvidia_releases;
}

std::string release_name(Vendor vendor, std::string_view version) {
  return (vendor == Vendor::amd ? "hiprtc, ROCm " : "nvrtc ") + std::string(version);
}

std::vector<std::string> known_release_archs(Vendor vendor, std::string_view release) {
  for (const KnownRelease &known : known_releases(vendor))
    if (release_name(vendor, known.version) == release)
      return split(known.archs);
  return {};
}

std::string releases_supporting(Vendor vendor, const std::string &arch) {
  std::vector<std::string> listing;
  for (const KnownRelease &known : known_releases(vendor)) {
    const std::vector<std::string> archs = split(known.archs);
    if (std::find(archs.begin(), archs.end(), arch) != archs.end())
      listing.emplace_back(known.version);
  }
  if (listing.empty())
    return vendor == Vendor::nvidia ? nvidia_documented_support(arch) : "";
  return (vendor == Vendor::amd ? "ROCm " : "NVRTC ") + join_with_and(listing) + " " +
         (listing.size() == 1 ? "lists" : "list") + " it";
}

} // namespace kjit::jit
