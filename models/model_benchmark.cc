// One SGD training step (forward, cross-entropy, backward, optimiser step) of every
// registered model, on the CPU, in one Google Benchmark binary:
//
//   train_step/<name>/batch:<b>
//
// The models come from fl::Registry<fl::Model> at start-up, each with its natural
// data shape and paper options from Fixtures() below (28x28x1 with 10 classes for the MNIST family,
// 32x32x3 with 10 classes for the CIFAR models, 80-character sequences over an
// 80-character vocabulary for char_lstm); a registered model without a fixture shows
// up as an error row naming this file, so a new model is not silently left out.
// Counters: params (trainable parameters) and items_per_second (examples per second).
//
//   bazel run -c opt //models:model_benchmark
//   bazel run -c opt //models:model_benchmark -- --benchmark_filter=resnet --benchmark_format=json
//
// Absolute times depend on the machine, its load and LibTorch's thread count (printed
// as torch_threads in the context); compare rows of one run.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>
#include <torch/version.h>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"

namespace {

struct Fixture {
  const char* model;
  const char* options;  // text format of the model's options message
  std::vector<int64_t> input_shape;
  int64_t num_classes;
  bool token_ids;  // inputs are ids in [0, num_classes) stored as floats
  std::vector<int64_t> batch_sizes;
};

const std::vector<Fixture>& Fixtures() {
  static const auto* const kFixtures = new std::vector<Fixture>{
      {"logreg", "", {1, 28, 28}, 10, false, {32}},
      // FedLAW's and FedExP's 784-200-200-10 (the default has no hidden layer).
      {"mlp", "hidden: [200, 200]", {1, 28, 28}, 10, false, {32}},
      {"cnn_emnist", "", {1, 28, 28}, 10, false, {32}},
      {"lenet5", "", {1, 28, 28}, 10, false, {32}},
      {"fednet", "", {3, 32, 32}, 10, false, {32}},
      {"simple_cnn", "", {3, 32, 32}, 10, false, {32}},
      {"cnn_pfl", "", {3, 32, 32}, 10, false, {32}},
      {"resnet20", "", {3, 32, 32}, 10, false, {32}},
      {"resnet18_gn", "", {3, 32, 32}, 10, false, {32}},
      {"vgg11", "", {3, 32, 32}, 10, false, {32}},
      // FedAvg and LEAF train the Shakespeare LSTM with batch 10.
      {"char_lstm", "", {80}, 80, true, {10, 32}},
  };
  return *kFixtures;
}

void TrainStep(benchmark::State& state, const Fixture& fixture, int64_t batch) {
  torch::manual_seed(0);
  const fl::Registry<fl::Model>& registry = fl::Registry<fl::Model>::Global();
  std::unique_ptr<google::protobuf::Message> options(
      registry.Find(fixture.model)->default_options().New());
  if (!google::protobuf::TextFormat::ParseFromString(fixture.options, options.get())) {
    state.SkipWithError(absl::StrCat("bad fixture options: ", fixture.options).c_str());
    return;
  }
  google::protobuf::Any any;
  any.PackFrom(*options);
  auto model = registry.Create(fixture.model, any, {fixture.input_shape, fixture.num_classes});
  if (!model.ok()) {
    state.SkipWithError(model.status().ToString().c_str());
    return;
  }
  fl::Model& m = **model;
  m.train();
  std::vector<int64_t> shape = {batch};
  shape.insert(shape.end(), fixture.input_shape.begin(), fixture.input_shape.end());
  const at::Tensor x = fixture.token_ids ? at::randint(fixture.num_classes, shape, at::kFloat)
                                         : at::randn(shape);
  const at::Tensor y = at::randint(fixture.num_classes, {batch}, at::kLong);
  torch::optim::SGD sgd(m.parameters(), torch::optim::SGDOptions(0.01));
  for (auto _ : state) {
    sgd.zero_grad();
    at::cross_entropy_loss(m.Forward(x), y).backward();
    sgd.step();
  }
  state.counters["params"] =
      static_cast<double>(fl::ModelState::FromModule(m).NumParameters());
  state.SetItemsProcessed(state.iterations() * batch);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(at::get_num_threads()));

  for (const std::string& name : fl::Registry<fl::Model>::Global().Names()) {
    const Fixture* fixture = nullptr;
    for (const Fixture& f : Fixtures()) {
      if (name == f.model) fixture = &f;
    }
    if (fixture == nullptr) {
      benchmark::RegisterBenchmark(absl::StrCat("train_step/", name).c_str(),
                                   [name](benchmark::State& state) {
                                     state.SkipWithError(
                                         ("no fixture for model \"" + name +
                                          "\"; add one to models/model_benchmark.cc")
                                             .c_str());
                                   });
      continue;
    }
    for (int64_t batch : fixture->batch_sizes) {
      benchmark::RegisterBenchmark(
          absl::StrCat("train_step/", name, "/batch:", batch).c_str(),
          [fixture, batch](benchmark::State& state) { TrainStep(state, *fixture, batch); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
