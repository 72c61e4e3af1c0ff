#pragma once
// Row softmax over `rows` rows of `cols` contiguous elements, computed in float and rounded once
// to T. Asynchronous on `stream` of the Runtime's default device; rows == 0 launches nothing.
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <span>
#include <vector>

namespace kjit::ops {

// out[r, i] = exp(scale * x[r, i]) / sum_j exp(scale * x[r, j]), over the columns the mask leaves
// visible (computed with the row's maximum subtracted, so large inputs do not overflow).
//
// causal_queries = 0: no mask. causal_queries = q > 0: attention scores of q queries over `cols`
// keys, the last query aligned with the last key, for rows / q matrices stacked row-major
// ([batch * heads * q, cols]): row r is query r % q and sees columns i <= r % q + cols - q; the
// other columns are 0. A row that sees no column (q > cols) is all zeros.
//
// Throws Error(bad_argument) for a null pointer, rows < 0, cols outside [1, 32768], scale not
// finite, causal_queries < 0 or not dividing rows; what Runtime::kernel throws. out may be x.
template <Element T>
void softmax(Runtime &rt, T *out, const T *x, float scale, int rows, int cols,
             int causal_queries = 0, Stream stream = nullptr);

namespace reference {

// In double precision; masked columns and fully masked rows as above.
std::vector<double> softmax(std::span<const double> x, double scale, int rows, int cols,
                            int causal_queries = 0);

} // namespace reference

} // namespace kjit::ops
