#ifndef FL_TENSOR_RECORD_H_
#define FL_TENSOR_RECORD_H_

// One tensor as a protobuf record (dtype, shape, raw bytes): how checkpoints store
// tensors and how distributed runs send client updates and states between
// processes.

#include <string>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/checkpoint.pb.h"

namespace fl {

fedkit::CheckpointTensor TensorToRecord(fedkit::CheckpointTensor::Section section,
                                        const std::string& name, const at::Tensor& tensor);

// Checks the dtype and that the shape matches the bytes present before reading
// anything. A tensor that was on an accelerator comes back on `device`, others on
// the CPU. Errors start with `where`.
absl::StatusOr<at::Tensor> TensorFromRecord(const fedkit::CheckpointTensor& record,
                                            const at::Device& device, const std::string& where);

// A record's bytes with map entries ordered by key (protobuf's default order is
// its hash order, seeded afresh for each map), so that equal records are equal
// bytes. ResourceExhausted for a message over protobuf's 2 GB limit.
absl::StatusOr<std::string> DeterministicBytes(const google::protobuf::Message& message);

}  // namespace fl

#endif  // FL_TENSOR_RECORD_H_
