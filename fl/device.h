#ifndef FL_DEVICE_H_
#define FL_DEVICE_H_

#include <c10/core/Device.h>

#include "absl/status/statusor.h"
#include "fl/spec.pb.h"

namespace fl {

// The device a spec asks for: AUTO is CUDA when one is usable, else CPU; CUDA on a
// machine (or a LibTorch build) without one is a FailedPrecondition.
absl::StatusOr<c10::Device> ResolveDevice(fedkit::ExperimentSpec::Device device);

}  // namespace fl

#endif  // FL_DEVICE_H_
