#pragma once
// The tuning records the table's tests store, share and refuse: rms_norm problems on an H100.
#include "kjit/runtime/tuning_table.hpp"
#include "kjit/templates/library.hpp"

#include <string>

namespace kjit::testing {

inline const TuningDevice h100{"sm_90a", 132, "NVIDIA H100 80GB HBM3"};

inline TuningKey rms_key(int hidden, TuningDevice device = h100,
                         std::string compiler = "nvrtc 13.0") {
  return TuningKey::of(templates::find("rms_norm"), {{"T", "bfloat16"}, {"HIDDEN", hidden}},
                       {{"rows", 4096}}, std::move(device), std::move(compiler));
}

inline TuningRecord record_for(TuningKey key) {
  return {std::move(key),
          {{{"THREADS", 256}, {"VEC", 8}}, 3.25},
          {{{{"THREADS", 512}, {"VEC", 8}}, 3.5}, {{{"THREADS", 128}, {"VEC", 4}}, 4.0}},
          1764000000};
}

} // namespace kjit::testing
