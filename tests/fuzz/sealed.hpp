#pragma once
// For the fuzz targets of formats that end in kjit's XXH3-128 checksum (entries, archives): each
// input is checked as it is, then with its last 16 bytes replaced by the checksum of the rest, so
// that mutations reach what lies behind the checksum instead of stopping there.
#include "tests/support/file_format.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace kjit::fuzz {

template <class Check> void check_as_is_and_sealed(std::span<const std::byte> bytes, Check check) {
  check(bytes);
  if (bytes.size() < kjit::testing::checksum_size)
    return;
  const std::vector<std::byte> sealed = kjit::testing::sealed(bytes);
  check(std::span<const std::byte>(sealed));
}

} // namespace kjit::fuzz
