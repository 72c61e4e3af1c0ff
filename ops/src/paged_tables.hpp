#pragma once
// The page-table check that paged_attention_decode and flash_attention_paged share, with each
// operator's name and the name of its lengths array in the messages.
#include "kjit/runtime/device.hpp"

#include <cstdint>
#include <span>
#include <string_view>

namespace kjit::ops::detail {

// Throws Error(bad_argument) "kjit::ops::<op>: ..." naming the first refused entry: a length
// (`lens_name`[s]) outside [0, max_len] (0: max_blocks * page_size), or a page of a sequence's
// first lens[s] tokens outside [0, num_blocks).
void check_page_tables(std::span<const std::int32_t> block_tables,
                       std::span<const std::int32_t> lens, int max_blocks, int page_size,
                       int num_blocks, int max_len, std::string_view op,
                       std::string_view lens_name);

// Waits for `device`, copies `batch` lengths and [batch, max_blocks] tables to the host and checks
// them as check_page_tables does.
void check_device_page_tables(const Device &device, const std::int32_t *block_tables,
                              const std::int32_t *lens, int batch, int max_blocks, int page_size,
                              int num_blocks, int max_len, std::string_view op,
                              std::string_view lens_name);

} // namespace kjit::ops::detail
