#include "fl/device.h"

#include <torch/cuda.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(ResolveDeviceTest, CpuIsAlwaysCpu) {
  EXPECT_EQ(*ResolveDevice(fedkit::ExperimentSpec::CPU), c10::Device(c10::kCPU));
}

TEST(ResolveDeviceTest, AutoPicksCudaExactlyWhenAvailable) {
  EXPECT_EQ(ResolveDevice(fedkit::ExperimentSpec::AUTO)->is_cuda(), torch::cuda::is_available());
}

TEST(ResolveDeviceTest, CudaWithoutOneIsAClearError) {
  auto device = ResolveDevice(fedkit::ExperimentSpec::CUDA);
  if (torch::cuda::is_available()) {
    EXPECT_TRUE(device->is_cuda());
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(device.status().message()),
                ::testing::StartsWith("device: CUDA requested, but no CUDA device is usable"));
  }
}

}  // namespace
}  // namespace fl
