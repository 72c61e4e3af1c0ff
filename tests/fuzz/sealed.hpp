#pragma once
// For the fuzz targets of formats that end in kjit's XXH3-128 checksum (entries, archives): each
// input is checked as it is, then with its last 16 bytes replaced by the checksum of the rest, so
// that mutations reach what lies behind the checksum instead of stopping there.
#include "cache/src/file_format.hpp"

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace kjit::fuzz {

template <class Check> void check_as_is_and_sealed(std::span<const std::byte> bytes, Check check) {
  namespace format = kjit::cache::format;
  check(bytes);
  if (bytes.size() < format::checksum_size)
    return;
  std::vector<std::byte> sealed(bytes.begin(), bytes.end());
  const format::Checksum checksum =
      format::checksum_of(std::span(sealed).first(bytes.size() - format::checksum_size));
  std::copy(checksum.begin(), checksum.end(), sealed.end() - format::checksum_size);
  check(std::span<const std::byte>(sealed));
}

} // namespace kjit::fuzz
