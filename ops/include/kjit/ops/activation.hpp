#pragma once
// Activations, computed in float and rounded once to T. Asynchronous on `stream` of the Runtime's
// default device; an empty input launches nothing. Each throws Error(bad_argument) for a null
// pointer or a negative size; what Runtime::kernel throws; and nothing else.
#include "kjit/ops/element.hpp"
#include "kjit/runtime/runtime.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kjit::ops {

// Element-wise over n elements: out[i] = f(x[i]). out may be x.
// silu(x) = x * sigmoid(x); gelu(x) = x * Phi(x) (the exact form, with erf); gelu_tanh: torch's
// approximate="tanh"; relu(x) = max(x, 0) (NaN stays NaN); sigmoid(x) = 1 / (1 + e^-x).
template <Element T>
void silu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream = nullptr);
template <Element T>
void gelu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream = nullptr);
template <Element T>
void gelu_tanh(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream = nullptr);
template <Element T>
void relu(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream = nullptr);
template <Element T>
void sigmoid(Runtime &rt, T *out, const T *x, std::int64_t n, Stream stream = nullptr);

// Gated (vLLM's act_and_mul): x is [rows, 2 * d], out is [rows, d] and must not overlap x;
// out[r, i] = f(x[r, i]) * x[r, d + i].
template <Element T>
void silu_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream = nullptr);
template <Element T>
void gelu_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream = nullptr);
template <Element T>
void gelu_tanh_and_mul(Runtime &rt, T *out, const T *x, int rows, int d, Stream stream = nullptr);

// The same functions in double precision, on the host: what the tests compare with.
namespace reference {

double silu(double x);
double gelu(double x);
double gelu_tanh(double x);
double relu(double x);
double sigmoid(double x);

// out[r, i] = f(x[r, i]) * x[r, d + i] for x [rows, 2 * d].
std::vector<double> gated(double (*f)(double), std::span<const double> x, int rows, int d);

} // namespace reference

} // namespace kjit::ops
