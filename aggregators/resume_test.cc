// Exact resume over the registry, through the real runner (BuildExperiment +
// RunExperiment) on a slice of Fashion-MNIST with 2 workers: a run checkpointed
// after round 2 and resumed to round 4 must end with the same weights, the same
// best model and the same metrics (every column but the wall-clock seconds) as the
// run that went straight to round 4. Every registered aggregator is a case (so a
// new one is enrolled by linking it into :all), plus options that keep state
// across rounds on either side: server momentum, control variates, client
// optimiser state, error-feedback residuals both ways, stragglers.

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fl/aggregator.h"
#include "fl/checkpoint.h"
#include "fl/experiment.h"
#include "fl/model_file.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

constexpr char kBaseSpec[] = R"pb(
  name: "resume"
  seed: 5
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 400 test_limit: 300 }
    }
  }
  partition { name: "iid" num_clients: 5 }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [16] } }
  }
  client { steps: 3 batch_size: 16 optimizer { kind: SGD lr: 0.05 momentum: 0.5 } }
  server { clients_per_round: 3 proxy { split: TEST size: 50 } }
  simulation { workers: 2 }
  output { save_best_model: true }
)pb";

struct Case {
  std::string name;
  std::string overrides;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  std::vector<Case> cases;
  auto with_options = [](const std::string& name, const std::string& type,
                         const std::string& options) {
    return absl::StrCat("aggregator { name: '", name,
                        "' options { [type.googleapis.com/fedkit.aggregators.", type, "] { ",
                        options, " } } }");
  };
  for (const std::string& name : fl::Registry<fl::Aggregator>::Global().Names()) {
    // dp_fedavg's noise from the seed: by default each run draws its own from the
    // operating system, which no resumed run could match.
    cases.push_back({name, name == "dp_fedavg"
                               ? with_options(name, "DpFedAvgOptions", "reproducible_noise: true")
                               : absl::StrCat("aggregator { name: '", name, "' }")});
  }
  cases.push_back({"scaffold_option_i", with_options("scaffold", "ScaffoldOptions",
                                                     "control_variate_update: OPTION_I")});
  cases.push_back({"elastic_over_fedadam_kept_sensitivity",
                   with_options("elastic", "ElasticOptions",
                                "base { name: 'fedadam' } sensitivity { keep_across_rounds: true }")});
  cases.push_back({"fedlaw_swa", with_options("fedlaw", "FedLawOptions", "swa: true")});
  cases.push_back({"fedavg_kept_client_momentum",
                   "aggregator { name: 'fedavg' } client { keep_optimizer_state: true }"});
  cases.push_back({"efl_stragglers_compressed_both_ways",
                   "aggregator { name: 'efl' } client { system { straggler_fraction: 0.5 } upload "
                   "{ kind: SPARSE_TERNARY fraction: 0.1 error_feedback: true } } server { "
                   "incomplete_updates: SCALE download { kind: SPARSE_TERNARY fraction: 0.1 "
                   "error_feedback: true } }"});
  // Personal tensors and models committed by the asynchronous loop, with updates
  // in flight at the checkpoint.
  for (const char* name : {"fedper", "fedbn", "ditto"}) {
    cases.push_back({absl::StrCat(name, "_async"),
                     absl::StrCat("aggregator { name: '", name,
                                  "' } server { async { concurrency: 3 buffer_size: 2 } }")});
  }
  // FedBN keeps the normalisation layers: the model needs some. A method that
  // takes the local steps itself runs plain SGD: no momentum.
  for (Case& c : cases) {
    auto created = fl::Registry<fl::Aggregator>::Global().Create(c.name, google::protobuf::Any());
    if (created.ok() && (*created)->properties().own_local_step) {
      absl::StrAppend(&c.overrides, " client { optimizer { momentum: 0 } }");
    }
    if (absl::StrContains(c.name, "fedbn")) {
      absl::StrAppend(&c.overrides, " model { options { [type.googleapis.com/fedkit.models."
                                    "MlpOptions] { hidden: [16] batch_norm: true } } }");
    }
  }
  return cases;
}

// metrics.csv without its `seconds` column.
std::string MetricsWithoutSeconds(const std::string& dir) {
  std::ifstream in(dir + "/metrics.csv");
  std::stringstream kept;
  std::string line;
  int seconds_column = -1;
  while (std::getline(in, line)) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (seconds_column < 0) {
      for (size_t i = 0; i < cells.size(); ++i) {
        if (cells[i] == "seconds") seconds_column = static_cast<int>(i);
      }
    }
    if (seconds_column >= 0 && seconds_column < static_cast<int>(cells.size())) {
      cells.erase(cells.begin() + seconds_column);
    }
    kept << absl::StrJoin(cells, ",") << "\n";
  }
  return kept.str();
}

void ExpectSameWeights(const fl::ModelState& a, const fl::ModelState& b, const std::string& what) {
  ASSERT_TRUE(a.CheckSameLayout(b).ok()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(a.tensor(i).equal(b.tensor(i))) << what << ": " << a.entries()[i].name;
  }
}

class ResumeTest : public ::testing::TestWithParam<Case> {
 protected:
  std::string Dir(const std::string& run) const {
    return absl::StrCat(getenv("TEST_TMPDIR"), "/", GetParam().name, "_", run);
  }

  fl::Experiment Build(int rounds, int checkpoint_every) {
    auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::Status merged = fl::ApplyOverride(
        absl::StrCat(GetParam().overrides, " server { rounds: ", rounds,
                     " } output { checkpoint_every: ", checkpoint_every, " }"),
        *spec);
    EXPECT_TRUE(merged.ok()) << merged;
    auto experiment = fl::BuildExperiment(*spec);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    return std::move(*experiment);
  }
};

TEST_P(ResumeTest, CheckpointedAndResumedEqualsUninterrupted) {
  fl::Experiment straight = Build(4, 0);
  auto expected = fl::RunExperiment(straight, Dir("straight"));
  ASSERT_TRUE(expected.ok()) << expected.status();

  // Stopped after round 2 (its last), then continued to round 4 in the same folder.
  fl::Experiment first = Build(2, 1);
  ASSERT_TRUE(fl::RunExperiment(first, Dir("resumed")).ok());
  auto checkpoint = fl::ReadCheckpoint(Dir("resumed") + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_EQ(checkpoint->server.rounds_done, 2);
  fl::Experiment rest = Build(4, 1);
  auto spec = fl::ParseSpec(checkpoint->spec, "checkpoint");
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(fl::CheckResumable(*spec, rest.spec).ok());
  auto resumed = fl::RunExperiment(rest, Dir("resumed"), &*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();

  ExpectSameWeights(expected->final_model, resumed->final_model, "final model");
  ASSERT_EQ(expected->rows.size(), 4u);
  ASSERT_EQ(resumed->rows.size(), 4u);
  for (size_t r = 0; r < 4; ++r) {
    const fl::MetricsRow& a = expected->rows[r];
    const fl::MetricsRow& b = resumed->rows[r];
    EXPECT_EQ(a.round, b.round);
    EXPECT_EQ(a.test_accuracy, b.test_accuracy) << "round " << a.round;
    EXPECT_EQ(a.test_loss, b.test_loss) << "round " << a.round;
    EXPECT_EQ(a.train_loss, b.train_loss) << "round " << a.round;
    EXPECT_EQ(a.clients, b.clients) << "round " << a.round;
    EXPECT_EQ(a.rejected, b.rejected) << "round " << a.round;
    EXPECT_EQ(a.incomplete, b.incomplete) << "round " << a.round;
    EXPECT_EQ(a.bytes_up, b.bytes_up) << "round " << a.round;
    EXPECT_EQ(a.bytes_down, b.bytes_down) << "round " << a.round;
    EXPECT_EQ(a.local_steps, b.local_steps) << "round " << a.round;
    EXPECT_EQ(a.diagnostics, b.diagnostics) << "round " << a.round;
  }
  EXPECT_EQ(MetricsWithoutSeconds(Dir("straight")), MetricsWithoutSeconds(Dir("resumed")));

  // The files: final and best models as written (no best model when the best
  // round's model was a predictor, not weights).
  for (const char* file : {"/model.pt", "/best_model.pt"}) {
    const bool written = std::filesystem::exists(Dir("straight") + file);
    ASSERT_EQ(std::filesystem::exists(Dir("resumed") + file), written) << file;
    if (!written) {
      EXPECT_EQ(GetParam().name, "ensemble") << file;
      continue;
    }
    auto a = fl::ReadModelFile(Dir("straight") + file, expected->final_model);
    auto b = fl::ReadModelFile(Dir("resumed") + file, expected->final_model);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    ExpectSameWeights(*a, *b, file);
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, ResumeTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace aggregators
