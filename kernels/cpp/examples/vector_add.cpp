//===- vector_add.cpp - Run the C++ DSL vector add and check it -----------===//
//
// This file implements an example: allocate two vectors on the GPU, add them with
// kiln::kernels::vectorAdd and compare the result bit for bit with the host's float sums,
// for a size that is a multiple of 16 and one that is not (two specializations).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using kiln::rt::DeviceBuffer;

static bool run(int32_t n) {
  std::mt19937 rng(n);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  std::vector<float> x(n), y(n), out(n), ref(n);
  for (int32_t i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
    ref[i] = x[i] + y[i];
  }
  size_t bytes = size_t(n) * sizeof(float);
  DeviceBuffer dx(bytes), dy(bytes), dout(bytes);
  dx.copyFromHost(x.data(), bytes);
  dy.copyFromHost(y.data(), bytes);
  dout.fill32(0xffffffffu);
  kiln::kernels::vectorAdd(nullptr, dx.get(), dy.get(), dout.get(), n);
  kiln::rt::synchronize();
  dout.copyToHost(out.data(), bytes);
  int32_t mismatches = 0;
  for (int32_t i = 0; i < n; ++i)
    mismatches += std::memcmp(&out[i], &ref[i], sizeof(float)) != 0;
  std::printf("vector_add n=%d: %s (%d mismatches)\n", n, mismatches ? "FAIL" : "PASS", mismatches);
  return mismatches == 0;
}

int main() {
  if (!kiln::rt::hasGPU()) {
    std::printf("vector_add: skipped: no GPU\n");
    return 0;
  }
  try {
    bool ok = run(1 << 20);
    ok &= run(1000003);
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("vector_add: FAIL: %s\n", e.what());
    return 1;
  }
}
