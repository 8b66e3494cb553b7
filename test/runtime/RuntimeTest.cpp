//===- RuntimeTest.cpp - Tests of the JIT cache and launches --------------===//
//
// This file tests kiln::rt: the disk cache survives truncated and corrupted entries and eight
// processes compiling one kernel at once; launches check their arguments; without a GPU every
// device operation raises a clear error. Tests named GPU* need a device and skip without one.
//
//===----------------------------------------------------------------------===//

#include "kiln/Runtime.h"

#include "gtest/gtest.h"
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace kiln::rt;
namespace fs = std::filesystem;

namespace {

/// The kernels directory and cache worker: compiled-in paths, overridable from the environment
/// (the GPU machine runs the binaries from another checkout path).
std::string kernelsDir() {
  const char *env = std::getenv("KILN_KERNELS_DIR");
  return env ? env : KILN_KERNELS_DIR;
}
std::string cacheWorker() {
  const char *env = std::getenv("KILN_CACHE_WORKER");
  return env ? env : KILN_CACHE_WORKER;
}

std::string readKernel(const char *name) {
  std::ifstream in(kernelsDir() + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A fresh cache directory per test, removed afterwards.
struct TempCache {
  std::string path;
  TempCache() {
    char tmpl[] = "/tmp/kiln-cache-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempCache() { fs::remove_all(path); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (auto &e : fs::directory_iterator(path))
      out.push_back(e.path());
    return out;
  }
};

bool isELF(const std::vector<char> &bytes) {
  return bytes.size() > 4 && bytes[0] == 0x7f && bytes[1] == 'E' && bytes[2] == 'L' &&
         bytes[3] == 'F';
}

TEST(JITCache, CompilesOnceThenHitsMemoryThenDisk) {
  TempCache cache;
  std::string src = readKernel("vector_add.mlir");
  JIT first("sm_90", cache.path);
  std::vector<char> a = first.compileToCubin(src);
  EXPECT_TRUE(isELF(a));
  first.compileToCubin(src);
  EXPECT_EQ(first.getStats().compiles, 1u);
  EXPECT_EQ(first.getStats().memoryHits, 1u);
  ASSERT_EQ(cache.entries().size(), 1u) << "one entry, no temporary files left behind";
  JIT second("sm_90", cache.path);
  EXPECT_EQ(second.compileToCubin(src), a);
  EXPECT_EQ(second.getStats().diskHits, 1u);
  EXPECT_EQ(second.getStats().compiles, 0u);
}

TEST(JITCache, KeyCoversOptionsAndArch) {
  TempCache cache;
  std::string src = readKernel("vector_add.mlir");
  JIT jit("sm_90", cache.path);
  kiln::CompileOptions options;
  jit.compileToCubin(src, options);
  options.numWarps = 8;
  jit.compileToCubin(src, options);
  options.numStages = 2; // options travel beside the module: each is part of the key
  jit.compileToCubin(src, options);
  options.maxnreg = 64;
  jit.compileToCubin(src, options);
  JIT other("sm_80", cache.path);
  other.compileToCubin(src);
  EXPECT_EQ(cache.entries().size(), 5u);
  EXPECT_EQ(jit.getStats().compiles + other.getStats().compiles, 5u);
}

/// Damages the single cache entry with `damage`, then checks a new JIT recompiles, returns
/// the same binary and repairs the entry.
void expectRecovery(void (*damage)(const fs::path &)) {
  TempCache cache;
  std::string src = readKernel("kl_div.mlir");
  std::vector<char> good = JIT("sm_90", cache.path).compileToCubin(src);
  ASSERT_EQ(cache.entries().size(), 1u);
  damage(cache.entries()[0]);
  JIT jit("sm_90", cache.path);
  EXPECT_EQ(jit.compileToCubin(src), good);
  EXPECT_EQ(jit.getStats().corruptEntries, 1u);
  EXPECT_EQ(jit.getStats().compiles, 1u);
  JIT after("sm_90", cache.path);
  after.compileToCubin(src);
  EXPECT_EQ(after.getStats().diskHits, 1u) << "the damaged entry was replaced";
}

TEST(JITCache, TruncatedEntryIsRecompiled) {
  expectRecovery([](const fs::path &p) { fs::resize_file(p, fs::file_size(p) / 2); });
}

TEST(JITCache, EmptyEntryIsRecompiled) {
  expectRecovery([](const fs::path &p) { fs::resize_file(p, 0); });
}

TEST(JITCache, FlippedByteIsRecompiled) {
  expectRecovery([](const fs::path &p) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(fs::file_size(p) / 2);
    char c;
    f.get(c);
    f.seekp(fs::file_size(p) / 2);
    f.put(char(c ^ 0x5a));
  });
}

TEST(JITCache, EightProcessesCompileOneKernelAtOnce) {
  TempCache cache;
  std::string kernel = kernelsDir() + "/vector_add.mlir";
  std::vector<FILE *> procs;
  for (int i = 0; i < 8; ++i) {
    std::string cmd = cacheWorker() + " " + kernel + " " + cache.path;
    procs.push_back(popen(cmd.c_str(), "r"));
    ASSERT_NE(procs.back(), nullptr);
  }
  std::set<std::string> hashes;
  for (FILE *p : procs) {
    char line[256] = {0};
    std::string out;
    while (fgets(line, sizeof(line), p))
      out += line;
    EXPECT_EQ(pclose(p), 0) << out;
    hashes.insert(out.substr(0, 16));
    if (hasGPU())
      EXPECT_NE(out.find("gpu result ok"), std::string::npos) << out;
  }
  EXPECT_EQ(hashes.size(), 1u) << "every process got the same binary";
  // With a GPU each worker also loads the kernel: a second entry, the PTX the driver
  // assembles as a whole program.
  ASSERT_EQ(cache.entries().size(), hasGPU() ? 2u : 1u)
      << "one entry per payload, no temporary files left behind";
  JIT jit(hasGPU() ? getArch() : "sm_90", cache.path);
  jit.compileToCubin(readKernel("vector_add.mlir"));
  EXPECT_EQ(jit.getStats().diskHits, 1u) << "the published entry verifies";
}

TEST(JITCache, CompileErrorCarriesDiagnostics) {
  TempCache cache;
  JIT jit("sm_90", cache.path);
  try {
    jit.compile("func.func @k(%x: !kiln.ptr<f32>) {\n  %r = kiln.make_range {end = 100 : i32, "
                "start = 0 : i32} : tensor<100xi32>\n  return\n}\n");
    FAIL() << "expected an error";
  } catch (const kiln::CompileError &e) {
    // The text does not parse (ops verify as they parse): no kernel name yet.
    EXPECT_EQ(std::string(e.what()).rfind("kernel.mlir:2:8: error: ", 0), 0u) << e.what();
    EXPECT_EQ(e.getLine(), 2u);
    EXPECT_EQ(e.getColumn(), 8u);
    EXPECT_NE(e.getMessage().find("power of two"), std::string::npos) << e.getMessage();
    EXPECT_NE(e.getDiagnostics().find("kernel.mlir:2:8: error: "), std::string::npos)
        << e.getDiagnostics();
  }
}

TEST(Launch, WrongNumberOfArguments) {
  TempCache cache;
  JIT jit("sm_90", cache.path);
  const Kernel &k = jit.compile(readKernel("vector_add.mlir"));
  try {
    k.launch({1, 1, 1}, nullptr, {Arg::ptr(0), Arg::ptr(0), Arg::i32(3)});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "kernel 'vector_add' expects 4 arguments (pointer, pointer, "
                           "pointer, i32), got 3");
  }
}

TEST(Launch, WrongArgumentKind) {
  TempCache cache;
  JIT jit("sm_90", cache.path);
  const Kernel &k = jit.compile(readKernel("vector_add.mlir"));
  try {
    k.launch({1, 1, 1}, nullptr, {Arg::ptr(0), Arg::ptr(0), Arg::ptr(0), Arg::f32(1.0f)});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "kernel 'vector_add' argument 3: expected i32, got f32");
  }
}

TEST(NoGPU, DeviceOperationsRaiseClearErrors) {
  if (hasGPU())
    GTEST_SKIP() << "a GPU is present";
  auto expectNoDriver = [](const char *what, auto &&f) {
    try {
      f();
      FAIL() << "expected an error from " << what;
    } catch (const Error &e) {
      EXPECT_NE(std::string(e.what()).find("no CUDA driver/GPU"), std::string::npos) << e.what();
    }
  };
  expectNoDriver("DeviceBuffer", [] { DeviceBuffer b(16); });
  expectNoDriver("getArch", [] { getArch(); });
  expectNoDriver("JIT()", [] { JIT jit; });
  TempCache cache;
  JIT jit("sm_90", cache.path);
  const Kernel &k = jit.compile(readKernel("vector_add.mlir"));
  expectNoDriver("JIT::get", [&] { jit.get(readKernel("vector_add.mlir")); });
  expectNoDriver("Kernel::launch", [&] {
    k.launch({1, 1, 1}, nullptr, {Arg::ptr(0), Arg::ptr(0), Arg::ptr(0), Arg::i32(3)});
  });
}

/// Memory for a kernel argument on the backend under test.
struct TestBuffer : Buffer {
  TestBuffer(bool host, size_t bytes) : Buffer(bytes, host) {}
  uint64_t ptr() const { return get(); }
};

JIT makeJIT(bool host) { return host ? JIT(kHostArch) : JIT(); }
void sync(bool host) {
  if (!host)
    synchronize();
}

void vectorAddAndCopy2D(bool host) {
  JIT jit = makeJIT(host);
  const Kernel &add = jit.get(readKernel("vector_add.mlir"));
  const int n = 1 << 20;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 977) * 0.25f;
    y[i] = float(i % 13) - 6.5f;
  }
  TestBuffer dx(host, n * 4), dy(host, n * 4), dout(host, n * 4);
  dx.copyFromHost(x.data(), n * 4);
  dy.copyFromHost(y.data(), n * 4);
  dout.fill32(0xFFFFFFFFu);
  add.launch({n / 1024, 1, 1}, nullptr,
             {Arg::ptr(dx.ptr()), Arg::ptr(dy.ptr()), Arg::ptr(dout.ptr()), Arg::i32(n)});
  sync(host);
  dout.copyToHost(out.data(), n * 4);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(out[i], x[i] + y[i]) << i;

  // Masked 2-D strided copy of a 100 x 200 block (not multiples of the 32 x 64 tile) out of a
  // matrix with row stride 256 into one with row stride 208.
  const Kernel &copy = jit.get(readKernel("copy_2d.mlir"));
  const int M = 100, N = 208, S = 256, D = 208;
  std::vector<float> src(M * S), dst(M * D, -1.0f);
  for (int i = 0; i < M * S; ++i)
    src[i] = float(i);
  TestBuffer ds(host, M * S * 4), dd(host, M * D * 4);
  ds.copyFromHost(src.data(), M * S * 4);
  dd.copyFromHost(dst.data(), M * D * 4);
  copy.launch(
      {(M + 31) / 32, (N + 63) / 64, 1}, nullptr,
      {Arg::ptr(ds.ptr()), Arg::ptr(dd.ptr()), Arg::i32(M), Arg::i32(N), Arg::i32(S), Arg::i32(D)});
  sync(host);
  dd.copyToHost(dst.data(), M * D * 4);
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < D; ++c)
      ASSERT_EQ(dst[r * D + c], src[r * S + c]) << r << "," << c;
}

void softmaxAndTwoDimensionalSums(bool host) {
  JIT jit = makeJIT(host);
  // Softmax of 300 rows with row stride 1024, random data: 1008 columns with the kernel's
  // divisibility-16 specialization (vector accesses), and 1000 columns (a masked tail inside a
  // vector) with the specialization removed.
  for (int cols : {1008, 1000}) {
    SCOPED_TRACE(cols);
    std::string src = readKernel("softmax.mlir");
    if (cols % 16) {
      std::string attr = "%n_cols: i32 {kiln.divisibility = 16 : i32}";
      src.replace(src.find(attr), attr.size(), "%n_cols: i32");
    }
    const int rows = 300, stride = 1024;
    std::vector<float> x(rows * stride), y(rows * stride);
    uint32_t state = 12345;
    for (float &v : x) {
      state = state * 1664525u + 1013904223u;
      v = float(state >> 8) / float(1 << 24) * 20.0f - 10.0f;
    }
    TestBuffer dx(host, x.size() * 4), dy(host, y.size() * 4);
    dx.copyFromHost(x.data(), x.size() * 4);
    dy.fill32(0xFFFFFFFFu);
    jit.get(src).launch({rows, 1, 1}, nullptr,
                        {Arg::ptr(dy.ptr()), Arg::ptr(dx.ptr()), Arg::i32(stride), Arg::i32(stride),
                         Arg::i32(cols)});
    sync(host);
    dy.copyToHost(y.data(), y.size() * 4);
    double num = 0, den = 0;
    for (int r = 0; r < rows; ++r) {
      double m = -1e30, s = 0;
      for (int c = 0; c < cols; ++c)
        m = std::max(m, double(x[r * stride + c]));
      for (int c = 0; c < cols; ++c)
        s += std::exp(double(x[r * stride + c]) - m);
      for (int c = 0; c < cols; ++c) {
        double ref = std::exp(double(x[r * stride + c]) - m) / s;
        double d = y[r * stride + c] - ref;
        num += d * d;
        den += ref * ref;
      }
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5);
  }

  // Row and column sums of a 64 x 128 tile.
  std::vector<float> t(64 * 128), rs(64), cs(128);
  for (int i = 0; i < 64 * 128; ++i)
    t[i] = float((i * 37) % 101) - 50.0f;
  TestBuffer dt(host, t.size() * 4), drs(host, 64 * 4), dcs(host, 128 * 4);
  dt.copyFromHost(t.data(), t.size() * 4);
  drs.fill32(0xFFFFFFFFu);
  dcs.fill32(0xFFFFFFFFu);
  jit.get(readKernel("sum_2d.mlir"))
      .launch({1, 1, 1}, nullptr, {Arg::ptr(dt.ptr()), Arg::ptr(drs.ptr()), Arg::ptr(dcs.ptr())});
  sync(host);
  drs.copyToHost(rs.data(), 64 * 4);
  dcs.copyToHost(cs.data(), 128 * 4);
  for (int i = 0; i < 64; ++i) {
    double ref = 0;
    for (int j = 0; j < 128; ++j)
      ref += t[i * 128 + j];
    EXPECT_EQ(rs[i], float(ref)) << "row " << i; // integers: exact in any order
  }
  for (int j = 0; j < 128; ++j) {
    double ref = 0;
    for (int i = 0; i < 64; ++i)
      ref += t[i * 128 + j];
    EXPECT_EQ(cs[j], float(ref)) << "column " << j;
  }
}

void histogramWithTileAndScalarAtomics(bool host) {
  JIT jit = makeJIT(host);
  const int n = 100000; // not a multiple of the 256-element tile: the tail is masked
  std::vector<int32_t> x(n);
  uint32_t state = 7;
  for (int32_t &v : x) {
    state = state * 1664525u + 1013904223u;
    v = int32_t(state >> 7);
  }
  TestBuffer dx(host, n * 4), dbins(host, 64 * 4), dcount(host, 4);
  dx.copyFromHost(x.data(), n * 4);
  dbins.fill32(0);
  dcount.fill32(0);
  unsigned programs = (n + 255) / 256;
  jit.get(readKernel("histogram.mlir"))
      .launch({programs, 1, 1}, nullptr,
              {Arg::ptr(dx.ptr()), Arg::ptr(dbins.ptr()), Arg::ptr(dcount.ptr()), Arg::i32(n)});
  sync(host);
  std::vector<int32_t> bins(64), ref(64, 0);
  int32_t count = 0;
  dbins.copyToHost(bins.data(), 64 * 4);
  dcount.copyToHost(&count, 4);
  for (int32_t v : x)
    ++ref[v & 63];
  EXPECT_EQ(bins, ref);
  EXPECT_EQ(count, int32_t(programs)) << "one scalar atomic per program";
}

/// Kernels whose tiles move between threads: a masked transpose (trans through shared memory)
/// and an outer sum whose loaded vector is used as a column and as a row (a layout conversion).
void transposeAndOuterAdd(bool host) {
  JIT jit = makeJIT(host);
  for (auto [M, N] : {std::pair<int, int>{100, 208}, {64, 64}, {33, 16}}) {
    std::vector<float> src(M * N), dst(N * M, -1.0f);
    for (int i = 0; i < M * N; ++i)
      src[i] = float(i) * 0.5f;
    TestBuffer ds(host, src.size() * 4), dd(host, dst.size() * 4);
    ds.copyFromHost(src.data(), src.size() * 4);
    dd.fill32(0xFFFFFFFFu);
    jit.get(readKernel("transpose.mlir"))
        .launch({unsigned(M + 31) / 32, unsigned(N + 63) / 64, 1}, nullptr,
                {Arg::ptr(ds.ptr()), Arg::ptr(dd.ptr()), Arg::i32(M), Arg::i32(N)});
    sync(host);
    dd.copyToHost(dst.data(), dst.size() * 4);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j)
        ASSERT_EQ(dst[j * M + i], src[i * N + j]) << M << "x" << N << " at " << i << "," << j;
  }
  std::vector<float> x(64), out(64 * 64);
  for (int i = 0; i < 64; ++i)
    x[i] = float(i * i % 17) - 3.25f;
  TestBuffer dx(host, 64 * 4), dout(host, 64 * 64 * 4);
  dx.copyFromHost(x.data(), 64 * 4);
  dout.fill32(0xFFFFFFFFu);
  jit.get(readKernel("outer_add.mlir"))
      .launch({1, 1, 1}, nullptr, {Arg::ptr(dx.ptr()), Arg::ptr(dout.ptr())});
  sync(host);
  dout.copyToHost(out.data(), out.size() * 4);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j)
      ASSERT_EQ(out[i * 64 + j], x[i] + x[j]) << i << "," << j;
}

/// fp16 bits of a float that fp16 represents exactly (small multiples of 1/4 here).
uint16_t toHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) == 0)
    return uint16_t(u >> 16);
  uint32_t sign = (u >> 16) & 0x8000u, exp = ((u >> 23) & 0xff) - 127 + 15, man = (u >> 13) & 0x3ff;
  return uint16_t(sign | (exp << 10) | man);
}

/// A tiled f16 matmul with f32 accumulators over a K loop with masked edges (tensor cores on
/// the GPU), against a double-precision reference: the products of these inputs are exact,
/// so only the order of the f32 sums differs.
void matmulF16(bool host) {
  JIT jit = makeJIT(host);
  for (auto [M, N, K] : {std::tuple<int, int, int>{128, 128, 64}, {100, 208, 80}, {64, 16, 16}}) {
    std::vector<uint16_t> a(M * K), b(K * N);
    std::vector<float> af(M * K), bf(K * N), c(M * N);
    for (int i = 0; i < M * K; ++i) {
      af[i] = float((i * 7 + 3) % 13 - 6) * 0.25f;
      a[i] = toHalf(af[i]);
    }
    for (int i = 0; i < K * N; ++i) {
      bf[i] = float((i * 5 + 1) % 11 - 5) * 0.5f;
      b[i] = toHalf(bf[i]);
    }
    TestBuffer da(host, a.size() * 2), db(host, b.size() * 2), dc(host, c.size() * 4);
    da.copyFromHost(a.data(), a.size() * 2);
    db.copyFromHost(b.data(), b.size() * 2);
    dc.fill32(0xFFFFFFFFu);
    jit.get(readKernel("matmul.mlir"))
        .launch({unsigned(M + 63) / 64, unsigned(N + 63) / 64, 1}, nullptr,
                {Arg::ptr(da.ptr()), Arg::ptr(db.ptr()), Arg::ptr(dc.ptr()), Arg::i32(M),
                 Arg::i32(N), Arg::i32(K)});
    sync(host);
    dc.copyToHost(c.data(), c.size() * 4);
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double ref = 0;
        for (int k = 0; k < K; ++k)
          ref += double(af[i * K + k]) * bf[k * N + j];
        ASSERT_NEAR(c[i * N + j], ref, 1e-3)
            << M << "x" << N << "x" << K << " at " << i << "," << j;
      }
  }
}

/// kernels/cumsum.mlir: row-wise prefix sums (i32, exact) and a reverse running max along the
/// columns of each 32-row block (f32), M not a multiple of 32.
void scans(bool host) {
  JIT jit = makeJIT(host);
  const int M = 100;
  std::vector<int32_t> x(M * 64), sums(M * 64);
  std::vector<float> y(M * 64), maxs(M * 64);
  uint32_t state = 99;
  for (int i = 0; i < M * 64; ++i) {
    state = state * 1664525u + 1013904223u;
    x[i] = int32_t(state >> 20) - 2048;
    y[i] = float(int32_t(state >> 8) % 1000) * 0.5f;
  }
  TestBuffer dx(host, x.size() * 4), dy(host, y.size() * 4), ds(host, sums.size() * 4),
      dm(host, maxs.size() * 4);
  dx.copyFromHost(x.data(), x.size() * 4);
  dy.copyFromHost(y.data(), y.size() * 4);
  ds.fill32(0xFFFFFFFFu);
  dm.fill32(0xFFFFFFFFu);
  jit.get(readKernel("cumsum.mlir"))
      .launch({unsigned(M + 31) / 32, 1, 1}, nullptr,
              {Arg::ptr(dx.ptr()), Arg::ptr(dy.ptr()), Arg::ptr(ds.ptr()), Arg::ptr(dm.ptr()),
               Arg::i32(M)});
  sync(host);
  ds.copyToHost(sums.data(), sums.size() * 4);
  dm.copyToHost(maxs.data(), maxs.size() * 4);
  for (int i = 0; i < M; ++i) {
    int32_t run = 0;
    for (int j = 0; j < 64; ++j) {
      run += x[i * 64 + j];
      ASSERT_EQ(sums[i * 64 + j], run) << i << "," << j;
    }
  }
  for (int j = 0; j < 64; ++j)
    for (int block = 0; block * 32 < M; ++block) {
      int last = std::min(M, block * 32 + 32) - 1;
      float run = -INFINITY;
      for (int i = last; i >= block * 32; --i) {
        run = std::max(run, y[i * 64 + j]);
        ASSERT_EQ(maxs[i * 64 + j], run) << i << "," << j;
      }
    }
}

TEST(GPU, VectorAddAndCopy2D) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  vectorAddAndCopy2D(/*host=*/false);
}
TEST(GPU, LoadedKernelReportsRegistersAndNoSpills) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  TempCache cache;
  JIT jit("", cache.path);
  const Kernel &k = jit.get(readKernel("vector_add.mlir"));
  EXPECT_GT(k.getNumRegs(), 0u);
  EXPECT_LE(k.getNumRegs(), 255u);
  EXPECT_EQ(k.getLocalBytes(), 0u);
  const Kernel &unloaded = JIT("sm_90", cache.path).compile(readKernel("kl_div.mlir"));
  EXPECT_EQ(unloaded.getNumRegs(), 0u) << "not loaded: nothing reported";
}
TEST(GPU, SoftmaxAndTwoDimensionalSums) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  softmaxAndTwoDimensionalSums(/*host=*/false);
}
TEST(GPU, HistogramWithTileAndScalarAtomics) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  histogramWithTileAndScalarAtomics(/*host=*/false);
}

TEST(GPU, TransposeAndOuterAdd) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  transposeAndOuterAdd(/*host=*/false);
}

TEST(GPU, MatmulF16OnTensorCores) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  matmulF16(/*host=*/false);
}

TEST(GPU, Scans) {
  if (!hasGPU())
    GTEST_SKIP() << "no GPU";
  scans(/*host=*/false);
}

// The same kernels and checks on the host backend: they run everywhere, CI included.
/// A kernel loaded on devices 1 and 0 runs on each with device 0 current; each device's
/// memory, copies and guards are its own, and the current device is left as it was.
TEST(GPU2, KernelsRunOnEveryDevice) {
  if (deviceCount() < 2)
    GTEST_SKIP() << "fewer than two GPUs";
  TempCache cache;
  setDevice(0);
  JIT jit("", cache.path);
  std::string src = readKernel("vector_add.mlir");
  const Kernel &on1 = jit.get(src, {}, 1);
  const Kernel &on0 = jit.get(src, {}, 0);
  EXPECT_EQ(on1.getDevice(), 1);
  EXPECT_EQ(on0.getDevice(), 0);
  EXPECT_EQ(jit.getStats().compiles, 1u) << "one architecture: compiled once, loaded twice";
  const int n = 1 << 16;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 977) * 0.25f;
    y[i] = float(i % 13) - 6.5f;
  }
  for (int dev : {1, 0, 1}) {
    SCOPED_TRACE(dev);
    DeviceBuffer dx(n * 4, dev), dy(n * 4, dev), dout(n * 4, dev);
    EXPECT_EQ(dout.getDevice(), dev);
    EXPECT_EQ(pointerDevice(dout.get()), dev);
    dx.copyFromHost(x.data(), n * 4);
    dy.copyFromHost(y.data(), n * 4);
    dout.fill32(0xFFFFFFFFu);
    (dev ? on1 : on0)
        .launch({n / 1024, 1, 1}, nullptr,
                {Arg::ptr(dx.get()), Arg::ptr(dy.get()), Arg::ptr(dout.get()), Arg::i32(n)});
    EXPECT_EQ(currentDevice(), 0) << "a launch must not change the current device";
    synchronize(dev);
    dout.copyToHost(out.data(), n * 4);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(out[i], x[i] + y[i]) << i;
  }
  {
    DeviceGuard guard(1);
    EXPECT_EQ(currentDevice(), 1);
  }
  EXPECT_EQ(currentDevice(), 0);
  try {
    setDevice(deviceCount());
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

TEST(Host, Scans) { scans(/*host=*/true); }
TEST(Host, MatmulF16) { matmulF16(/*host=*/true); }
TEST(Host, TransposeAndOuterAdd) { transposeAndOuterAdd(/*host=*/true); }
TEST(Host, VectorAddAndCopy2D) { vectorAddAndCopy2D(/*host=*/true); }
TEST(Host, SoftmaxAndTwoDimensionalSums) { softmaxAndTwoDimensionalSums(/*host=*/true); }
TEST(Host, HistogramWithTileAndScalarAtomics) { histogramWithTileAndScalarAtomics(/*host=*/true); }

// Debug mode on the host: an unmasked read past the end of its buffer is reported with the
// kernel, the load's source location and the program id, never performed, and the program
// stops there.
TEST(Host, DebugModeReportsOutOfBoundsAccess) {
  TempCache cache;
  JIT jit(kHostArch, cache.path);
  const char *src = R"(
    func.func @oob(%p: !kiln.ptr<f32>, %q: !kiln.ptr<f32>) {
      %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
      %ps = kiln.splat %p : tensor<16x!kiln.ptr<f32>>
      %pp = kiln.addptr %ps, %r : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
      %x = kiln.load %pp : tensor<16x!kiln.ptr<f32>> loc("oob.py":12:7)
      %qs = kiln.splat %q : tensor<16x!kiln.ptr<f32>>
      %qq = kiln.addptr %qs, %r : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
      kiln.store %qq, %x : tensor<16x!kiln.ptr<f32>>
      return
    })";
  std::vector<float> p(8, 1.0f), q(16, 0.0f);
  uint64_t pp = uint64_t(uintptr_t(p.data())), pq = uint64_t(uintptr_t(q.data()));
  void *params[] = {&pp, &pq};
  kiln::CompileOptions debug;
  debug.debug = true;
  const Kernel &k = jit.get(src, debug);
  ASSERT_TRUE(k.isHost() && k.isDebug());
  try {
    k.launchHost({1, 1, 1}, params, {{pp, 8 * 4}, {pq, 16 * 4}});
    FAIL() << "expected an out-of-bounds error";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("oob.py:12:7: error: in kernel 'oob': out-of-bounds load in program "
                       "(0, 0, 0): element 8"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("0 bytes past the end of a 32-byte buffer argument"), std::string::npos)
        << msg;
  }
  // The program stopped at the bad load (a loop over a wrong range would otherwise run on):
  // nothing was stored.
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(q[i], 0.0f) << i;
  // The same kernel in plain mode reads without checks (kept in bounds here).
  std::vector<float> big(16, 2.0f);
  uint64_t pb = uint64_t(uintptr_t(big.data()));
  void *plain[] = {&pb, &pq};
  jit.get(src).launchRaw({1, 1, 1}, nullptr, plain);
  EXPECT_EQ(q[15], 2.0f);
}

// device_assert on the host fails the launch with the message, the site and the program id.
TEST(Host, DeviceAssertFailsTheLaunch) {
  TempCache cache;
  JIT jit(kHostArch, cache.path);
  const char *src = R"(
    func.func @check(%n: i32) {
      %pid = kiln.program_id x : i32
      %ok = arith.cmpi slt, %pid, %n : i32
      kiln.assert %ok, "pid must be below n" : i1 loc("check.py":5:3)
      return
    })";
  int32_t n = 3;
  void *params[] = {&n};
  kiln::CompileOptions debug;
  debug.debug = true;
  const Kernel &k = jit.get(src, debug);
  EXPECT_NO_THROW(k.launchHost({3, 1, 1}, params));
  try {
    k.launchHost({4, 1, 1}, params);
    FAIL() << "expected an assertion failure";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "check.py:5:3: error: in kernel 'check': device_assert failed in "
                           "program (3, 0, 0): pid must be below n");
  }
}

} // namespace
