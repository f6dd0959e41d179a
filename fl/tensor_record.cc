#include "fl/tensor_record.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace fl {
namespace {

using fedkit::CheckpointTensor;

// The element types a record may hold, by c10's names.
const std::map<std::string, at::ScalarType>& KnownDtypes() {
  static const auto* const kDtypes = new std::map<std::string, at::ScalarType>{
      {"Byte", at::kByte},   {"Char", at::kChar},     {"Short", at::kShort},
      {"Int", at::kInt},     {"Long", at::kLong},     {"Half", at::kHalf},
      {"Float", at::kFloat}, {"Double", at::kDouble}, {"Bool", at::kBool},
      {"BFloat16", at::kBFloat16}};
  return *kDtypes;
}

}  // namespace

CheckpointTensor TensorToRecord(CheckpointTensor::Section section, const std::string& name,
                          const at::Tensor& tensor) {
  CheckpointTensor record;
  record.set_section(section);
  record.set_name(name);
  const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  record.set_dtype(c10::toString(cpu.scalar_type()));
  for (int64_t size : cpu.sizes()) record.add_shape(size);
  record.set_data(static_cast<const char*>(cpu.data_ptr()), cpu.nbytes());
  record.set_on_device(!tensor.device().is_cpu());
  return record;
}

absl::StatusOr<at::Tensor> TensorFromRecord(const CheckpointTensor& record, const at::Device& device,
                                      const std::string& where) {
  auto dtype = KnownDtypes().find(record.dtype());
  if (dtype == KnownDtypes().end()) {
    return absl::DataLossError(absl::StrCat(where, ": unknown dtype \"", record.dtype(), "\""));
  }
  const int64_t item = static_cast<int64_t>(c10::elementSize(dtype->second));
  // Counted against the bytes present, so no shape can ask for more than is there.
  const int64_t available = static_cast<int64_t>(record.data().size()) / item;
  bool empty = false;
  for (int64_t size : record.shape()) {
    if (size < 0) return absl::DataLossError(absl::StrCat(where, ": negative dimension ", size));
    empty |= size == 0;
  }
  // LibTorch sizes a tensor's storage and strides from every dimension, zeros
  // aside, and throws when that product overflows, even for an empty tensor.
  int64_t extent = item;
  for (int64_t size : record.shape()) {
    if (size > 0 && extent > std::numeric_limits<int64_t>::max() / size) {
      return absl::DataLossError(absl::StrCat(where, ": its shape's sizes multiply past 2^63"));
    }
    extent *= std::max<int64_t>(size, 1);
  }
  int64_t numel = empty ? 0 : 1;
  for (int64_t size : record.shape()) {
    if (empty) break;
    if (numel > available / size) {
      return absl::DataLossError(absl::StrCat(where, ": its shape needs more than its ",
                                              record.data().size(), " bytes of data"));
    }
    numel *= size;
  }
  if (numel * item != static_cast<int64_t>(record.data().size())) {
    return absl::DataLossError(absl::StrCat(where, ": shape holds ", numel * item,
                                            " bytes, the record ", record.data().size()));
  }
  at::Tensor tensor = at::empty(std::vector<int64_t>(record.shape().begin(), record.shape().end()),
                                at::TensorOptions().dtype(dtype->second));
  if (numel > 0) std::memcpy(tensor.data_ptr(), record.data().data(), record.data().size());
  return record.on_device() ? tensor.to(device) : tensor;
}

absl::StatusOr<std::string> DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot serialise a record of ", message.ByteSizeLong(), " bytes"));
    }
  }  // The streams trim `bytes` to what was written as they close.
  return bytes;
}

}  // namespace fl
