#include "models/common/model_test_util.h"

#include <ATen/ATen.h>

#include "fl/model_state.h"
#include "fl/registry.h"
#include "google/protobuf/any.pb.h"
#include "gtest/gtest.h"

namespace models {

absl::StatusOr<std::unique_ptr<fl::Model>> CreateModel(const std::string& name,
                                                       const google::protobuf::Message& options,
                                                       std::vector<int64_t> input_shape,
                                                       int64_t num_classes) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Model>::Global().Create(name, any,
                                                   {std::move(input_shape), num_classes});
}

void ExpectTrainStep(fl::Model& model, const at::Tensor& x, int64_t num_classes) {
  model.train();
  model.zero_grad();
  const int64_t batch = x.size(0);
  at::Tensor logits = model.Forward(x);
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{batch, num_classes}));
  at::Tensor labels = at::arange(batch, at::kLong).remainder(num_classes);
  at::cross_entropy_loss(logits, labels).backward();
  for (const auto& p : model.named_parameters()) {
    SCOPED_TRACE(p.key());
    ASSERT_TRUE(p.value().grad().defined());
    EXPECT_TRUE(p.value().grad().isfinite().all().item<bool>());
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0);
  }
}

std::vector<std::string> BufferNames(const fl::Model& model) {
  std::vector<std::string> names;
  const fl::ModelState state = fl::ModelState::FromModule(model);
  for (const fl::ModelState::Entry& e : state.entries()) {
    if (e.is_buffer) names.push_back(e.name);
  }
  return names;
}

}  // namespace models
