//===- CacheWorker.cpp - One process of the concurrent-cache test ---------===//
//
// This file implements kiln-cache-worker: compile a kernel through the JIT into a given cache
// directory and print a hash of the binary (and, with a GPU, run it and check the result), so
// that the test can start many at once and compare.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>

using namespace kiln::rt;

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kiln-cache-worker <kernel.mlir> <cache-dir>\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    // The device's target when there is one (sm_90a on an H100), so the run below reuses it.
    JIT jit(hasGPU() ? getArch() : "sm_90", argv[2]);
    std::vector<char> cubin = jit.compileToCubin(ss.str());
    uint64_t hash = 14695981039346656037ull; // FNV-1a over the binary
    for (char c : cubin)
      hash = (hash ^ uint8_t(c)) * 1099511628211ull;
    std::printf("%016llx compiles=%u diskHits=%u\n", (unsigned long long)hash,
                jit.getStats().compiles, jit.getStats().diskHits);
    if (hasGPU()) {
      // Run what this process got: out = x + y over 4096 elements.
      const Kernel &k = jit.get(ss.str());
      const int n = 4096;
      std::vector<float> x(n), y(n), out(n);
      for (int i = 0; i < n; ++i) {
        x[i] = i * 0.5f;
        y[i] = 1.0f / (i + 1);
      }
      DeviceBuffer dx(n * 4), dy(n * 4), dout(n * 4);
      dx.copyFromHost(x.data(), n * 4);
      dy.copyFromHost(y.data(), n * 4);
      dout.fill32(0xFFFFFFFFu);
      k.launch({n / 1024, 1, 1}, nullptr,
               {Arg::ptr(dx.get()), Arg::ptr(dy.get()), Arg::ptr(dout.get()), Arg::i32(n)});
      synchronize();
      dout.copyToHost(out.data(), n * 4);
      for (int i = 0; i < n; ++i)
        if (out[i] != x[i] + y[i]) {
          std::printf("wrong result at %d\n", i);
          return 1;
        }
      std::printf("gpu result ok\n");
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
