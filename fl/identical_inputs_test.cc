// Identical inputs (docs/identical-inputs.md): a run writes its split, proxy set and
// initial model (output.write_inputs), and another run started from those files
// (partitioner "file", server.proxy.indices_path, initial_model_path) repeats it
// bit for bit; every inconsistent combination or file is reported by field.
// Real Fashion-MNIST (the end-to-end tests' slice), a small MLP, two rounds.

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fl/checkpoint.h"
#include "fl/experiment.h"
#include "fl/model.h"
#include "fl/model_file.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = R"pb(
  name: "identical_inputs"
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
  server { rounds: 2 clients_per_round: 10 }
  aggregator { name: "fedavg" }
  simulation { workers: 1 threads_per_worker: 1 }
)pb";

std::string Dir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

fedkit::ExperimentSpec Spec(const std::string& overrides) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(kSpec, "kSpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  absl::Status applied = ApplyOverride(overrides, *spec);
  EXPECT_TRUE(applied.ok()) << applied << "\n" << overrides;
  return *spec;
}

absl::StatusOr<ExperimentResult> RunSpec(const fedkit::ExperimentSpec& spec,
                                         const std::string& dir,
                                         const Checkpoint* resume = nullptr) {
  absl::StatusOr<Experiment> experiment = BuildExperiment(spec);
  if (!experiment.ok()) return experiment.status();
  return RunExperiment(*experiment, Dir(dir), resume);
}

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// metrics.csv without its wall-clock column, the one thing two equal runs differ in.
std::string MetricsWithoutSeconds(const std::string& dir) {
  std::vector<std::vector<std::string>> rows;
  for (absl::string_view line : absl::StrSplit(Contents(Dir(dir) + "/metrics.csv"), '\n')) {
    rows.push_back(absl::StrSplit(line, ','));
  }
  const auto& header = rows.front();
  const size_t seconds = std::find(header.begin(), header.end(), "seconds") - header.begin();
  EXPECT_LT(seconds, header.size());
  std::string kept;
  for (auto& row : rows) {
    if (seconds < row.size()) row.erase(row.begin() + seconds);
    absl::StrAppend(&kept, absl::StrJoin(row, ","), "\n");
  }
  return kept;
}

// A fresh instance of `spec`'s model, initialised from LibTorch's seed `seed`.
ModelState ModelOf(const fedkit::ExperimentSpec& spec, uint64_t seed) {
  at::manual_seed(seed);
  auto model = Registry<Model>::Global().Create(spec.model().name(), spec.model().options(),
                                                {{1, 28, 28}, 10});
  EXPECT_TRUE(model.ok()) << model.status();
  return ModelState::FromModule(**model);
}

void ExpectSameModel(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a.tensor(i).equal(b.tensor(i))) << i;
}

class IdenticalInputsTest : public ::testing::Test {
 protected:
  // The first run: its own partition and proxy draws, and an initial model that
  // is not the seed's (so a run that ignored initial_model_path would differ).
  static void SetUpTestSuite() {
    start_ = new std::string(Dir("start.pt"));
    ASSERT_TRUE(WriteModelFile(*start_, ModelOf(Spec(""), 123)).ok());
    first_spec_ = new fedkit::ExperimentSpec(Spec(absl::StrCat(
        "initial_model_path: '", *start_, "' server { proxy { split: TRAIN size: 100 } } ",
        "output { write_inputs: true }")));
    absl::StatusOr<ExperimentResult> first = RunSpec(*first_spec_, "first");
    ASSERT_TRUE(first.ok()) << first.status();
    first_ = new ExperimentResult(*std::move(first));
  }
  static void TearDownTestSuite() {
    delete first_;
    delete first_spec_;
    delete start_;
  }

  static std::string* start_;
  static fedkit::ExperimentSpec* first_spec_;
  static ExperimentResult* first_;
};
std::string* IdenticalInputsTest::start_ = nullptr;
fedkit::ExperimentSpec* IdenticalInputsTest::first_spec_ = nullptr;
ExperimentResult* IdenticalInputsTest::first_ = nullptr;

TEST_F(IdenticalInputsTest, ARunFromAnotherRunsWrittenInputsRepeatsItBitForBit) {
  ASSERT_NE(first_, nullptr);
  const std::string first = Dir("first");
  // The written initial model is the one the run started from.
  absl::StatusOr<ModelState> initial =
      ReadModelFile(first + "/initial_model.pt", first_->final_model);
  ASSERT_TRUE(initial.ok()) << initial.status();
  ExpectSameModel(*initial, ModelOf(Spec(""), 123));

  // Nothing drawn: the partitioner reads, the proxy set has no size.
  absl::StatusOr<ExperimentResult> second = RunSpec(
      Spec(absl::StrCat(
          "partition { name: 'file' options { [type.googleapis.com/fedkit.data.FilePartitionOptions]"
          " { path: '", first, "/partition.json' } } } "
          "server { proxy { split: TRAIN indices_path: '", first, "/proxy.json' } } "
          "initial_model_path: '", first, "/initial_model.pt' output { write_inputs: true }")),
      "second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(MetricsWithoutSeconds("second"), MetricsWithoutSeconds("first"));
  // Byte comparisons as booleans: a dump of a model.pt would bury the failure.
  EXPECT_TRUE(Contents(Dir("second/model.pt")) == Contents(first + "/model.pt"))
      << "model.pt differs";
  // And what the second run writes of its inputs is what it read.
  for (const char* file : {"/partition.json", "/proxy.json", "/initial_model.pt"}) {
    EXPECT_TRUE(Contents(Dir("second") + file) == Contents(first + file)) << file << " differs";
  }
  EXPECT_THAT(Contents(first + "/proxy.json"), ::testing::StartsWith("{\"indices\": ["));
}

TEST_F(IdenticalInputsTest, AResumedRunContinuesFromItsCheckpointNotTheInitialModel) {
  ASSERT_NE(first_, nullptr);
  fedkit::ExperimentSpec stopped = *first_spec_;
  stopped.mutable_server()->set_rounds(1);
  stopped.mutable_output()->set_checkpoint_every(1);
  ASSERT_TRUE(RunSpec(stopped, "stopped").ok());
  std::filesystem::remove(Dir("stopped/partition.json"));
  absl::StatusOr<Checkpoint> checkpoint =
      ReadCheckpoint(Dir("stopped/") + kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  absl::StatusOr<ExperimentResult> resumed = RunSpec(*first_spec_, "stopped", &*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ExpectSameModel(resumed->final_model, first_->final_model);
  // The inputs are the first start's: a resumed run does not write them again.
  EXPECT_FALSE(std::filesystem::exists(Dir("stopped/partition.json")));
}

std::string BuildError(const fedkit::ExperimentSpec& spec) {
  absl::StatusOr<Experiment> experiment = BuildExperiment(spec);
  EXPECT_FALSE(experiment.ok());
  return std::string(experiment.status().message());
}

TEST(IdenticalInputsValidationTest, AProxyFileExcludesSizeAndImbalance) {
  const std::string message = BuildError(
      Spec("server { proxy { indices_path: 'p.json' size: 10 imbalance: 0.5 } }"));
  EXPECT_THAT(message, HasSubstr("server.proxy.indices_path: excludes server.proxy.size: the "
                                 "file fixes the proxy set"));
  EXPECT_THAT(message, HasSubstr("server.proxy.indices_path: excludes server.proxy.imbalance: "
                                 "the file fixes the proxy set"));
}

TEST(IdenticalInputsValidationTest, AProxyFileIsAProxySetForAggregatorsThatNeedOne) {
  // fedlaw trains on the proxy set; the file is read when the run starts.
  EXPECT_TRUE(BuildExperiment(Spec("aggregator { name: 'fedlaw' } "
                                   "server { proxy { indices_path: 'later.json' } }"))
                  .ok());
  EXPECT_THAT(BuildError(Spec("aggregator { name: 'fedlaw' }")),
              HasSubstr("server.proxy.size: aggregator \"fedlaw\" trains on a server-held proxy "
                        "set: set server.proxy { size: N } with N > 0 (or indices_path)"));
}

TEST(IdenticalInputsValidationTest, AnInitialModelExcludesIndependentInitialisation) {
  const std::string path = Dir("independent.pt");
  ASSERT_TRUE(WriteModelFile(path, ModelOf(Spec(""), 1)).ok());
  EXPECT_THAT(BuildError(Spec(absl::StrCat("initial_model_path: '", path,
                                           "' server { one_shot: true rounds: 1 "
                                           "independent_init: true }"))),
              HasSubstr("initial_model_path: excludes server.independent_init, under which every "
                        "client starts from its own initialisation"));
}

TEST(IdenticalInputsValidationTest, AnInitialModelThatDoesNotFitIsNamedWithTheField) {
  const std::string missing = Dir("missing.pt");
  EXPECT_THAT(BuildError(Spec(absl::StrCat("initial_model_path: '", missing, "'"))),
              HasSubstr(absl::StrCat("initial_model_path: cannot open model file ", missing)));

  const std::string narrow = Dir("narrow.pt");
  const fedkit::ExperimentSpec narrow_spec = Spec(
      "model { options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } } }");
  ASSERT_TRUE(WriteModelFile(narrow, ModelOf(narrow_spec, 1)).ok());
  const std::string shape = BuildError(Spec(absl::StrCat("initial_model_path: '", narrow, "'")));
  EXPECT_THAT(shape, HasSubstr(absl::StrCat("initial_model_path: ", narrow, ": \"")));
  EXPECT_THAT(shape, HasSubstr("\" has shape [32, 784], the model [64, 784]"));

  const std::string biased = Dir("biased.pt");
  ASSERT_TRUE(WriteModelFile(biased, ModelOf(Spec(""), 1)).ok());
  const std::string unbiased = Dir("unbiased.pt");
  const std::string no_bias =
      "model { options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [64] "
      "bias: false } } }";
  ASSERT_TRUE(WriteModelFile(unbiased, ModelOf(Spec(no_bias), 1)).ok());
  EXPECT_THAT(BuildError(Spec(absl::StrCat("initial_model_path: '", unbiased, "'"))),
              HasSubstr(absl::StrCat("initial_model_path: ", unbiased, " has no tensor \"")));
  EXPECT_THAT(
      BuildError(Spec(absl::StrCat(no_bias, " initial_model_path: '", biased, "'"))),
      HasSubstr(absl::StrCat("initial_model_path: ", biased, " has a tensor the model lacks: \"")));
}

}  // namespace
}  // namespace fl
