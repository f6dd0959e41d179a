// What one local training step costs beyond the model's own forward and backward,
// for the small models where the difference matters, on one CPU thread:
//
//   floor/<case>              forward, cross-entropy and backward of one fixed batch:
//                             what no trainer can beat
//   floor_gathered/<case>     the same on a batch gathered at random from the
//                             client's examples each step, gradients cleared: the
//                             floor plus what reading random examples costs
//   step/<case>               fl::LocalTrainer::Train over the client's data, per
//                             optimiser step (batch gathering, zero_grad, the step,
//                             the loss bookkeeping included)
//   optimizer/<case>/<layout> the optimiser's step alone, over the model's parameter
//                             tensors one by one or over one flat buffer
//   evaluate/<case>           fl::Evaluate over 10,000 examples
//   evaluate_floor/<case>     the model's forward alone over the same batches
//
// Cases: mlp_64_32 (784-64-32-10, Adam, batch 64), quickstart (784-200-200-10, SGD,
// batch 50), lenet5_cifar (LeNet-5 on 3x32x32, SGD with momentum, batch 64). The
// counter seconds_per_step is wall time per optimiser step; compare rows of one run.
// --device=cuda runs every case on the GPU (tools/device_build/gpu_check.sh), each
// iteration ending with a device synchronisation.
//
//   bazel run -c opt //tools:local_step_benchmark -- --benchmark_format=json [--device=cuda]

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "fl/aggregator.h"
#include "fl/client_state_store.h"
#include "fl/evaluator.h"
#include "fl/flat_parameters.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "fl/thread_budget.h"
#include "glog/logging.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/text_format.h"

namespace {

struct Case {
  const char* name;
  const char* model;
  const char* model_options;  // text format
  std::vector<int64_t> input_shape;
  const char* client_spec;  // fedkit.ClientTrainingSpec, text format
  int64_t batch;
};

const std::vector<Case>& Cases() {
  static const auto* const kCases = new std::vector<Case>{
      {"mlp_64_32", "mlp", "hidden: [64, 32]", {1, 28, 28},
       "batch_size: 64 optimizer { kind: ADAM lr: 0.001 }", 64},
      {"quickstart", "mlp", "hidden: [200, 200]", {1, 28, 28},
       "batch_size: 50 optimizer { kind: SGD lr: 0.05 }", 50},
      {"lenet5_cifar", "lenet5", "", {3, 32, 32},
       "batch_size: 64 optimizer { kind: SGD lr: 0.01 momentum: 0.9 }", 64},
  };
  return *kCases;
}

// Where the models and examples live (--device).
at::Device g_device(at::kCPU);

// Waits for the device's queued work, so that a timed iteration includes it.
void Synchronize() {
  if (g_device.is_cuda()) torch::cuda::synchronize();
}

constexpr int64_t kClientExamples = 3200;
constexpr int64_t kEvalExamples = 10000;
constexpr int64_t kEvalBatch = 1000;

std::unique_ptr<fl::Model> NewModel(const Case& c) {
  const auto& registry = fl::Registry<fl::Model>::Global();
  std::unique_ptr<google::protobuf::Message> options(
      registry.Find(c.model)->default_options().New());
  CHECK(google::protobuf::TextFormat::ParseFromString(c.model_options, options.get()));
  google::protobuf::Any any;
  any.PackFrom(*options);
  torch::manual_seed(0);
  auto model = registry.Create(c.model, any, {c.input_shape, 10});
  CHECK(model.ok()) << model.status();
  (*model)->to(g_device);
  return *std::move(model);
}

fl::Examples RandomExamples(const Case& c, int64_t n) {
  std::vector<int64_t> shape = {n};
  shape.insert(shape.end(), c.input_shape.begin(), c.input_shape.end());
  return {at::randn(shape).to(g_device), at::randint(10, {n}, at::kLong).to(g_device)};
}

fedkit::ClientTrainingSpec ClientSpec(const Case& c) {
  fedkit::ClientTrainingSpec spec;
  CHECK(google::protobuf::TextFormat::ParseFromString(c.client_spec, &spec));
  return spec;
}

void SetStepCounter(benchmark::State& state, int64_t steps_per_iteration) {
  state.counters["seconds_per_step"] = benchmark::Counter(
      static_cast<double>(steps_per_iteration),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void Floor(benchmark::State& state, const Case& c) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  model->train();
  const fl::Examples batch = RandomExamples(c, c.batch);
  for (auto _ : state) {
    at::cross_entropy_loss(model->Forward(batch.x), batch.y).backward();
    Synchronize();
  }
  SetStepCounter(state, 1);
}

void FloorGathered(benchmark::State& state, const Case& c) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  model->train();
  const fl::Examples examples = RandomExamples(c, kClientExamples);
  const at::Tensor order =
      at::randperm(kClientExamples, at::TensorOptions(g_device).dtype(at::kLong));
  const int64_t batches = kClientExamples / c.batch;
  int64_t next = 0;
  for (auto _ : state) {
    for (at::Tensor& p : model->parameters()) p.mutable_grad().reset();
    const at::Tensor rows = order.narrow(0, (next++ % batches) * c.batch, c.batch);
    at::cross_entropy_loss(model->Forward(examples.x.index_select(0, rows)),
                           examples.y.index_select(0, rows))
        .backward();
    Synchronize();
  }
  SetStepCounter(state, 1);
}

void Step(benchmark::State& state, const Case& c) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  const fl::Examples examples = RandomExamples(c, kClientExamples);
  std::vector<int64_t> indices(kClientExamples);
  std::iota(indices.begin(), indices.end(), 0);
  const fl::ModelState global = fl::ModelState::FromModule(*model).Clone();
  const fl::RoundPlan plan;
  fl::ClientStateStore store;
  fedkit::ClientTrainingSpec spec = ClientSpec(c);
  spec.set_epochs(1);
  const fl::LocalTrainer trainer(spec, {}, &store);
  fl::LocalTrainingInput input;
  input.client_id = 0;
  input.round = 1;
  input.seed = 1;
  input.global = &global;
  input.plan = &plan;
  input.examples = &examples;
  input.indices = &indices;
  int64_t steps = 0;
  for (auto _ : state) {
    absl::StatusOr<fl::ClientUpdate> update = trainer.Train(*model, input);
    if (!update.ok()) {
      state.SkipWithError(update.status().ToString().c_str());
      return;
    }
    steps = update->local_steps;
    store.Discard(0);
    Synchronize();
  }
  SetStepCounter(state, steps);
}

enum class Layout { kPerTensor, kFlat };

void OptimizerStep(benchmark::State& state, const Case& c, Layout layout) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  const fl::Examples batch = RandomExamples(c, c.batch);
  at::cross_entropy_loss(model->Forward(batch.x), batch.y).backward();
  std::vector<at::Tensor> params = model->parameters();
  if (layout == Layout::kFlat) params = fl::FlatParameters(*model).optimizer_tensors();
  const fedkit::ClientTrainingSpec spec = ClientSpec(c);
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (spec.optimizer().kind() == fedkit::OptimizerSpec::ADAM) {
    optimizer = std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(spec.optimizer().lr()));
  } else {
    optimizer = std::make_unique<torch::optim::SGD>(
        params,
        torch::optim::SGDOptions(spec.optimizer().lr()).momentum(spec.optimizer().momentum()));
  }
  for (auto _ : state) {
    optimizer->step();
    Synchronize();
  }
  SetStepCounter(state, 1);
}

void EvaluateTestSet(benchmark::State& state, const Case& c) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  const fl::ModelState weights = fl::ModelState::FromModule(*model).Clone();
  const fl::Examples test = RandomExamples(c, kEvalExamples);
  for (auto _ : state) {
    absl::StatusOr<fl::Evaluation> evaluation = fl::Evaluate(*model, weights, test, kEvalBatch);
    if (!evaluation.ok()) {
      state.SkipWithError(evaluation.status().ToString().c_str());
      return;
    }
    Synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kEvalExamples);
}

void EvaluateFloor(benchmark::State& state, const Case& c) {
  std::unique_ptr<fl::Model> model = NewModel(c);
  model->eval();
  const fl::Examples test = RandomExamples(c, kEvalExamples);
  at::NoGradGuard no_grad;
  for (auto _ : state) {
    for (int64_t begin = 0; begin < kEvalExamples; begin += kEvalBatch) {
      benchmark::DoNotOptimize(model->Forward(test.x.narrow(0, begin, kEvalBatch)));
    }
    Synchronize();
  }
  state.SetItemsProcessed(state.iterations() * kEvalExamples);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // What Google Benchmark leaves: --device=cpu|cuda.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device=cuda" || arg == "--device=cpu") {
      g_device = at::Device(arg == "--device=cuda" ? at::kCUDA : at::kCPU);
      if (g_device.is_cuda() && !torch::cuda::is_available()) {
        std::fprintf(stderr, "--device=cuda: no CUDA device is usable here\n");
        return 2;
      }
      std::copy(argv + i + 1, argv + argc, argv + i);
      --argc;
      break;
    }
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::AddCustomContext("device", g_device.str());
  const fl::AppliedThreads applied = fl::ApplyThreads(1, 1);
  benchmark::AddCustomContext("intra_op_threads", std::to_string(applied.intra_op));
  benchmark::AddCustomContext("blas_threads", applied.blas_controllable
                                                  ? std::to_string(applied.blas)
                                                  : std::string("not controllable"));
  for (const Case& c : Cases()) {
    auto add = [](const std::string& name, auto fn) {
      benchmark::RegisterBenchmark(name.c_str(), fn)->UseRealTime()->Unit(
          benchmark::kMicrosecond);
    };
    add(absl::StrCat("floor/", c.name), [&c](benchmark::State& s) { Floor(s, c); });
    add(absl::StrCat("floor_gathered/", c.name),
        [&c](benchmark::State& s) { FloorGathered(s, c); });
    add(absl::StrCat("step/", c.name), [&c](benchmark::State& s) { Step(s, c); });
    add(absl::StrCat("optimizer/", c.name, "/per_tensor"),
        [&c](benchmark::State& s) { OptimizerStep(s, c, Layout::kPerTensor); });
    add(absl::StrCat("optimizer/", c.name, "/flat"),
        [&c](benchmark::State& s) { OptimizerStep(s, c, Layout::kFlat); });
    add(absl::StrCat("evaluate/", c.name), [&c](benchmark::State& s) { EvaluateTestSet(s, c); });
    add(absl::StrCat("evaluate_floor/", c.name),
        [&c](benchmark::State& s) { EvaluateFloor(s, c); });
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
