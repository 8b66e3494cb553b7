//===- MatmulCheck.h - Inputs and a reference for the matmul example -*- C++ -*-===//
//
// This file holds what kernels/cpp/examples/matmul.cpp and test/unit/LangMatmulTest.cpp share
// to check kiln::kernels::matmul: fp16 inputs whose products and sums are exact in fp32, and
// the count of outputs that differ from a double-precision reference by more than fp16's
// rounding.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KERNELS_CPP_EXAMPLES_MATMULCHECK_H
#define KILN_KERNELS_CPP_EXAMPLES_MATMULCHECK_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::examples {

/// fp16 bits of `x`, a multiple of 1/64 below 2^15 in magnitude (exact in fp16).
inline uint16_t toHalf(float x) {
  if (x == 0.0f)
    return 0;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int exp = int((bits >> 23) & 0xff) - 127 + 15;
  return uint16_t(((bits >> 16) & 0x8000u) | uint32_t(exp) << 10 | ((bits >> 13) & 0x3ffu));
}

inline float fromHalf(uint16_t h) {
  int exp = (h >> 10) & 0x1f;
  float v = exp == 0 ? std::ldexp(float(h & 0x3ff), -24)
                     : std::ldexp(1024.0f + float(h & 0x3ff), exp - 25);
  return (h & 0x8000) ? -v : v;
}

/// Row-major fp16 a (M x K) and b (K x N) of multiples of 1/8 in [-1, 1], as bits and floats,
/// and c (M x N) poisoned with NaN.
struct MatmulInputs {
  int32_t M, N, K;
  std::vector<uint16_t> a, b, c;
  std::vector<float> af, bf;

  MatmulInputs(int32_t M, int32_t N, int32_t K)
      : M(M), N(N), K(K), a(size_t(M) * K), b(size_t(K) * N), c(size_t(M) * N, 0x7e00),
        af(a.size()), bf(b.size()) {
    for (size_t i = 0; i < a.size(); ++i)
      a[i] = toHalf(af[i] = float(int(i * 7 % 17) - 8) / 8.0f);
    for (size_t i = 0; i < b.size(); ++i)
      b[i] = toHalf(bf[i] = float(int(i * 5 % 13) - 6) / 8.0f);
  }

  /// Outputs in `c` further from the double-precision product than fp16 rounds (the sums
  /// are exact in fp32); `relError` gets ||c - ref|| / ||ref||.
  int64_t countWrong(double *relError = nullptr) const {
    double err = 0, norm = 0;
    int64_t bad = 0;
    for (int32_t i = 0; i < M; ++i)
      for (int32_t j = 0; j < N; ++j) {
        double ref = 0;
        for (int32_t k = 0; k < K; ++k)
          ref += double(af[size_t(i) * K + k]) * bf[size_t(k) * N + j];
        double got = fromHalf(c[size_t(i) * N + j]);
        bad += !(std::fabs(got - ref) <= std::ldexp(std::fabs(ref), -11) + 1e-6);
        err += (got - ref) * (got - ref);
        norm += ref * ref;
      }
    if (relError)
      *relError = std::sqrt(err / (norm > 0 ? norm : 1));
    return bad;
  }
};

} // namespace kiln::examples

#endif // KILN_KERNELS_CPP_EXAMPLES_MATMULCHECK_H
