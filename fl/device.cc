#include "fl/device.h"

#include <torch/cuda.h>

namespace fl {

absl::StatusOr<c10::Device> ResolveDevice(fedkit::ExperimentSpec::Device device) {
  const bool cuda = torch::cuda::is_available();
  switch (device) {
    case fedkit::ExperimentSpec::CPU:
      return c10::Device(c10::kCPU);
    case fedkit::ExperimentSpec::CUDA:
      if (!cuda) {
        return absl::FailedPreconditionError(
            "device: CUDA requested, but no CUDA device is usable here: this machine has no "
            "GPU (or no driver for it), or fedkit was linked without LibTorch's CUDA libraries "
            "(build with --config=torch2 --config=cuda, docs/other-libtorch.md); use device: CPU "
            "or AUTO");
      }
      return c10::Device(c10::kCUDA);
    default:
      return c10::Device(cuda ? c10::kCUDA : c10::kCPU);
  }
}

}  // namespace fl
