// The physical limit for simulation throughput: the same model, data, optimiser and
// batch size as a spec's clients, trained as one plain centralised loop for a
// given number of steps, with none of the federation around it. Prints one JSON
// object; tools/bench_report.sh divides a federated run's throughput by this one.
// It uses every core for its one stream, in the pool the runner would choose, and
// the trainer's flat optimiser layout.
//
//   bazel run -c opt //tools:centralized_baseline -- --spec=experiments/flute_lr.textproto --steps=6000

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "fl/experiment.h"
#include "fl/flat_parameters.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"
#include "fl/thread_budget.h"

ABSL_FLAG(std::string, spec, "", "Path of the ExperimentSpec text proto.");
ABSL_FLAG(std::string, set, "", "Text-format fragment merged into the spec.");
ABSL_FLAG(int64_t, steps, 1000, "Optimiser steps to time.");

namespace {

absl::Status Run() {
  std::string path = absl::GetFlag(FLAGS_spec);
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
      dir != nullptr && !std::filesystem::path(path).is_absolute()) {
    path = (std::filesystem::path(dir) / path).string();
  }
  FL_ASSIGN_OR_RETURN(fedkit::ExperimentSpec spec, fl::LoadSpecFile(path));
  if (!absl::GetFlag(FLAGS_set).empty()) {
    FL_RETURN_IF_ERROR(fl::ApplyOverride(absl::GetFlag(FLAGS_set), spec));
  }
  FL_ASSIGN_OR_RETURN(fl::Experiment experiment, fl::BuildExperiment(spec));
  FL_RETURN_IF_ERROR(experiment.dataset->CheckAvailable());
  FL_ASSIGN_OR_RETURN(fl::DatasetSplits data, experiment.dataset->Load());
  const at::Tensor x = data.train.x.to(experiment.device);
  const at::Tensor y = data.train.y.to(experiment.device);

  torch::manual_seed(spec.seed());
  FL_ASSIGN_OR_RETURN(std::unique_ptr<fl::Model> model,
                      fl::Registry<fl::Model>::Global().Create(
                          spec.model().name(), spec.model().options(),
                          {experiment.data_info.input_shape, experiment.data_info.num_classes}));
  model->to(experiment.device);
  model->train();
  // One training stream: every core, in the pool the model's operations use.
  fl::ThreadBudgetRequest request;
  request.cores = fl::UsableCores();
  request.workers = 1;
  fl::DescribeModel(*model, request);
  FL_ASSIGN_OR_RETURN(fl::ThreadBudget budget, fl::ChooseThreadBudget(request));
  fl::ApplyThreads(budget.worker);
  // The trainer's optimiser layout, so that only the federation differs.
  const fedkit::OptimizerSpec& opt = spec.client().optimizer();
  fl::FlatParameters flat(*model, fl::OptimizerLayout(spec.client()));
  torch::optim::SGD optimizer(flat.optimizer_tensors(), torch::optim::SGDOptions(opt.lr())
                                                       .momentum(opt.momentum())
                                                       .weight_decay(opt.weight_decay()));
  const int64_t batch = spec.client().batch_size();
  const int64_t n = y.size(0);
  const int64_t steps = absl::GetFlag(FLAGS_steps);
  std::mt19937_64 rng(spec.seed());
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  at::Tensor index;

  const auto start = std::chrono::steady_clock::now();
  at::Tensor loss_sum = at::zeros({}, x.options().dtype(at::kDouble));
  for (int64_t step = 0, begin = n; step < steps; ++step, begin += batch) {
    if (begin + batch > n) {
      std::shuffle(order.begin(), order.end(), rng);
      index = at::tensor(order, at::kLong).to(experiment.device);
      begin = 0;
    }
    const at::Tensor b = index.narrow(0, begin, batch);
    flat.ClearGradients();
    at::Tensor loss = at::cross_entropy_loss(model->Forward(x.index_select(0, b)), y.index_select(0, b));
    loss.backward();
    flat.RelinkGradients();
    optimizer.step();
    loss_sum.add_(loss.detach());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"spec\": \"%s\", \"steps\": %lld, \"batch_size\": %lld, \"seconds\": %.4f, "
      "\"steps_per_second\": %.2f, \"samples_per_second\": %.1f, \"mean_loss\": %.4f, "
      "\"intra_op_threads\": %d, \"blas_threads\": %d}\n",
      spec.name().c_str(), static_cast<long long>(steps), static_cast<long long>(batch), seconds,
      steps / seconds, steps * batch / seconds, loss_sum.item<double>() / steps,
      budget.worker.intra_op, budget.worker.blas);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status;
  try {
    status = Run();
  } catch (const c10::Error& e) {
    status = absl::InternalError(e.what_without_backtrace());
  }
  if (!status.ok()) {
    std::fprintf(stderr, "centralized_baseline: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
