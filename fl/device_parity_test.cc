// One client's local training on CUDA against the same training on CPU: the same
// initial weights, examples and batch order (the order is drawn on the CPU from the
// client's seed whatever the device), so the updates differ only by the devices'
// floating-point arithmetic. Run on a GPU by tools/device_build/gpu_check.sh; where
// no CUDA device is usable (CI, a CPU-only link) the test says SKIPPED and the
// check script refuses a skip on its GPU run.
//
// Tolerances, on ||delta_cuda - delta_cpu|| / ||delta_cpu|| after a whole local
// epoch (13 and 10 steps):
//   the MLP: FP32 everywhere (LibTorch leaves TF32 off for matmuls); cuBLAS and the
//     CPU's BLAS sum in other orders, about 1e-7 relative per product, and each
//     step feeds the next: 1e-4 leaves a thousandfold margin and still catches a
//     wrong kernel, a lost step or a batch in another order (those move it by 1e-2
//     and more).
//   LeNet-5: cuDNN's convolutions may use TF32 (LibTorch's default allows it),
//     whose 10-bit mantissa rounds at about 5e-4 relative: 2e-2 bounds that and
//     still catches the same faults.
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

struct Case {
  const char* name;
  const char* model;
  const char* model_options;  // text format
  std::vector<int64_t> input_shape;
  const char* client_spec;  // fedkit.ClientTrainingSpec, text format
  int64_t examples;
  double tolerance;
};

const Case kCases[] = {
    {"quickstart_mlp", "mlp", "hidden: [200, 200]", {1, 28, 28},
     "epochs: 1 batch_size: 50 optimizer { kind: SGD lr: 0.05 }", 640, 1e-4},
    {"lenet5_cifar", "lenet5", "", {3, 32, 32},
     "epochs: 1 batch_size: 64 optimizer { kind: SGD lr: 0.01 momentum: 0.9 }", 640, 2e-2},
};

std::unique_ptr<Model> NewModel(const Case& c) {
  const auto& registry = Registry<Model>::Global();
  std::unique_ptr<google::protobuf::Message> options(
      registry.Find(c.model)->default_options().New());
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(c.model_options, options.get()));
  google::protobuf::Any any;
  any.PackFrom(*options);
  torch::manual_seed(0);
  absl::StatusOr<std::unique_ptr<Model>> model = registry.Create(c.model, any, {c.input_shape, 10});
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

// The client's update after one local epoch on `device`, copied to the CPU.
ModelState TrainOn(const Case& c, const c10::Device& device) {
  std::unique_ptr<Model> model = NewModel(c);
  model->to(device);
  std::vector<int64_t> shape = {c.examples};
  shape.insert(shape.end(), c.input_shape.begin(), c.input_shape.end());
  torch::manual_seed(1);
  const Examples examples{at::randn(shape).to(device),
                          at::randint(10, {c.examples}, at::kLong).to(device)};
  std::vector<int64_t> indices(c.examples);
  std::iota(indices.begin(), indices.end(), 0);
  const ModelState global = ModelState::FromModule(*model).Clone();
  const RoundPlan plan;
  ClientStateStore store;
  fedkit::ClientTrainingSpec spec;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(c.client_spec, &spec));
  const LocalTrainer trainer(spec, {}, &store);
  LocalTrainingInput input;
  input.client_id = 3;
  input.round = 1;
  input.seed = 17;
  input.global = &global;
  input.plan = &plan;
  input.examples = &examples;
  input.indices = &indices;
  absl::StatusOr<ClientUpdate> update = trainer.Train(*model, input);
  EXPECT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->local_steps, (c.examples + spec.batch_size() - 1) / spec.batch_size());
  ModelState delta = update->delta.Clone();
  for (size_t i = 0; i < delta.size(); ++i) {
    EXPECT_EQ(delta.tensor(i).device(), device) << "the update stays on the training device";
    delta.mutable_tensor(i) = delta.tensor(i).to(at::kCPU);
  }
  return delta;
}

class DeviceParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(DeviceParityTest, LocalEpochOnCudaMatchesCpu) {
  if (!torch::cuda::is_available()) {
    GTEST_SKIP() << "no CUDA device is usable here (tools/device_build/gpu_check.sh runs this "
                    "on a GPU)";
  }
  const Case& c = GetParam();
  const ModelState cpu = TrainOn(c, c10::Device(c10::kCPU));
  const ModelState cuda = TrainOn(c, c10::Device(c10::kCUDA));
  ASSERT_TRUE(cpu.CheckSameLayout(cuda).ok());
  const double cpu_norm = std::sqrt(cpu.SquaredNorm());
  ASSERT_GT(cpu_norm, 0.0);
  const double relative = std::sqrt(ModelState::Difference(cuda, cpu).SquaredNorm()) / cpu_norm;
  std::cout << "device_parity " << c.name << " relative_difference " << relative << "\n";
  RecordProperty("relative_difference", std::to_string(relative));
  EXPECT_LT(relative, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, DeviceParityTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace fl
