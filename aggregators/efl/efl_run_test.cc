// EFL through the real runner (BuildExperiment + RunExperiment) on a slice of
// Fashion-MNIST: with lambda = 0 the elastic term is zero, and EFL's step is its
// base's, so EFL must be FedAvg bit for bit; with lambda > 0 it must not be.

#include <cstdlib>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/experiment.h"
#include "fl/spec_loader.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

// Every client in every round, so from round 2 on each client trains with the sums
// U, V of all five clients' Fisher terms.
constexpr char kSpec[] = R"pb(
  name: "efl_run"
  seed: 7
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 400 test_limit: 200 }
    }
  }
  partition { name: "iid" num_clients: 5 }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [16] } }
  }
  client { steps: 5 batch_size: 16 optimizer { kind: SGD lr: 0.1 } }
  server { rounds: 3 clients_per_round: 5 }
  simulation { workers: 2 }
)pb";

fl::ExperimentResult RunWith(const std::string& aggregator, const std::string& dir) {
  auto spec = fl::ParseSpec(kSpec, "kSpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(fl::ApplyOverride(aggregator, *spec).ok()) << aggregator;
  auto experiment = fl::BuildExperiment(*spec);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  auto result = fl::RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/", dir));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : fl::ExperimentResult();
}

std::string Efl(double lambda) {
  return absl::StrCat(
      "aggregator { name: 'efl' options { [type.googleapis.com/fedkit.aggregators.EflOptions] "
      "{ client { lambda: ",
      lambda, " } } } }");
}

// The Fisher pass after training, the extras and the broadcast sums must change
// nothing the clients or the server compute: the same arithmetic in the same
// order, hence equality, not closeness.
TEST(EflRunTest, LambdaZeroIsFedAvgBitForBit) {
  const fl::ExperimentResult fedavg = RunWith("aggregator { name: 'fedavg' }", "fedavg");
  const fl::ExperimentResult efl = RunWith(Efl(0), "efl_0");
  ASSERT_EQ(fedavg.rows.size(), 3u);
  ASSERT_EQ(efl.rows.size(), 3u);
  ASSERT_TRUE(fedavg.final_model.CheckSameLayout(efl.final_model).ok());
  for (size_t i = 0; i < fedavg.final_model.size(); ++i) {
    EXPECT_TRUE(fedavg.final_model.tensor(i).equal(efl.final_model.tensor(i)))
        << fedavg.final_model.entries()[i].name;
  }
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(fedavg.rows[r].test_loss, efl.rows[r].test_loss) << "round " << r + 1;
    EXPECT_EQ(fedavg.rows[r].train_loss, efl.rows[r].train_loss) << "round " << r + 1;
  }
  // The run really carried Fisher sums: EFL uploads u_k, v_k besides the delta.
  EXPECT_GT(efl.rows[0].bytes_up, fedavg.rows[0].bytes_up);

  // And the comparison can tell: the same run with lambda = 1 trains elsewhere.
  const fl::ExperimentResult elastic = RunWith(Efl(1), "efl_1");
  ASSERT_EQ(elastic.rows.size(), 3u);
  EXPECT_EQ(elastic.rows[0].train_loss, fedavg.rows[0].train_loss);  // no sums in round 1
  EXPECT_NE(elastic.rows[2].train_loss, fedavg.rows[2].train_loss);
  double difference = 0;
  for (size_t i = 0; i < fedavg.final_model.size(); ++i) {
    difference += (elastic.final_model.tensor(i) - fedavg.final_model.tensor(i)).abs().sum().item<double>();
  }
  EXPECT_GT(difference, 0);
}

}  // namespace
}  // namespace aggregators
