//===- LangDebugTest.cpp - device_assert and debug launches in the C++ DSL -===//
//
// This file tests kiln::lang::device_assert: a debug launch (Launch::debug) fails with the
// message, the kernel's name and the program; a plain launch compiles the check out, as
// Triton does outside debug mode; `Target::debug` keeps it in the PTX. The launches run on the
// host backend only: on a GPU a failed assert traps and leaves the context unusable for the
// tests after it.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include "LangTestSupport.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln::lang;
using kiln::test::contains;
using kiln::test::kAligned;

namespace {

/// out = sqrt(x) for the n elements, asserting x >= 0.
const Kernel<void(Ptr<f32>, Ptr<f32>, I32)> &checkedSqrt() {
  static const auto kernel = kiln::kernel("checked_sqrt", [](Ptr<f32> x, Ptr<f32> out, I32 n) {
    Value offs = program_id(0) * 64 + arange(0, 64);
    Value m = offs < n;
    Value v = load(x + offs, m, 0.0f);
    device_assert(v >= 0.0f, "expected x >= 0");
    store(out + offs, sqrt(v), m);
  });
  return kernel;
}

} // namespace

TEST(LangDebug, DeviceAssertFailsDebugLaunchesOnly) {
  if (!kiln::lang::jit().isHost())
    GTEST_SKIP() << "a failed assert on the GPU leaves the context unusable";
  const int n = 100;
  std::vector<float> hx(n, 4.0f), hout(n, 0.0f);
  hx[70] = -1.0f; // in program 1
  kiln::rt::Buffer x(n * 4, true), out(n * 4, true);
  x.copyFromHost(hx.data(), n * 4);
  auto ptr = [](const kiln::rt::Buffer &b) { return kiln::rt::CUdeviceptr(b.get()); };
  try {
    checkedSqrt()(grid(2).debug(), nullptr, ptr(x), ptr(out), n);
    ADD_FAILURE() << "expected the assert to fail";
  } catch (const kiln::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "expected x >= 0")) << e.what();
    EXPECT_TRUE(contains(e.what(), "checked_sqrt")) << e.what();
    EXPECT_TRUE(contains(e.what(), "LangDebugTest.cpp")) << e.what();
    EXPECT_TRUE(contains(e.what(), "device_assert failed in program (1, 0, 0)")) << e.what();
  }
  // Without debug the check is compiled out: the launch runs (sqrt(-1) is NaN there).
  checkedSqrt()(grid(2), nullptr, ptr(x), ptr(out), n);
  out.copyToHost(hout.data(), n * 4);
  EXPECT_EQ(hout[0], 2.0f);
  EXPECT_NE(hout[70], hout[70]); // NaN
  // A debug launch whose inputs pass runs through.
  hx[70] = 9.0f;
  x.copyFromHost(hx.data(), n * 4);
  checkedSqrt()(grid(2).debug(), nullptr, ptr(x), ptr(out), n);
  out.copyToHost(hout.data(), n * 4);
  EXPECT_EQ(hout[70], 3.0f);
}

TEST(LangDebug, TargetDebugKeepsTheAssertInPTX) {
  Target debug{"sm_90a", 4, 3, 0, false, /*debug=*/true};
  Compiled d = checkedSqrt().compile(debug, kAligned, kAligned, 100);
  EXPECT_TRUE(contains(d.ptx, "__assertfail")) << d.ptx;
  Compiled plain = checkedSqrt().compile(Target{"sm_90a"}, kAligned, kAligned, 100);
  EXPECT_FALSE(contains(plain.ptx, "__assertfail")) << plain.ptx;
}
