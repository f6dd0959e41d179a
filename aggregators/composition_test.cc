// Plugins composed through the real runner (BuildExperiment + RunExperiment) on a
// slice of Fashion-MNIST, two rounds each, with 1 and with 3 workers:
//   - every aggregator as Elastic's base;
//   - every client hook a spec may add (not planned_only) under FedAvg and under
//     SCAFFOLD (a stateful aggregator), except where the aggregator plans it itself;
//   - aggregators with non-default options that change their state.
// Each run must accept every update (a composition that rejects returning clients
// fails here), stay finite, send bytes, and give identical weights and metrics for
// 1 and 3 workers. The cases come from the registries, so a new plugin is enrolled
// by linking it into :all.

#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/experiment.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

constexpr char kBaseSpec[] = R"pb(
  name: "composition"
  seed: 3
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 400 test_limit: 300 }
    }
  }
  partition { name: "iid" num_clients: 4 }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [16] } }
  }
  client { steps: 3 batch_size: 16 optimizer { kind: SGD lr: 0.05 } }
  server { rounds: 2 clients_per_round: 3 proxy { split: TEST size: 50 } }
)pb";

struct Case {
  std::string name;
  // Merged into kBaseSpec.
  std::string overrides;
  // Sends less than whole models and deltas (a lossy codec).
  bool compressed = false;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string Aggregator(const std::string& name, const std::string& options_type = "",
                       const std::string& options = "") {
  if (options_type.empty()) return absl::StrCat("aggregator { name: '", name, "' }");
  return absl::StrCat("aggregator { name: '", name, "' options { [type.googleapis.com/fedkit.",
                      "aggregators.", options_type, "] { ", options, " } } }");
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const auto& aggregators = fl::Registry<fl::Aggregator>::Global();
  for (const std::string& base : aggregators.Names()) {
    if (base == "elastic") continue;  // cannot wrap itself (the conformance suite checks)
    cases.push_back({"elastic_over_" + base,
                     Aggregator("elastic", "ElasticOptions", "base { name: '" + base + "' }")});
  }
  const auto& hooks = fl::Registry<fl::ClientHook>::Global();
  for (const std::string& hook : hooks.Names()) {
    auto created = hooks.Create(hook, google::protobuf::Any());
    if (!created.ok() || (*created)->planned_only()) continue;
    for (const char* under : {"fedavg", "scaffold"}) {
      auto aggregator = aggregators.Create(under, google::protobuf::Any());
      if (aggregator.ok() &&
          absl::c_linear_search((*aggregator)->properties().client_hooks, hook)) {
        continue;  // it already runs under its own aggregator
      }
      cases.push_back({hook + "_under_" + under,
                       absl::StrCat(Aggregator(under), " client { hooks { name: '", hook,
                                    "' } }")});
    }
  }
  cases.push_back({"scaffold_option_i",
                   Aggregator("scaffold", "ScaffoldOptions", "control_variate_update: OPTION_I")});
  cases.push_back({"scaffold_exp",
                   Aggregator("scaffold", "ScaffoldOptions", "extrapolation { epsilon: 0.01 }")});
  cases.push_back({"fedexp_paper_form",
                   Aggregator("fedexp", "FedExpOptions", "epsilon_form: PAPER epsilon: 0.01")});
  cases.push_back({"fedlaw_swa",
                   Aggregator("fedlaw", "FedLawOptions", "swa: true server_epochs: 4")});
  // EFL's client term under other server steps, from the spec alone.
  for (const char* base : {"fedexp", "scaffold", "fedadam"}) {
    cases.push_back({absl::StrCat("efl_over_", base),
                     Aggregator("efl", "EflOptions",
                                absl::StrCat("client { lambda: 0.1 } base { name: '", base, "' }"))});
  }
  cases.push_back({"efl_stragglers_compressed_both_ways",
                   absl::StrCat(Aggregator("efl"),
                                " client { system { straggler_fraction: 0.5 } upload { kind: "
                                "SPARSE_TERNARY fraction: 0.1 error_feedback: true } }"
                                " server { incomplete_updates: SCALE download { kind: "
                                "SPARSE_TERNARY fraction: 0.1 error_feedback: true } }"),
                   /*compressed=*/true});
  return cases;
}

class CompositionTest : public ::testing::TestWithParam<Case> {
 protected:
  fl::ExperimentResult Run(int workers) {
    auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
    EXPECT_TRUE(spec.ok()) << spec.status();
    absl::Status merged = fl::ApplyOverride(
        absl::StrCat(GetParam().overrides, " simulation { workers: ", workers, " }"), *spec);
    EXPECT_TRUE(merged.ok()) << merged;
    auto experiment = fl::BuildExperiment(*spec);
    EXPECT_TRUE(experiment.ok()) << experiment.status();
    if (!experiment.ok()) return {};
    auto result = fl::RunExperiment(
        *experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/", GetParam().name, "_w", workers));
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *std::move(result) : fl::ExperimentResult();
  }
};

TEST_P(CompositionTest, EveryUpdateAcceptedFiniteAndIndependentOfWorkers) {
  const fl::ExperimentResult one = Run(1);
  const fl::ExperimentResult three = Run(3);
  ASSERT_EQ(one.rows.size(), 2u);
  ASSERT_EQ(three.rows.size(), 2u);
  int64_t bytes_up = 0;
  for (size_t r = 0; r < one.rows.size(); ++r) {
    const fl::MetricsRow& row = one.rows[r];
    EXPECT_EQ(row.clients, 3) << "round " << row.round;
    EXPECT_EQ(row.rejected, 0) << "round " << row.round;
    EXPECT_TRUE(std::isfinite(row.test_loss)) << "round " << row.round;
    EXPECT_TRUE(std::isfinite(row.train_loss)) << "round " << row.round;
    // Every round sends the model down to 3 clients and at least a delta up (less,
    // but something, when compressed).
    EXPECT_GE(row.bytes_up - bytes_up,
              GetParam().compressed ? 3 : 3 * one.final_model.NumBytes())
        << "round " << row.round;
    bytes_up = row.bytes_up;
    const fl::MetricsRow& other = three.rows[r];
    EXPECT_EQ(row.test_accuracy, other.test_accuracy) << "round " << row.round;
    EXPECT_EQ(row.test_loss, other.test_loss) << "round " << row.round;
    EXPECT_EQ(row.train_loss, other.train_loss) << "round " << row.round;
    EXPECT_EQ(row.bytes_up, other.bytes_up) << "round " << row.round;
    EXPECT_EQ(row.bytes_down, other.bytes_down) << "round " << row.round;
    EXPECT_EQ(row.diagnostics, other.diagnostics) << "round " << row.round;
  }
  if (!GetParam().compressed) {
    EXPECT_EQ(one.rows.back().bytes_down % (2 * 3), 0);
    EXPECT_GE(one.rows.back().bytes_down, 2 * 3 * one.final_model.NumBytes());
  }
  EXPECT_TRUE(one.final_model.AllFinite());
  ASSERT_TRUE(one.final_model.CheckSameLayout(three.final_model).ok());
  for (size_t i = 0; i < one.final_model.size(); ++i) {
    EXPECT_TRUE(one.final_model.tensor(i).equal(three.final_model.tensor(i)))
        << one.final_model.entries()[i].name;
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, CompositionTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace aggregators
