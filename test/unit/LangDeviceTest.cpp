//===- LangDeviceTest.cpp - The C++ DSL on any GPU of the machine ---------===//
//
// This file tests that kiln::lang launches run on the device of their rt::DeviceBuffer
// arguments or of grid(...).device(n), whatever device is current, leave the current device as
// it was, load each kernel once per device, and reject buffers of two devices with an error
// naming the kernel. Tests named GPU2_* need two GPUs and skip with fewer; the argument checks
// run everywhere.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"
#include "kiln/kiln.h"

#include "gtest/gtest.h"
#include <cstring>
#include <string>
#include <vector>

using namespace kiln::lang;
using kiln::rt::DeviceBuffer;

namespace {

#define REQUIRE_TWO_GPUS()                                                                         \
  if (kiln::rt::deviceCount() < 2)                                                                 \
  GTEST_SKIP() << "fewer than two GPUs"

/// x + y on `device` through the library's vector add, checked bit for bit.
void addOn(int device, bool explicitDevice) {
  const int n = 4099;
  std::vector<float> x(n), y(n), out(n);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i % 101) * 0.5f;
    y[i] = float(i % 7) - 3.0f;
  }
  DeviceBuffer dx(n * 4, device), dy(n * 4, device), dout(n * 4, device);
  ASSERT_EQ(kiln::rt::pointerDevice(dout.get()), device);
  dx.copyFromHost(x.data(), n * 4);
  dy.copyFromHost(y.data(), n * 4);
  dout.fill32(0xffffffffu);
  Launch launch = grid(cdiv(n, 1024));
  if (explicitDevice)
    launch.device(device);
  kiln::kernels::vectorAddKernel()(launch, nullptr, dx, dy, dout, n, 1024);
  kiln::rt::synchronize(device);
  dout.copyToHost(out.data(), n * 4);
  for (int i = 0; i < n; ++i) {
    float ref = x[i] + y[i];
    ASSERT_EQ(std::memcmp(&out[i], &ref, 4), 0) << "device " << device << ", element " << i;
  }
}

TEST(LangDevice, GPU2_LaunchesRunOnTheDeviceOfTheirBuffers) {
  REQUIRE_TWO_GPUS();
  kiln::rt::setDevice(0);
  for (int round = 0; round < 2; ++round)
    for (int device : {1, 0}) {
      addOn(device, /*explicitDevice=*/round == 1);
      EXPECT_EQ(kiln::rt::currentDevice(), 0) << "a launch must not change the current device";
    }
  // After the current device changes, the buffers still decide.
  kiln::rt::setDevice(1);
  addOn(0, false);
  EXPECT_EQ(kiln::rt::currentDevice(), 1);
  kiln::rt::setDevice(0);
}

TEST(LangDevice, GPU2_BuffersOnTwoDevicesAreAnError) {
  REQUIRE_TWO_GPUS();
  DeviceBuffer a(4096 * 4, 0), b(4096 * 4, 1), c(4096 * 4, 1);
  try {
    kiln::kernels::vectorAddKernel()(grid(4), nullptr, a, b, c, 4096, 1024);
    FAIL() << "expected an error";
  } catch (const kiln::rt::Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("vector_add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuda:0"), std::string::npos) << msg;
  }
  try {
    kiln::kernels::vectorAddKernel()(grid(4).device(0), nullptr, b, c, c, 4096, 1024);
    FAIL() << "expected an error";
  } catch (const kiln::rt::Error &e) {
    EXPECT_NE(std::string(e.what()).find(".device(0)"), std::string::npos) << e.what();
  }
}

TEST(LangDevice, GPU_DeviceThatDoesNotExistIsAnError) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  int n = kiln::rt::deviceCount();
  try {
    DeviceBuffer x(64, n);
    FAIL() << "expected an error";
  } catch (const kiln::rt::Error &e) {
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
}

} // namespace
