//===- matmul.cpp - Run the C++ DSL tutorial matmul and check it ----------===//
//
// This file implements an example: c = a @ b through kiln::kernels::matmul (Triton's
// tutorial 03 in the C++ DSL) on fp16 matrices whose products are exact in fp32, checked
// against a double-precision reference. On an sm_90a GPU the matmul runs through the TMA
// (tensor maps the compiler appends, encoded at launch); shapes whose row strides are not a
// multiple of 16 bytes take the cp.async rings. On the host backend the tiles are small.
// With `--bench M N K [reps]` on a GPU it prints the kernel's time and TFLOP/s instead.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "MatmulCheck.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using kiln::rt::Buffer;

static bool onHost() { return kiln::lang::jit().isHost(); }

static kiln::kernels::MatmulConfig config() {
  kiln::kernels::MatmulConfig cfg;
  if (onHost()) // compiling large dots for the host takes long
    cfg.blockM = cfg.blockN = cfg.blockK = 32, cfg.warps = 4, cfg.groupM = 2;
  return cfg;
}

static bool run(int32_t M, int32_t N, int32_t K) {
  kiln::examples::MatmulInputs in(M, N, K);
  Buffer da(in.a.size() * 2, onHost()), db(in.b.size() * 2, onHost()),
      dc(in.c.size() * 2, onHost());
  da.copyFromHost(in.a.data(), in.a.size() * 2);
  db.copyFromHost(in.b.data(), in.b.size() * 2);
  dc.copyFromHost(in.c.data(), in.c.size() * 2); // poisoned
  kiln::kernels::matmul(nullptr, da.get(), db.get(), dc.get(), M, N, K, config());
  if (!onHost())
    kiln::rt::synchronize();
  dc.copyToHost(in.c.data(), in.c.size() * 2);
  double rel = 0;
  int64_t bad = in.countWrong(&rel);
  std::printf("matmul %dx%dx%d: %s (||c - ref|| / ||ref|| = %.2e, %lld wrong elements)\n", M, N, K,
              bad ? "FAIL" : "PASS", rel, (long long)bad);
  return bad == 0;
}

/// Times the default configuration at M x N x K: median of `reps` launches after warm-up.
static int bench(int32_t M, int32_t N, int32_t K, int reps) {
  Buffer da(size_t(M) * K * 2, false), db(size_t(K) * N * 2, false), dc(size_t(M) * N * 2, false);
  da.fill32(0x3c003c00u), db.fill32(0x3c003c00u); // ones
  kiln::kernels::MatmulConfig cfg;
  for (int i = 0; i < 10; ++i)
    kiln::kernels::matmul(nullptr, da.get(), db.get(), dc.get(), M, N, K, cfg);
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    kiln::rt::EventTimer timer;
    timer.start(nullptr);
    kiln::kernels::matmul(nullptr, da.get(), db.get(), dc.get(), M, N, K, cfg);
    ms.push_back(timer.stop(nullptr));
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  std::printf("matmul %dx%dx%d: %.4f ms, %.1f TFLOP/s\n", M, N, K, med,
              2.0 * M * N * K / (med * 1e-3) / 1e12);
  return 0;
}

int main(int argc, char **argv) {
  try {
    if (argc >= 5 && std::string(argv[1]) == "--bench")
      return bench(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]),
                   argc >= 6 ? std::atoi(argv[5]) : 50);
    std::printf("%s on the %s\n", "matmul", onHost() ? "host (CPU backend)" : "GPU");
    bool ok = onHost() ? run(64, 96, 80) && run(50, 70, 40)
                       : run(512, 512, 512) && run(1000, 776, 328) && run(300, 260, 200);
    return ok ? 0 : 1;
  } catch (const std::exception &e) {
    std::printf("matmul: FAIL: %s\n", e.what());
    return 1;
  }
}
