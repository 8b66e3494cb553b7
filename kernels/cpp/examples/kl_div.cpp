//===- kl_div.cpp - Run the C++ DSL KL divergence and check it ------------===//
//
// This file implements an example: elementwise KL divergence p * (log p - log q) on the GPU
// with kiln::kernels::klDiv, checked against a double-precision host reference: the relative
// L1 error (sum |out - ref| / sum |ref|) and the largest error of one element relative to the
// scale of its terms, p * (|log p| + |log q|), must both stay below 1e-6.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using kiln::rt::Buffer;

/// Kernels run on the GPU, or on the host backend without one ($KILN_BACKEND=cpu forces it).
static bool onHost() { return kiln::lang::jit().isHost(); }

static bool run(int32_t n) {
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(1e-3f, 1.0f);
  std::vector<float> p(n), q(n), out(n);
  for (int32_t i = 0; i < n; ++i) {
    p[i] = dist(rng);
    q[i] = dist(rng);
  }
  size_t bytes = size_t(n) * sizeof(float);
  Buffer dp(bytes, onHost()), dq(bytes, onHost()), dout(bytes, onHost());
  dp.copyFromHost(p.data(), bytes);
  dq.copyFromHost(q.data(), bytes);
  dout.fill32(0xffffffffu);
  kiln::kernels::klDiv(nullptr, dp.get(), dq.get(), dout.get(), n);
  if (!onHost())
    kiln::rt::synchronize();
  dout.copyToHost(out.data(), bytes);
  double errSum = 0, refSum = 0, worst = 0;
  for (int32_t i = 0; i < n; ++i) {
    double lp = std::log(double(p[i])), lq = std::log(double(q[i]));
    double ref = double(p[i]) * (lp - lq);
    double err = std::fabs(double(out[i]) - ref);
    if (std::isnan(out[i]))
      err = INFINITY;
    errSum += err;
    refSum += std::fabs(ref);
    worst = std::max(worst, err / (double(p[i]) * (std::fabs(lp) + std::fabs(lq))));
  }
  double rel = errSum / refSum;
  bool ok = rel < 1e-6 && worst < 1e-6;
  std::printf("kl_div n=%d: %s (relative L1 error %.3g, worst element %.3g)\n", n,
              ok ? "PASS" : "FAIL", rel, worst);
  return ok;
}

int main() {
  try {
    std::printf("%s on the %s\n", "kl_div", onHost() ? "host (CPU backend)" : "GPU");
    bool ok = run(1 << 20);
    ok &= run(999999);
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("kl_div: FAIL: %s\n", e.what());
    return 1;
  }
}
