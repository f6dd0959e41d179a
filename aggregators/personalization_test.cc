// Personalised FL through the real runner (BuildExperiment + RunExperiment) on a
// slice of Fashion-MNIST: what each partial-sharing method keeps on its clients
// never reaches the server (the global model's copy stays as initialised, the
// upload is the shared part's size), each client's own tensors are kept in the
// client state store (and so in checkpoints), and per-client accuracy is measured
// with each client's own model. Also the "FedAvg + FT" evaluation, and the spec
// combinations refused with personal tensors.

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fl/checkpoint.h"
#include "fl/experiment.h"
#include "fl/model_file.h"
#include "fl/personalization.h"
#include "fl/spec_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::testing::HasSubstr;

constexpr char kBaseSpec[] = R"pb(
  name: "personalization"
  seed: 3
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 500 test_limit: 500 }
    }
  }
  partition {
    name: "dirichlet"
    num_clients: 5
    options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.1 } }
  }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [16] batch_norm: true } }
  }
  client { steps: 10 batch_size: 16 optimizer { kind: SGD lr: 0.1 } }
  server { rounds: 3 clients_per_round: 5 }
  output { write_inputs: true checkpoint_every: 3 }
)pb";

absl::StatusOr<fl::Experiment> Build(const std::string& overrides) {
  auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
  if (!spec.ok()) return spec.status();
  if (absl::Status merged = fl::ApplyOverride(overrides, *spec); !merged.ok()) return merged;
  return fl::BuildExperiment(*spec);
}

std::string Dir(const std::string& name) { return absl::StrCat(getenv("TEST_TMPDIR"), "/", name); }

struct Family {
  std::string aggregator;
  // The model's tensors the method keeps (mlp, hidden [16], batch_norm:
  // layers.0 Linear, layers.1 BatchNorm1d, layers.3 Linear).
  std::vector<std::string> personal;
};

void PrintTo(const Family& f, std::ostream* os) { *os << f.aggregator; }

class PartialSharingTest : public ::testing::TestWithParam<Family> {};

// `family` run with `overrides` in `dir`: 15 updates accepted in all (3 rounds of 5
// clients, or 3 asynchronous steps of 5).
void ExpectPersonalTensorsStayOnTheClients(const Family& family, const std::string& overrides,
                                           const std::string& dir) {
  auto experiment =
      Build(absl::StrCat("aggregator { name: '", family.aggregator, "' } ", overrides));
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  ASSERT_EQ(experiment->personal_tensors, family.personal);
  auto result = fl::RunExperiment(*experiment, dir);
  ASSERT_TRUE(result.ok()) << result.status();
  auto initial = fl::ReadModelFile(dir + "/initial_model.pt", result->final_model);
  ASSERT_TRUE(initial.ok()) << initial.status();

  // The server's copy of each personal tensor is the initial one, bit for bit;
  // every shared parameter moved.
  const std::set<std::string> personal(family.personal.begin(), family.personal.end());
  int64_t shared_bytes = 0;
  for (size_t i = 0; i < initial->size(); ++i) {
    const fl::ModelState::Entry& entry = result->final_model.entries()[i];
    if (personal.count(entry.name) != 0) {
      EXPECT_TRUE(entry.tensor.equal(initial->tensor(i))) << entry.name << " reached the server";
    } else {
      shared_bytes += entry.tensor.numel() * entry.tensor.element_size();
      if (!entry.is_buffer) {
        EXPECT_FALSE(entry.tensor.equal(initial->tensor(i))) << entry.name << " never moved";
      }
    }
  }
  // Uploads carry the shared part only: 15 of them.
  EXPECT_EQ(result->rows.back().bytes_up, 15 * shared_bytes);

  // Each client's own tensors are in the checkpoint, trained, and its own.
  auto checkpoint = fl::ReadCheckpoint(dir + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::vector<fl::TensorMap> owns;
  for (int64_t client = 0; client < 5; ++client) {
    auto it = checkpoint->client_states.find({client, fl::kPersonalSlot});
    ASSERT_NE(it, checkpoint->client_states.end()) << "client " << client;
    ASSERT_EQ(it->second.size(), personal.size());
    for (size_t i = 0; i < initial->size(); ++i) {
      const std::string& name = initial->entries()[i].name;
      if (personal.count(name) == 0) continue;
      ASSERT_EQ(it->second.count(name), 1u) << name;
      if (!initial->entries()[i].is_buffer || name.find("running") != std::string::npos) {
        EXPECT_FALSE(it->second.at(name).equal(initial->tensor(i))) << name << " of " << client;
      }
    }
    owns.push_back(it->second);
  }
  EXPECT_FALSE(owns[0].at(family.personal[0]).equal(owns[1].at(family.personal[0])));

  // Per-client accuracy is each client's own model's: under Dirichlet(0.1) skew
  // FedPer's own heads beat the global model with its untrained head by far (if
  // the evaluation used the global model, the two would agree closely).
  const fl::MetricsRow& last = result->rows.back();
  ASSERT_EQ(last.client_accuracy.count("client_acc_mean"), 1u);
  if (family.aggregator == "fedper" || family.aggregator == "fedrep") {
    EXPECT_GT(last.client_accuracy.at("client_acc_mean"), last.test_accuracy + 0.2)
        << "test accuracy " << last.test_accuracy;
  }
}

TEST_P(PartialSharingTest, PersonalTensorsStayOnTheClientsAndShapeTheirAccuracy) {
  ExpectPersonalTensorsStayOnTheClients(GetParam(), "", Dir(GetParam().aggregator));
}

// The asynchronous loop lends the aggregator the shared part, completes each
// step's aggregate with the global model's unshared tensors and commits a
// client's own with its accepted update. All five clients train at once, each
// replaced by itself as it arrives.
TEST_P(PartialSharingTest, AsynchronouslyToo) {
  ExpectPersonalTensorsStayOnTheClients(
      GetParam(), "server { async { concurrency: 5 buffer_size: 5 } }",
      Dir(GetParam().aggregator + "_async"));
}

INSTANTIATE_TEST_SUITE_P(
    Families, PartialSharingTest,
    ::testing::Values(
        Family{"fedper", {"layers.3.weight", "layers.3.bias"}},
        Family{"lg_fedavg",
               {"layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                "layers.1.running_mean", "layers.1.running_var", "layers.1.num_batches_tracked"}},
        Family{"fedrep", {"layers.3.weight", "layers.3.bias"}},
        Family{"fedbn",
               {"layers.1.weight", "layers.1.bias", "layers.1.running_mean",
                "layers.1.running_var", "layers.1.num_batches_tracked"}}),
    [](const ::testing::TestParamInfo<Family>& info) { return info.param.aggregator; });

TEST(FedBabuRunTest, TheHeadIsNeverTrainedAndFineTuningPersonalises) {
  auto experiment = Build(
      "aggregator { name: 'fedbabu' } server { client_evaluation { fine_tune_steps: 10 } }");
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  ASSERT_EQ(experiment->frozen_tensors,
            (std::vector<std::string>{"layers.3.weight", "layers.3.bias"}));
  const std::string dir = Dir("fedbabu");
  auto result = fl::RunExperiment(*experiment, dir);
  ASSERT_TRUE(result.ok()) << result.status();
  auto initial = fl::ReadModelFile(dir + "/initial_model.pt", result->final_model);
  ASSERT_TRUE(initial.ok()) << initial.status();
  int64_t shared_bytes = 0;
  for (size_t i = 0; i < initial->size(); ++i) {
    const fl::ModelState::Entry& entry = result->final_model.entries()[i];
    if (entry.name.rfind("layers.3.", 0) == 0) {
      EXPECT_TRUE(entry.tensor.equal(initial->tensor(i))) << entry.name << " was trained";
    } else {
      shared_bytes += entry.tensor.numel() * entry.tensor.element_size();
    }
  }
  EXPECT_EQ(result->rows.back().bytes_up, 15 * shared_bytes);
  // Nothing is personal: the clients keep no tensors of their own.
  auto checkpoint = fl::ReadCheckpoint(dir + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  for (const auto& [key, tensors] : checkpoint->client_states) {
    EXPECT_NE(key.second, fl::kPersonalSlot) << "client " << key.first;
  }
  // Fine-tuning the whole model on each client's own data personalises it.
  const fl::MetricsRow& last = result->rows.back();
  EXPECT_GT(last.client_accuracy.at("client_acc_mean"), last.test_accuracy + 0.1)
      << "test accuracy " << last.test_accuracy;
}

TEST(DittoRunTest, PersonalModelsStayOnTheClientsAndTheGlobalModelIsTheBases) {
  // Ditto over FedAvg: the global model, the uploads and the test accuracy are
  // FedAvg's bit for bit; each client's personal model is in the checkpoint,
  // whole, and per-client accuracy is measured with it.
  auto fedavg = Build("aggregator { name: 'fedavg' }");
  auto ditto = Build(
      "aggregator { name: 'ditto' options { [type.googleapis.com/fedkit.aggregators."
      "DittoOptions] { personal { lambda: 0.05 } } } }");
  ASSERT_TRUE(fedavg.ok() && ditto.ok()) << ditto.status();
  EXPECT_TRUE(ditto->personal_model);
  auto a = fl::RunExperiment(*fedavg, Dir("ditto_fedavg"));
  auto b = fl::RunExperiment(*ditto, Dir("ditto"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (size_t i = 0; i < a->final_model.size(); ++i) {
    EXPECT_TRUE(a->final_model.tensor(i).equal(b->final_model.tensor(i)))
        << a->final_model.entries()[i].name;
  }
  EXPECT_EQ(a->rows.back().bytes_up, b->rows.back().bytes_up);
  EXPECT_EQ(a->rows.back().test_accuracy, b->rows.back().test_accuracy);

  auto checkpoint = fl::ReadCheckpoint(Dir("ditto") + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  for (int64_t client = 0; client < 5; ++client) {
    auto it = checkpoint->client_states.find({client, fl::kPersonalSlot});
    ASSERT_NE(it, checkpoint->client_states.end()) << "client " << client;
    ASSERT_EQ(it->second.size(), b->final_model.size());
    EXPECT_FALSE(it->second.at("layers.3.weight").equal(b->final_model.tensor(4)))
        << "client " << client << "'s personal head is the global one";
  }
  // Under Dirichlet(0.1) skew the personal models serve their clients far
  // better than the global model does (evaluated with the global model, the
  // two runs' client accuracy would be the same).
  EXPECT_GT(b->rows.back().client_accuracy.at("client_acc_mean"),
            a->rows.back().client_accuracy.at("client_acc_mean") + 0.1);
}

TEST(DittoRunTest, AsynchronouslyTheGlobalModelIsFedBuffsAndEachClientKeepsItsOwn) {
  // FedBuff (buffers of 2 over FedAvg): Ditto trains the global model exactly as
  // the base does, and the loop commits each client's personal model with its
  // accepted update, so per-client accuracy is measured with models that only
  // exist if the asynchronous loop kept them.
  const std::string async = " server { async { concurrency: 3 buffer_size: 2 } }";
  auto fedavg = Build("aggregator { name: 'fedavg' }" + async);
  auto ditto = Build(
      "aggregator { name: 'ditto' options { [type.googleapis.com/fedkit.aggregators."
      "DittoOptions] { personal { lambda: 0.05 } } } }" + async);
  ASSERT_TRUE(fedavg.ok()) << fedavg.status();
  ASSERT_TRUE(ditto.ok()) << ditto.status();
  auto a = fl::RunExperiment(*fedavg, Dir("ditto_async_fedavg"));
  auto b = fl::RunExperiment(*ditto, Dir("ditto_async"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  for (size_t i = 0; i < a->final_model.size(); ++i) {
    EXPECT_TRUE(a->final_model.tensor(i).equal(b->final_model.tensor(i)))
        << a->final_model.entries()[i].name;
  }
  auto checkpoint = fl::ReadCheckpoint(Dir("ditto_async") + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  int kept = 0;
  for (int64_t client = 0; client < 5; ++client) {
    kept += checkpoint->client_states.count({client, fl::kPersonalSlot});
  }
  EXPECT_GE(kept, 3) << "clients whose accepted updates left no personal model";
  EXPECT_GT(b->rows.back().client_accuracy.at("client_acc_mean"),
            a->rows.back().client_accuracy.at("client_acc_mean") + 0.1);
}

// pFedMe and APFL keep a whole personal model per client too, trained inside
// their own local steps; the global model is theirs, not FedAvg's.
class PersonalModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PersonalModelTest, EachClientKeepsAWholeModelAndIsEvaluatedWithIt) {
  // pFedMe's eta * lambda must stay below 1: the client's rate is its eta. Its
  // lambda 1 (not 15) ties theta loosely to w, so that in three rounds theta is
  // well away from the global model.
  const std::string options =
      GetParam() == "pfedme"
          ? " options { [type.googleapis.com/fedkit.aggregators.PFedMeOptions] { client { "
            "lambda: 1 } } }"
          : "";
  auto experiment = Build(absl::StrCat("aggregator { name: '", GetParam(), "'", options,
                                       " } client { optimizer { lr: 0.01 } }"));
  auto fedavg = Build("aggregator { name: 'fedavg' } client { optimizer { lr: 0.01 } }");
  ASSERT_TRUE(experiment.ok() && fedavg.ok()) << experiment.status();
  EXPECT_TRUE(experiment->personal_model);
  auto result = fl::RunExperiment(*experiment, Dir(GetParam()));
  auto baseline = fl::RunExperiment(*fedavg, Dir(GetParam() + "_fedavg"));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  EXPECT_EQ(result->rows.back().rejected, 0);
  EXPECT_EQ(result->rows.back().bytes_up, baseline->rows.back().bytes_up);
  auto checkpoint = fl::ReadCheckpoint(Dir(GetParam()) + "/" + fl::kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  for (int64_t client = 0; client < 5; ++client) {
    auto it = checkpoint->client_states.find({client, fl::kPersonalSlot});
    ASSERT_NE(it, checkpoint->client_states.end()) << "client " << client;
    EXPECT_EQ(it->second.size(), result->final_model.size());
  }
  const double own = result->rows.back().client_accuracy.at("client_acc_mean");
  const double global = baseline->rows.back().client_accuracy.at("client_acc_mean");
  std::cout << GetParam() << ": client_acc_mean " << own << ", FedAvg's " << global << "\n";
  EXPECT_GT(own, global + 0.1);
}

INSTANTIATE_TEST_SUITE_P(Methods, PersonalModelTest, ::testing::Values("pfedme", "apfl"),
                         [](const auto& info) { return info.param; });

TEST(PerFedAvgRunTest, MetaStepsAreNotFedAvgsAndOneAdaptationStepPersonalises) {
  const std::string evaluation =
      " server { client_evaluation { fine_tune_steps: 1 fine_tune_learning_rate: 0.1 } }";
  auto per_fedavg = Build(
      "aggregator { name: 'per_fedavg' options { [type.googleapis.com/fedkit.aggregators."
      "PerFedAvgOptions] { client { variant: HESSIAN_FREE alpha: 0.1 } } } }" + evaluation);
  auto fedavg = Build("aggregator { name: 'fedavg' }" + evaluation);
  ASSERT_TRUE(per_fedavg.ok() && fedavg.ok()) << per_fedavg.status();
  EXPECT_FALSE(per_fedavg->personal_model);
  auto a = fl::RunExperiment(*per_fedavg, Dir("per_fedavg"));
  auto b = fl::RunExperiment(*fedavg, Dir("per_fedavg_fedavg"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->rows.back().rejected, 0);
  EXPECT_FALSE(a->final_model.tensor(0).equal(b->final_model.tensor(0)));
  EXPECT_TRUE(a->final_model.AllFinite());
  const double adapted = a->rows.back().client_accuracy.at("client_acc_mean");
  std::cout << "per_fedavg: client_acc_mean " << adapted << ", test accuracy "
            << a->rows.back().test_accuracy << "\n";
  EXPECT_GT(adapted, a->rows.back().test_accuracy + 0.1);
}

TEST(PartialSharingSecureTest, SecureAggregationSumsTheSharedPartAlone) {
  // One round of FedPer with and without secure aggregation: the clients mask
  // only their shared deltas, so the heads never enter the sum (the server's
  // stays as initialised either way) and the shared part agrees within the
  // encoding's quantum.
  const std::string fedper = "aggregator { name: 'fedper' } server { rounds: 1 } ";
  auto plain = Build(fedper);
  auto secure = Build(fedper + "server { secure_aggregation { update_norm_bound: 100 } }");
  ASSERT_TRUE(plain.ok() && secure.ok()) << secure.status();
  auto a = fl::RunExperiment(*plain, Dir("fedper_plain"));
  auto b = fl::RunExperiment(*secure, Dir("fedper_secure"));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->rows.back().clients, 5);
  EXPECT_EQ(b->rows.back().diagnostics.at("secagg_aborted"), 0);
  double largest_error = 0;
  for (size_t i = 0; i < a->final_model.size(); ++i) {
    const std::string& name = a->final_model.entries()[i].name;
    const double error =
        (a->final_model.tensor(i) - b->final_model.tensor(i)).abs().max().item<double>();
    if (name.rfind("layers.3.", 0) == 0) {
      EXPECT_EQ(error, 0.0) << name;
    } else {
      EXPECT_LE(error, 1e-3) << name;
      largest_error = std::max(largest_error, error);
    }
  }
  EXPECT_GT(largest_error, 0.0) << "quantised, the shared sums cannot all be exact";
}

// Without BatchNorm: fine-tuning in training mode would also move its running
// statistics towards the client's data, whatever the learning rate.
constexpr char kFedAvgWithoutNorm[] =
    "aggregator { name: 'fedavg' } model { options { [type.googleapis.com/fedkit.models."
    "MlpOptions] { hidden: [16] } } } ";

TEST(FineTuningTest, EvaluatesTunedCopiesAndKeepsNothingOfThem) {
  auto plain = Build(kFedAvgWithoutNorm);
  auto tuned = Build(absl::StrCat(kFedAvgWithoutNorm,
                                  "server { client_evaluation { fine_tune_steps: 5 } }"));
  ASSERT_TRUE(plain.ok() && tuned.ok());
  auto a = fl::RunExperiment(*plain, Dir("fedavg"));
  auto b = fl::RunExperiment(*tuned, Dir("fedavg_ft"));
  ASSERT_TRUE(a.ok() && b.ok());
  // Training and the global model are untouched by fine-tuning...
  for (size_t i = 0; i < a->final_model.size(); ++i) {
    EXPECT_TRUE(a->final_model.tensor(i).equal(b->final_model.tensor(i)));
  }
  EXPECT_EQ(a->rows.back().test_accuracy, b->rows.back().test_accuracy);
  // ...and under label skew five local steps on its own data raise each
  // client's accuracy on its own distribution.
  EXPECT_GT(b->rows.back().client_accuracy.at("client_acc_mean"),
            a->rows.back().client_accuracy.at("client_acc_mean") + 0.05);

  // Fine-tuning at its own, negligible, learning rate changes nothing.
  auto still = Build(absl::StrCat(kFedAvgWithoutNorm,
                                  "server { client_evaluation { fine_tune_steps: 5 "
                                  "fine_tune_learning_rate: 1e-9 } }"));
  ASSERT_TRUE(still.ok()) << still.status();
  auto c = fl::RunExperiment(*still, Dir("fedavg_ft_still"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NEAR(c->rows.back().client_accuracy.at("client_acc_mean"),
              a->rows.back().client_accuracy.at("client_acc_mean"), 0.01);
}

TEST(FineTuningTest, AClientWhoseFineTuningFailsIsCountedAndAllFailingStopsTheRun) {
  // 100 examples a client (IID), batches of 99 and BatchNorm: one step is a
  // batch of 99, a second the one example left, which BatchNorm cannot train on.
  auto build = [](const std::string& overrides) -> absl::StatusOr<fl::Experiment> {
    auto spec = fl::ParseSpec(kBaseSpec, "kBaseSpec");
    if (!spec.ok()) return spec.status();
    spec->mutable_partition()->set_name("iid");
    spec->mutable_partition()->clear_options();
    absl::Status merged = fl::ApplyOverride(
        "aggregator { name: 'fedavg' } client { steps: 1 batch_size: 99 } server { rounds: 1 } " +
            overrides,
        *spec);
    if (!merged.ok()) return merged;
    return fl::BuildExperiment(*spec);
  };
  auto one_step = build("server { client_evaluation { fine_tune_steps: 1 } }");
  ASSERT_TRUE(one_step.ok()) << one_step.status();
  auto fine = fl::RunExperiment(*one_step, Dir("ft_one_step"));
  ASSERT_TRUE(fine.ok()) << fine.status();
  EXPECT_EQ(fine->rows.back().client_accuracy.at("client_ft_failed"), 0.0);
  auto two_steps = build("server { client_evaluation { fine_tune_steps: 2 } }");
  ASSERT_TRUE(two_steps.ok()) << two_steps.status();
  auto failed = fl::RunExperiment(*two_steps, Dir("ft_two_steps"));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(),
              HasSubstr("server.client_evaluation.fine_tune_steps: fine-tuning failed for every "
                        "client; first: client "));
}

TEST(PersonalizationRefusalsTest, NamesTheFieldThatCannotKeepPersonalTensors) {
  auto lossy = Build(
      "aggregator { name: 'fedper' } server { download { kind: SPARSE_TERNARY fraction: 0.1 } }");
  ASSERT_FALSE(lossy.ok());
  EXPECT_THAT(lossy.status().message(), HasSubstr("server.download: "));
  auto no_norm = Build(
      "aggregator { name: 'fedbn' } model { options { [type.googleapis.com/fedkit.models."
      "MlpOptions] { hidden: [16] } } }");
  ASSERT_FALSE(no_norm.ok());
  EXPECT_THAT(no_norm.status().message(),
              HasSubstr("aggregator.options.personal_groups: the model has no parameter group "
                        "\"norm\"; it has body, head"));
  auto everything = Build(
      "aggregator { name: 'fedper' options { [type.googleapis.com/fedkit.aggregators."
      "PartialSharingOptions] { personal_groups: ['head', 'body'] } } }");
  ASSERT_FALSE(everything.ok());
  EXPECT_THAT(everything.status().message(), HasSubstr("nothing would be shared"));
  auto ditto_over_fedper = Build(
      "aggregator { name: 'ditto' options { [type.googleapis.com/fedkit.aggregators."
      "DittoOptions] { base { name: 'fedper' } } } }");
  ASSERT_FALSE(ditto_over_fedper.ok());
  EXPECT_THAT(ditto_over_fedper.status().message(),
              HasSubstr("aggregator.options.base: a personal model (the whole model, kept by "
                        "each client) does not compose with personal or frozen parameter groups "
                        "(head)"));
  auto fedrep_momentum = Build("aggregator { name: 'fedrep' } client { keep_optimizer_state: true }");
  ASSERT_FALSE(fedrep_momentum.ok());
  EXPECT_THAT(fedrep_momentum.status().message(),
              HasSubstr("client.keep_optimizer_state: the aggregator trains locally in phases"));
  auto fedrep_epochs = Build(
      "aggregator { name: 'fedrep' options { [type.googleapis.com/fedkit.aggregators."
      "FedRepOptions] { personal_epochs: 0 } } }");
  ASSERT_FALSE(fedrep_epochs.ok());
  EXPECT_THAT(fedrep_epochs.status().message(),
              HasSubstr("options.personal_epochs: must be >= 1, got 0"));
  auto pfedme_momentum = Build(
      "aggregator { name: 'pfedme' } client { optimizer { momentum: 0.9 weight_decay: 1e-4 } }");
  ASSERT_FALSE(pfedme_momentum.ok());
  EXPECT_THAT(pfedme_momentum.status().message(),
              HasSubstr("client.optimizer.momentum: the aggregator's client hook takes the local "
                        "steps itself, as plain SGD at client.optimizer.lr"));
  EXPECT_THAT(pfedme_momentum.status().message(), HasSubstr("client.optimizer.weight_decay"));
  auto per_fedavg_adam = Build("aggregator { name: 'per_fedavg' } client { optimizer { kind: ADAM } }");
  ASSERT_FALSE(per_fedavg_adam.ok());
  EXPECT_THAT(per_fedavg_adam.status().message(), HasSubstr("client.optimizer.kind: "));
  auto fine_tune = Build("server { client_evaluation { fine_tune_steps: -1 } }");
  ASSERT_FALSE(fine_tune.ok());
  EXPECT_THAT(fine_tune.status().message(),
              HasSubstr("server.client_evaluation.fine_tune_steps: must be >= 0, got -1"));
}

}  // namespace
}  // namespace aggregators
