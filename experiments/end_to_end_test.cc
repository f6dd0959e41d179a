// End-to-end runs of the real runner code path on a slice of real Fashion-MNIST
// (installed by tools/setup.sh), plus whole-spec validation through every plugin.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_sampler.h"
#include "fl/experiment.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "fl/thread_budget.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;

// A small federation: 6000 training and 2000 test images over 20 clients.
constexpr char kSmallSpec[] = R"pb(
  name: "e2e"
  seed: 5
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 6000 test_limit: 2000 }
    }
  }
  partition {
    name: "dirichlet"
    num_clients: 20
    options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.5 } }
  }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [64] } }
  }
  client { epochs: 1 batch_size: 32 optimizer { kind: SGD lr: 0.05 } }
  server { rounds: 8 clients_per_round: 10 }
  aggregator { name: "fedavg" }
)pb";

fedkit::ExperimentSpec Spec(const std::string& overrides = "") {
  auto spec = fl::ParseSpec(kSmallSpec, "kSmallSpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!overrides.empty()) {
    EXPECT_TRUE(fl::ApplyOverride(overrides, *spec).ok());
  }
  return *spec;
}

fl::ExperimentResult RunSpec(const fedkit::ExperimentSpec& spec, const std::string& dir) {
  auto experiment = fl::BuildExperiment(spec);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  auto result = fl::RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/", dir));
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

void ExpectSameModel(const fl::ModelState& a, const fl::ModelState& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a.tensor(i).equal(b.tensor(i))) << i;
}

TEST(EndToEndTest, FedAvgLearnsWellAboveChance) {
  fl::ExperimentResult result = RunSpec(Spec(), "learns");
  ASSERT_EQ(result.rows.size(), 8);
  EXPECT_GT(result.rows.back().test_accuracy, 0.65);  // chance is 0.10
  EXPECT_GT(result.rows.back().test_accuracy, result.rows.front().test_accuracy);
  EXPECT_EQ(result.rows.back().clients, 10);
}

TEST(EndToEndTest, SameSpecAndSeedGiveIdenticalMetricsAndWeights) {
  const auto spec = Spec("server { rounds: 3 }");
  fl::ExperimentResult a = RunSpec(spec, "det_a");
  fl::ExperimentResult b = RunSpec(spec, "det_b");
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    EXPECT_EQ(a.rows[i].test_accuracy, b.rows[i].test_accuracy);
    EXPECT_EQ(a.rows[i].test_loss, b.rows[i].test_loss);
    EXPECT_EQ(a.rows[i].train_loss, b.rows[i].train_loss);
    EXPECT_EQ(a.rows[i].bytes_up, b.rows[i].bytes_up);
  }
  ExpectSameModel(a.final_model, b.final_model);
  fl::ExperimentResult other_seed = RunSpec(Spec("server { rounds: 3 } seed: 6"), "det_c");
  EXPECT_NE(a.rows.back().test_loss, other_seed.rows.back().test_loss);
}

TEST(EndToEndTest, WorkerCountDoesNotChangeTheResult) {
  fl::ExperimentResult one = RunSpec(Spec("server { rounds: 2 } simulation { workers: 1 }"), "w1");
  fl::ExperimentResult three = RunSpec(Spec("server { rounds: 2 } simulation { workers: 3 }"), "w3");
  ExpectSameModel(one.final_model, three.final_model);
}

// Regression: dropout drew from LibTorch's global generator, shared by the worker
// threads, so a model with dropout gave results that depended on the workers.
// Each (client, round) now has its own generator.
TEST(EndToEndTest, WorkerCountDoesNotChangeTheResultOfAModelWithDropout) {
  const std::string model =
      "model { name: 'cnn_pfl' options { [type.googleapis.com/fedkit.models.CnnPflOptions] "
      "{ hidden: 16 } } } "
      "dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] "
      "{ train_limit: 600 test_limit: 200 } } } "
      "client { steps: 4 } server { rounds: 2 clients_per_round: 4 } ";
  fl::ExperimentResult one = RunSpec(Spec(model + "simulation { workers: 1 }"), "dropout_w1");
  fl::ExperimentResult three = RunSpec(Spec(model + "simulation { workers: 3 }"), "dropout_w3");
  ExpectSameModel(one.final_model, three.final_model);
}

// Two threads per worker change how LibTorch and OpenBLAS split each operation,
// never what the clients compute: an MLP (its threads go to OpenBLAS) and a
// convolutional model (to LibTorch's pool) train to the same weights up to the
// order of float32 sums (measured: at most 4e-7 relative, about 3 ulps), unlike the
// number of workers, which leaves every bit unchanged.
TEST(EndToEndTest, ThreadsPerWorkerChangeTheResultOnlyByRounding) {
  // About 8 float32 ulps for the MLP (OpenBLAS gives the same sums on 1 or 2
  // threads). The convolution's level is higher: on CPUs with AVX-512 LibTorch's
  // convolution kernels split their reductions by thread count, and 8 local steps
  // carry the difference on (up to 6.3e-6 relative measured on such a machine),
  // while a learning rate 0.1 % higher moves every tensor by 3e-5 to 1.3e-4.
  constexpr double kMlpRoundingLevel = 1e-6;
  constexpr double kConvRoundingLevel = 2e-5;
  const std::string conv =
      "model { name: 'cnn_pfl' options { [type.googleapis.com/fedkit.models.CnnPflOptions] "
      "{ hidden: 16 } } } "
      "dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] "
      "{ train_limit: 600 test_limit: 200 } } } client { steps: 4 } ";
  for (const std::string& model : {std::string(), conv}) {
    const double kRoundingLevel = model.empty() ? kMlpRoundingLevel : kConvRoundingLevel;
    const std::string base = model + "server { rounds: 2 clients_per_round: 4 } ";
    fl::ExperimentResult one =
        RunSpec(Spec(base + "simulation { workers: 1 threads_per_worker: 1 }"), "t1");
    fl::ExperimentResult two =
        RunSpec(Spec(base + "simulation { workers: 1 threads_per_worker: 2 }"), "t2");
    ASSERT_EQ(one.final_model.size(), two.final_model.size());
    for (size_t i = 0; i < one.final_model.size(); ++i) {
      const at::Tensor a = one.final_model.tensor(i);
      const at::Tensor b = two.final_model.tensor(i);
      EXPECT_LE((a - b).norm().item<double>(), kRoundingLevel * a.norm().item<double>())
          << one.final_model.entries()[i].name;
    }
    EXPECT_NEAR(one.rows.back().test_loss, two.rows.back().test_loss,
                kRoundingLevel * one.rows.back().test_loss);
  }
}

// Records the thread settings in force where each client trains.
class ThreadProbe : public fl::ClientHook {
 public:
  absl::Status BeforeTraining(fl::HookContext&) override {
    absl::MutexLock lock(&mutex);
    seen.push_back(fl::CurrentThreads());
    return absl::OkStatus();
  }
  static inline absl::Mutex mutex;
  static inline std::vector<fl::AppliedThreads> seen;
};
absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateThreadProbe(
    const fedkit::ProxySpec&, const fl::ClientHook::CreateArgs&) {
  return std::make_unique<ThreadProbe>();
}
FL_REGISTER_PLUGIN(fl::ClientHook, "thread_probe", fedkit::ProxySpec, CreateThreadProbe);

// The budget is applied where the clients train, on the worker threads, while the
// server thread may hold a different one (a convolutional model's server gets
// every core between rounds); and it is what summary.json reports.
TEST(EndToEndTest, ClientsTrainUnderTheBudgetTheRunnerChose) {
  const std::string conv =
      "model { name: 'cnn_pfl' options { [type.googleapis.com/fedkit.models.CnnPflOptions] "
      "{ hidden: 16 } } } "
      "dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] "
      "{ train_limit: 600 test_limit: 200 } } } client { steps: 2 } ";
  for (const std::string& simulation :
       {std::string("workers: 2 threads_per_worker: 1"), std::string("workers: 1 threads_per_worker: 2")}) {
    for (const std::string& model : {std::string(), conv}) {
      SCOPED_TRACE(model + simulation);
      auto experiment = fl::BuildExperiment(Spec(
          model + "client { hooks { name: 'thread_probe' } } server { rounds: 2 "
                  "clients_per_round: 4 } simulation { " + simulation + " }"));
      ASSERT_TRUE(experiment.ok()) << experiment.status();
      const fl::PoolThreads expected = experiment->threads.worker;
      ThreadProbe::seen.clear();
      const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/probe");
      ASSERT_TRUE(fl::RunExperiment(*experiment, dir).ok());
      ASSERT_EQ(ThreadProbe::seen.size(), 8u);
      for (const fl::AppliedThreads& applied : ThreadProbe::seen) {
        EXPECT_EQ(applied.intra_op, expected.intra_op);
        // PyPI's LibTorch (--config=torch2) has no OpenBLAS pool: its MKL runs on the
        // intra-op threads checked above.
        if (applied.blas_controllable) EXPECT_EQ(applied.blas, expected.blas);
        EXPECT_EQ(applied.blas_controllable, !at::hasMKL());
      }
      std::ifstream summary(dir + "/summary.json");
      const std::string text((std::istreambuf_iterator<char>(summary)),
                             std::istreambuf_iterator<char>());
      EXPECT_THAT(text, HasSubstr(absl::StrCat("\"worker_intra_op_threads\": ", expected.intra_op,
                                               ", \"worker_blas_threads\": ", expected.blas)));
    }
  }
}

TEST(EndToEndTest, OneShotTrainsEveryClientOnceAndAggregatesOnce) {
  fedkit::ExperimentSpec spec = Spec("server { rounds: 1 one_shot: true } client { epochs: 3 }");
  spec.mutable_partition()->set_name("iid");
  spec.mutable_partition()->clear_options();
  fl::ExperimentResult result = RunSpec(spec, "one_shot");
  ASSERT_EQ(result.rows.size(), 1);
  EXPECT_EQ(result.rows[0].clients, 20);
  EXPECT_GT(result.rows[0].test_accuracy, 0.6);
}

// Records what the server lends through ServerContext, then averages like FedAvg.
class ProxyProbe : public fl::Aggregator {
 public:
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    if (!sum_) sum_ = update.delta.ZerosLike();
    sum_->Axpy(1.0, update.delta);
    ++count_;
    return absl::OkStatus();
  }
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    const at::Tensor counts = at::bincount(context.proxy->y, {}, 10);
    context.diagnostics["proxy_size"] = context.proxy->size();
    context.diagnostics["proxy_min_class"] = counts.min().item<double>();
    context.diagnostics["proxy_max_class"] = counts.max().item<double>();
    auto model = context.new_model();
    if (!model.ok()) return model.status();
    context.diagnostics["proxy_logits"] = (*model)->Forward(context.proxy->x).size(1);
    fl::ModelState next = global.Clone();
    next.Axpy(1.0 / count_, *sum_);
    sum_.reset();
    count_ = 0;
    return next;
  }

 private:
  std::optional<fl::ModelState> sum_;
  int count_ = 0;
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateProbe(const fedkit::ProxySpec&,
                                                            const fl::Aggregator::CreateArgs&) {
  return std::make_unique<ProxyProbe>();
}
FL_REGISTER_PLUGIN(fl::Aggregator, "proxy_probe", fedkit::ProxySpec, CreateProbe);

TEST(EndToEndTest, ServerLendsAClassBalancedProxySetAndAModelFactory) {
  fl::ExperimentResult result = RunSpec(
      Spec("server { rounds: 1 proxy { split: TEST size: 200 } } aggregator { name: 'proxy_probe' }"),
      "proxy");
  const auto& diagnostics = result.rows[0].diagnostics;
  EXPECT_EQ(diagnostics.at("proxy_size"), 200);
  EXPECT_EQ(diagnostics.at("proxy_min_class"), 20);
  EXPECT_EQ(diagnostics.at("proxy_max_class"), 20);
  EXPECT_EQ(diagnostics.at("proxy_logits"), 10);
}

TEST(EndToEndTest, ALongTailedProxySetFollowsFedLawsRule) {
  // 200 over 10 classes at imbalance 0.1: floor(20 * 0.1^(c/9)) = 20, 15, 11, 9, 7, 5,
  // 4, 3, 2, 2 (78 in all).
  fl::ExperimentResult result = RunSpec(
      Spec("server { rounds: 1 proxy { split: TEST size: 200 imbalance: 0.1 } } "
           "aggregator { name: 'proxy_probe' }"),
      "proxy_lt");
  const auto& diagnostics = result.rows[0].diagnostics;
  EXPECT_EQ(diagnostics.at("proxy_size"), 78);
  EXPECT_EQ(diagnostics.at("proxy_min_class"), 2);
  EXPECT_EQ(diagnostics.at("proxy_max_class"), 20);
}

TEST(EndToEndTest, FedLawLearnsItsWeightsOnTheProxySet) {
  fl::ExperimentResult result = RunSpec(
      Spec("server { rounds: 2 clients_per_round: 5 proxy { split: TEST size: 200 } } "
           "aggregator { name: 'fedlaw' options { [type.googleapis.com/fedkit.aggregators."
           "FedLawOptions] { server_epochs: 2 } } }"),
      "fedlaw");
  ASSERT_EQ(result.rows.size(), 2);
  for (const auto& row : result.rows) {
    EXPECT_EQ(row.clients, 5);
    EXPECT_NE(row.diagnostics.at("gamma"), 1.0);
    EXPECT_LE(row.diagnostics.at("proxy_loss_after"), row.diagnostics.at("proxy_loss_before"));
  }
  EXPECT_GT(result.rows[1].test_accuracy, 0.3);
}

// Keeps every update's delta by client id, for the independent-init tests; the
// model is left as it was.
absl::Mutex probe_mutex;
std::map<int64_t, at::Tensor>* recorded_deltas = nullptr;

class InitProbe : public fl::Aggregator {
 public:
  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext&) override {
    absl::MutexLock lock(&probe_mutex);
    std::vector<at::Tensor> flat;
    for (const auto& entry : update.delta.entries()) flat.push_back(entry.tensor.flatten());
    (*recorded_deltas)[update.client_id] = at::cat(flat);
    return absl::OkStatus();
  }
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext&) override {
    return global.Clone();
  }
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateInitProbe(const fedkit::ProxySpec&,
                                                                const fl::Aggregator::CreateArgs&) {
  return std::make_unique<InitProbe>();
}

FL_REGISTER_PLUGIN(fl::Aggregator, "init_probe", fedkit::ProxySpec, CreateInitProbe);

// Each client's start minus the broadcast model: one SGD step with a vanishing
// learning rate leaves the weights where they began.
std::map<int64_t, at::Tensor> Starts(uint64_t seed, bool independent) {
  std::map<int64_t, at::Tensor> deltas;
  recorded_deltas = &deltas;
  fedkit::ExperimentSpec spec = Spec(absl::StrCat(
      "seed: ", seed, " partition { num_clients: 4 } client { steps: 1 optimizer { lr: 1e-12 } }"
      " server { rounds: 1 one_shot: true independent_init: ", independent ? "true" : "false",
      " } aggregator { name: 'init_probe' } simulation { workers: 2 }"));
  RunSpec(spec, absl::StrCat("init_", seed, "_", independent));
  recorded_deltas = nullptr;
  return deltas;
}

TEST(EndToEndTest, IndependentInitGivesEachClientItsOwnSeededStart) {
  const auto first = Starts(5, true);
  ASSERT_EQ(first.size(), 4u);
  for (int64_t a = 0; a < 4; ++a) {
    // Away from the broadcast model, and from every other client's start.
    EXPECT_GT(first.at(a).norm().item<double>(), 1.0) << a;
    for (int64_t b = a + 1; b < 4; ++b) {
      EXPECT_GT((first.at(a) - first.at(b)).norm().item<double>(), 1.0) << a << " " << b;
    }
  }
  // The same seed gives the same starts (whatever worker trains whom); another, others.
  const auto again = Starts(5, true);
  const auto other = Starts(6, true);
  for (int64_t k = 0; k < 4; ++k) {
    EXPECT_TRUE(first.at(k).equal(again.at(k))) << k;
    EXPECT_GT((first.at(k) - other.at(k)).norm().item<double>(), 1.0) << k;
  }
  // Without the option every client starts from the broadcast model.
  for (const auto& [k, delta] : Starts(5, false)) EXPECT_LT(delta.norm().item<double>(), 1e-6) << k;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(EndToEndTest, OneShotReportEvaluatesEveryClientAndEveryAggregate) {
  fedkit::ExperimentSpec spec = Spec(
      "partition { num_clients: 5 options { [type.googleapis.com/fedkit.data.DirichletOptions] "
      "{ alpha: 0.1 } } } client { epochs: 2 } "
      "server { rounds: 1 one_shot: true independent_init: true "
      "  compare { aggregator { name: 'split_average' } } "
      "  compare { label: 'fedavg (by size)' aggregator { name: 'fedavg' } } } "
      "aggregator { name: 'maecho' options { [type.googleapis.com/fedkit.aggregators.MaEchoOptions]"
      " { iterations: 5 } } }");
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/one_shot_report");
  auto experiment = fl::BuildExperiment(spec);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto result = fl::RunExperiment(*experiment, dir);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->rows.size(), 1u);
  EXPECT_EQ(result->rows[0].clients, 5);

  const std::string csv = ReadFile(dir + "/one_shot.csv");
  std::vector<std::string> lines = absl::StrSplit(csv, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 1u + 5 + 3) << csv;
  EXPECT_THAT(lines[0], HasSubstr("kind,label,examples,test_accuracy,test_loss,"
                                  "aggregation_seconds,objective_end,objective_start"));
  for (int k = 0; k < 5; ++k) EXPECT_THAT(lines[1 + k], HasSubstr(absl::StrCat("client,client ", k, ",")));
  // The spec's aggregator's row is what metrics.csv reports for the round.
  const std::vector<std::string> main = absl::StrSplit(lines[6], ',');
  EXPECT_EQ(main[0], "aggregate");
  EXPECT_EQ(main[1], "maecho");
  EXPECT_NEAR(std::stod(main[3]), result->rows[0].test_accuracy, 1e-6);
  EXPECT_GT(std::stod(main[5]), 0.0);
  EXPECT_THAT(lines[7], HasSubstr("aggregate,split_average,"));
  EXPECT_THAT(lines[8], HasSubstr("aggregate,fedavg (by size),"));
  const std::string summary = ReadFile(dir + "/summary.json");
  EXPECT_THAT(summary, HasSubstr("\"aggregation_seconds\": "));
  EXPECT_THAT(summary, HasSubstr("\"one_shot\": {\"clients\": [{\"label\": \"client 0\""));
}

// The observer sees every evaluated row with the model of that round, and
// returning false ends the run there as if it were the last: rows, model and
// summary.json all stop at that round.
TEST(EndToEndTest, ARoundObserverSeesEachRowAndCanEndTheRun) {
  auto experiment = fl::BuildExperiment(Spec("server { eval_every: 2 }"));
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/observed");
  std::vector<int> seen;
  fl::ModelState last_seen;
  auto result = fl::RunExperiment(
      *experiment, dir, nullptr, [&](const fl::MetricsRow& row, const fl::ModelState& global) {
        seen.push_back(row.round);
        last_seen = global.Clone();
        return row.round < 4;
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(seen, ::testing::ElementsAre(2, 4));
  ASSERT_EQ(result->rows.size(), 2u);
  EXPECT_EQ(result->rows.back().round, 4);
  ExpectSameModel(result->final_model, last_seen);
  EXPECT_THAT(ReadFile(dir + "/summary.json"), HasSubstr("\"rounds\": 4"));

  // The full run goes on to round 8 and differs from the stopped one.
  fl::ExperimentResult full = RunSpec(Spec("server { eval_every: 2 }"), "unobserved");
  EXPECT_EQ(full.rows.back().round, 8);
  EXPECT_NEAR(full.rows[1].test_accuracy, result->rows[1].test_accuracy, 1e-12);
}

TEST(EndToEndTest, MaEchoAggregatesEveryRoundOfMultiRoundFl) {
  // The paper's Fig. 9 use: every round's clients send fresh projections.
  fl::ExperimentResult result = RunSpec(
      Spec("server { rounds: 3 clients_per_round: 5 } aggregator { name: 'maecho' options { "
           "[type.googleapis.com/fedkit.aggregators.MaEchoOptions] { iterations: 5 } } }"),
      "maecho_rounds");
  ASSERT_EQ(result.rows.size(), 3u);
  for (const fl::MetricsRow& row : result.rows) {
    EXPECT_EQ(row.clients, 5);
    EXPECT_EQ(row.rejected, 0);
    EXPECT_LT(row.diagnostics.at("objective_end"), row.diagnostics.at("objective_start"));
  }
  EXPECT_GT(result.rows.back().test_accuracy, 0.5);
}

TEST(EndToEndTest, CompressedUploadsAndDownloadsStillLearnAndCountTheirBytes) {
  fl::ExperimentResult plain = RunSpec(Spec(), "upload_plain");
  fl::ExperimentResult compressed = RunSpec(
      Spec("client { upload { kind: SPARSE_TERNARY fraction: 0.05 error_feedback: true } }"),
      "upload_stc");
  ASSERT_EQ(compressed.rows.size(), plain.rows.size());
  // 5% of the entries as a position, a sign bit and a shared magnitude: well under a
  // tenth of the float32 deltas (the bytes down are the same model both times).
  EXPECT_LT(compressed.rows.back().bytes_up * 10, plain.rows.back().bytes_up);
  EXPECT_EQ(compressed.rows.back().bytes_down, plain.rows.back().bytes_down);
  EXPECT_GT(compressed.rows.back().test_accuracy, 0.6);
  // Both ways: the download too, 10% of each tensor with error feedback.
  fl::ExperimentResult both = RunSpec(
      Spec("client { upload { kind: SPARSE_TERNARY fraction: 0.05 error_feedback: true } } "
           "server { download { kind: SPARSE_TERNARY fraction: 0.1 error_feedback: true } }"),
      "both_ways");
  EXPECT_LT(both.rows.back().bytes_down * 5, plain.rows.back().bytes_down);
  EXPECT_GT(both.rows.back().test_accuracy, 0.5);
  auto bad = fl::BuildExperiment(
      Spec("client { upload { kind: TOP_K } } server { download { kind: TOP_K fraction: 2 } }"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("client.upload.fraction: must be in (0, 1], got 0"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("server.download.fraction: must be in (0, 1], got 2"));
}

TEST(EndToEndTest, StragglersAndDropoutsAreCountedAndIndependentOfWorkers) {
  const std::string system =
      "client { system { straggler_fraction: 0.5 inactive_fraction: 0.2 } } "
      "server { incomplete_updates: SCALE } ";
  fl::ExperimentResult one = RunSpec(Spec(system + "simulation { workers: 1 }"), "system_w1");
  fl::ExperimentResult three = RunSpec(Spec(system + "simulation { workers: 3 }"), "system_w3");
  ASSERT_EQ(one.rows.size(), three.rows.size());
  int incomplete = 0, dropped = 0;
  for (size_t r = 0; r < one.rows.size(); ++r) {
    EXPECT_EQ(one.rows[r].incomplete, three.rows[r].incomplete) << r;
    EXPECT_EQ(one.rows[r].dropped, three.rows[r].dropped) << r;
    EXPECT_EQ(one.rows[r].test_accuracy, three.rows[r].test_accuracy) << r;
    // Every sampled client is accepted, incomplete or not, unless it dropped out.
    EXPECT_EQ(one.rows[r].clients + one.rows[r].dropped, 10) << r;
    incomplete += one.rows[r].incomplete;
    dropped += one.rows[r].dropped;
  }
  // 80 client-rounds: about 80 * 0.8 * 0.5 * (1 - 1 / E) incomplete, 80 * 0.2 dropped.
  EXPECT_GT(incomplete, 15);
  EXPECT_GT(dropped, 5);
  EXPECT_GT(one.rows.back().test_accuracy, 0.6);
}

TEST(EndToEndTest, PoissonSamplingDrawsEachRoundsCohortAsTheSamplerDoes) {
  fl::ExperimentResult result =
      RunSpec(Spec("server { rounds: 4 cohort_sampling: POISSON }"), "poisson");
  ASSERT_EQ(result.rows.size(), 4);
  // q = 10 / 20 per client, seed 5 (kSmallSpec): every sampled client is accepted.
  for (int round = 1; round <= 4; ++round) {
    EXPECT_EQ(result.rows[round - 1].clients,
              static_cast<int>(fl::SamplePoissonCohort(20, 0.5, 5, round).size()))
        << "round " << round;
  }
}

TEST(ValidationTest, OneShotOptionsAreCheckedWithTheirPaths) {
  auto experiment = fl::BuildExperiment(
      Spec("server { independent_init: true compare { aggregator { name: 'fedavg' } } }"));
  ASSERT_FALSE(experiment.ok());
  EXPECT_THAT(std::string(experiment.status().message()),
              HasSubstr("server.independent_init: applies to one-shot runs only (server.one_shot)"));
  EXPECT_THAT(std::string(experiment.status().message()),
              HasSubstr("server.compare: applies to one-shot runs only (server.one_shot)"));
  experiment = fl::BuildExperiment(
      Spec("server { rounds: 1 one_shot: true cohort_sampling: POISSON "
           "compare { aggregator { name: 'split_average' } } "
           "compare { aggregator { name: 'split_average' } } compare { aggregator { name: 'x' } } }"));
  ASSERT_FALSE(experiment.ok());
  EXPECT_THAT(std::string(experiment.status().message()),
              HasSubstr("server.compare[1].label: \"split_average\" is also server.compare[0]'s"));
  EXPECT_THAT(std::string(experiment.status().message()),
              HasSubstr("server.compare[2].aggregator.name: aggregator \"x\" is not registered"));
  EXPECT_THAT(std::string(experiment.status().message()),
              HasSubstr("server.cohort_sampling: one-shot runs take every client (server.one_shot)"));
}

TEST(ValidationTest, BatchOrderFoldersAreChecked) {
  const std::string used = std::string(std::getenv("TEST_TMPDIR")) + "/used_orders";
  std::filesystem::create_directories(used + "/1");
  std::ofstream(used + "/1/0.txt") << "0\n";
  auto experiment = fl::BuildExperiment(Spec(absl::StrCat(
      "client { batch_order_dir: '", used, "' batch_order_record_dir: '", used, "' }")));
  ASSERT_EQ(experiment.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(experiment.status().message());
  EXPECT_THAT(message,
              HasSubstr("client.batch_order_dir: is only read with batch_order: FROM_FILE"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("client.batch_order_record_dir: \"", used,
                                              "\" must be a new or empty folder")));
}

TEST(ValidationTest, EveryProblemIsReportedWithItsFieldPath) {
  auto experiment = fl::BuildExperiment(Spec(
      "server { rounds: 0 clients_per_round: 50 min_accepted_updates: 51 } "
      "client { optimizer { lr: -0.1 } } "
      "aggregator { name: 'fedavgg' } "
      "model { options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 1 } } } "
      "partition { options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: -2 } } }"));
  ASSERT_EQ(experiment.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(experiment.status().message());
  EXPECT_THAT(message, HasSubstr("server.rounds: must be >= 1, got 0"));
  EXPECT_THAT(message,
              HasSubstr("server.clients_per_round: must be in [1, partition.num_clients = 20], got 50"));
  EXPECT_THAT(message, HasSubstr("server.min_accepted_updates: must be in [0, clients_per_round "
                                 "= 50], got 51"));
  EXPECT_THAT(message, HasSubstr("client.optimizer.lr: must be > 0, got -0.1"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat(
                           "aggregator.name: aggregator \"fedavgg\" is not registered; known: ",
                           absl::StrJoin(fl::Registry<fl::Aggregator>::Global().Names(), ", "))));
  EXPECT_THAT(message, HasSubstr("model (mlp): options: model \"mlp\" takes "
                                 "fedkit.models.MlpOptions, got fedkit.data.DirichletOptions"));
  EXPECT_THAT(message, HasSubstr("partition (dirichlet): options.alpha: must be > 0, got -2"));
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 6);  // seven problems, one per line
}

// Regression: the plan's hooks and client.hooks were concatenated, so FedProx with
// the fedprox hook doubled mu, and FedLAW with a holdout hook shared one state slot.
TEST(ValidationTest, AHookThatWouldRunTwiceIsRefusedNamingBothSources) {
  auto doubled = fl::BuildExperiment(
      Spec("aggregator { name: 'fedprox' } client { hooks { name: 'fedprox' } }"));
  EXPECT_EQ(doubled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(doubled.status().message(),
              HasSubstr("client.hooks[0].name: hook \"fedprox\" is already requested by "
                        "aggregator \"fedprox\""));
  auto holdout = fl::BuildExperiment(
      Spec("aggregator { name: 'fedlaw' } server { proxy { size: 200 } } "
           "client { hooks { name: 'holdout' } }"));
  EXPECT_THAT(holdout.status().message(),
              HasSubstr("client.hooks[0].name: hook \"holdout\" is already requested by "
                        "aggregator \"fedlaw\""));
  auto twice = fl::BuildExperiment(
      Spec("client { hooks { name: 'holdout' } hooks { name: 'holdout' } }"));
  EXPECT_THAT(twice.status().message(),
              HasSubstr("client.hooks[1].name: hook \"holdout\" is also client.hooks[0]"));
}

TEST(ValidationTest, AnAggregatorsClientHalfIsRefusedInClientHooks) {
  auto experiment = fl::BuildExperiment(Spec("client { hooks { name: 'scaffold' } }"));
  EXPECT_THAT(experiment.status().message(),
              HasSubstr("client.hooks[0].name: hook \"scaffold\" is the client half of an "
                        "aggregator"));
}

// Regression: --validate_only accepted proxy-trained aggregators without a proxy
// set, and the run failed in round 1 after loading the data.
TEST(ValidationTest, ProxyTrainedAggregatorsNeedAProxySet) {
  int proxy_trained = 0;
  for (const std::string& name : fl::Registry<fl::Aggregator>::Global().Names()) {
    auto aggregator = fl::Registry<fl::Aggregator>::Global().Create(name, {});
    ASSERT_TRUE(aggregator.ok()) << name;
    // A model with normalisation layers, which FedBN keeps on the clients.
    auto experiment = fl::BuildExperiment(Spec(absl::StrCat(
        "aggregator { name: '", name, "' } model { options { [type.googleapis.com/fedkit.models."
        "MlpOptions] { hidden: [64] batch_norm: true } } }")));
    if (!(*aggregator)->properties().uses_proxy) {
      EXPECT_TRUE(experiment.ok()) << name << ": " << experiment.status();
      continue;
    }
    ++proxy_trained;
    EXPECT_THAT(experiment.status().message(),
                HasSubstr(absl::StrCat("server.proxy.size: aggregator \"", name,
                                       "\" trains on a server-held proxy set")))
        << name;
  }
  EXPECT_GE(proxy_trained, 3);  // fedlaw, feddf, server_ft at least
}

TEST(ValidationTest, ProxyImbalanceMustBeInZeroOne) {
  auto experiment = fl::BuildExperiment(Spec("server { proxy { size: 200 imbalance: 0 } }"));
  EXPECT_THAT(experiment.status().message(),
              HasSubstr("server.proxy.imbalance: must be in (0, 1], got 0"));
}

TEST(ValidationTest, MissingNamesListTheChoices) {
  fedkit::ExperimentSpec spec = Spec();
  spec.mutable_dataset()->clear_name();
  spec.mutable_client()->clear_budget();
  auto experiment = fl::BuildExperiment(spec);
  EXPECT_THAT(experiment.status().message(), HasSubstr("dataset.name: required; one of: "));
  EXPECT_THAT(experiment.status().message(), HasSubstr("fashion_mnist"));
  EXPECT_THAT(experiment.status().message(), HasSubstr("client: set one of epochs or steps"));
}

TEST(ValidationTest, MissingDatasetFilesNameThePathsWhenRun) {
  auto experiment = fl::BuildExperiment(Spec(
      "dataset { options { [type.googleapis.com/fedkit.data.FashionMnistOptions] { dir: '/no/such' } } }"));
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto result = fl::RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/missing"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("/no/such/train-images-idx3-ubyte[.gz]"));
}

// Records each client's share of the training examples (inputs and labels, in
// share order) as its hooks see it.
class ShareProbe : public fl::ClientHook {
 public:
  absl::Status BeforeTraining(fl::HookContext& context) override {
    const at::Tensor index = at::tensor(*context.client_indices, at::kLong);
    fl::Examples share{context.examples->x.index_select(0, index),
                       context.examples->y.index_select(0, index)};
    absl::MutexLock lock(&mutex);
    shares[context.client_id] = std::move(share);
    return absl::OkStatus();
  }
  static inline absl::Mutex mutex;
  static inline std::map<int64_t, fl::Examples> shares;
};
absl::StatusOr<std::unique_ptr<fl::ClientHook>> CreateShareProbe(
    const fedkit::ProxySpec&, const fl::ClientHook::CreateArgs&) {
  return std::make_unique<ShareProbe>();
}
FL_REGISTER_PLUGIN(fl::ClientHook, "share_probe", fedkit::ProxySpec, CreateShareProbe);

// Records the proxy set the server holds; the model stays as it was.
class ProxyRecorder : public fl::Aggregator {
 public:
  absl::Status Accumulate(fl::ClientUpdate, fl::ServerContext&) override {
    return absl::OkStatus();
  }
  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    proxy = {context.proxy->x.clone(), context.proxy->y.clone()};
    return global.Clone();
  }
  static inline fl::Examples proxy;
};
absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateProxyRecorder(
    const fedkit::ProxySpec&, const fl::Aggregator::CreateArgs&) {
  return std::make_unique<ProxyRecorder>();
}
FL_REGISTER_PLUGIN(fl::Aggregator, "proxy_recorder", fedkit::ProxySpec, CreateProxyRecorder);

TEST(EndToEndTest, NaturalPartitionFollowsOwnersPastATrainProxy) {
  // FedProx's synthetic(1, 1), 30 devices: one client per device, after a proxy set
  // has taken rows out of TRAIN (the owner ids must lose the same rows). Client k
  // must hold exactly the examples of the k-th smallest owner id, in order, less
  // those the proxy took: worked out here from the dataset as loaded, every client
  // in the one round.
  fedkit::ExperimentSpec spec = Spec(
      "dataset { name: 'synthetic_leaf' options { [type.googleapis.com/fedkit.data.SyntheticLeafOptions] "
      "{ alpha: 1 beta: 1 } } } "
      "server { rounds: 1 clients_per_round: 30 proxy { split: TRAIN size: 20 } } "
      "client { hooks { name: 'share_probe' } } aggregator { name: 'proxy_recorder' }");
  spec.mutable_partition()->set_name("natural");
  spec.mutable_partition()->set_num_clients(30);
  spec.mutable_partition()->clear_options();
  spec.mutable_client()->set_steps(1);  // the shares are the point, not the training
  auto experiment = fl::BuildExperiment(spec);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto data = experiment->dataset->Load();
  ASSERT_TRUE(data.ok()) << data.status();
  ASSERT_TRUE(data->train_owners.defined());
  ShareProbe::shares.clear();
  auto result = fl::RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/natural"));
  ASSERT_TRUE(result.ok()) << result.status();

  // The proxy's rows of TRAIN, found by their inputs (continuous random features:
  // each matches one row).
  const fl::Examples& proxy = ProxyRecorder::proxy;
  ASSERT_EQ(proxy.size(), 20);
  const int64_t n = data->train.size();
  const at::Tensor x = data->train.x.reshape({n, -1});
  std::set<int64_t> proxy_rows;
  for (int64_t i = 0; i < proxy.size(); ++i) {
    const at::Tensor rows = x.eq(proxy.x[i].reshape({1, -1})).all(1).nonzero();
    ASSERT_EQ(rows.numel(), 1) << "proxy example " << i;
    const int64_t row = rows.item<int64_t>();
    EXPECT_EQ(data->train.y[row].item<int64_t>(), proxy.y[i].item<int64_t>());
    proxy_rows.insert(row);
  }
  ASSERT_EQ(proxy_rows.size(), 20u);

  std::map<int64_t, std::vector<int64_t>> rows_by_owner;
  const at::Tensor owners = data->train_owners.to(at::kLong).contiguous();
  const int64_t* owner = owners.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (proxy_rows.count(i) == 0) rows_by_owner[owner[i]].push_back(i);
  }
  ASSERT_EQ(rows_by_owner.size(), 30u);
  ASSERT_EQ(ShareProbe::shares.size(), 30u);
  int64_t client = 0;
  for (const auto& [owner, rows] : rows_by_owner) {
    const at::Tensor index = at::tensor(rows, at::kLong);
    const fl::Examples& share = ShareProbe::shares.at(client);
    EXPECT_EQ(share.size(), static_cast<int64_t>(rows.size())) << "client " << client;
    EXPECT_TRUE(share.x.equal(data->train.x.index_select(0, index)))
        << "client " << client << " does not hold owner " << owner << "'s inputs";
    EXPECT_TRUE(share.y.equal(data->train.y.index_select(0, index)))
        << "client " << client << " does not hold owner " << owner << "'s labels";
    ++client;
  }
}

TEST(ValidationTest, NaturalPartitionOfADatasetWithoutOwnersSaysSo) {
  fedkit::ExperimentSpec spec = Spec();
  spec.mutable_partition()->set_name("natural");
  spec.mutable_partition()->clear_options();
  auto experiment = fl::BuildExperiment(spec);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto result = fl::RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/no_owners"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(),
              HasSubstr("partition (natural): the dataset provides no owner ids"));
}

}  // namespace
