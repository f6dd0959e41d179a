#include "fl/local_trainer.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/utils.h>

#include "fl/batch_order_file.h"
#include "fl/client_hook.h"
#include "fl/codec.h"
#include "fl/fault_model.h"
#include "fl/model.h"
#include "fl/personalization.h"
#include "fl/system_model.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "google/protobuf/text_format.h"

namespace fl {
namespace {

class Linear : public Model {
 public:
  Linear() {
    weight_ = register_parameter("weight", at::zeros({2, 2}));
    bias_ = register_parameter("bias", at::zeros({2}));
  }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x, weight_, bias_); }
  at::Tensor weight_, bias_;
};

// A test hook exercising every plug-in point: it counts its rounds on the client
// (persistent state), holds out the client's first example, adds an L2 pull to
// zero weight as a loss term, and sends the count back as an extra.
class ProbeHook : public ClientHook {
 public:
  absl::Status BeforeTraining(HookContext& context) override {
    seen_learning_rate = context.learning_rate;
    TensorMap& state = *context.state;
    if (!state.count("rounds")) state["rounds"] = at::zeros({1});
    state["rounds"].add_(1);
    context.train_indices->erase(context.train_indices->begin());
    return absl::OkStatus();
  }
  at::Tensor LossTerm(HookContext& context) override {
    ++loss_calls;
    return context.model->parameters()[0].pow(2).sum().mul(strength);
  }
  absl::Status AfterTraining(HookContext& context, ClientUpdate& update) override {
    update.extras["probe"] = ModelState({{"rounds", context.state->at("rounds").clone(), false}});
    return absl::OkStatus();
  }
  static inline int loss_calls = 0;
  static inline double seen_learning_rate = 0.0;
  static inline double strength = 0.0;
};

absl::StatusOr<std::unique_ptr<ClientHook>> CreateProbe(const fedkit::ProxySpec&,
                                                        const ClientHook::CreateArgs&) {
  return std::make_unique<ProbeHook>();
}
FL_REGISTER_PLUGIN(ClientHook, "probe", fedkit::ProxySpec, CreateProbe);

class FailingHook : public ClientHook {
 public:
  absl::Status BeforeTraining(HookContext&) override {
    return absl::InvalidArgumentError("no sensitivity subset");
  }
};
absl::StatusOr<std::unique_ptr<ClientHook>> CreateFailing(const fedkit::ProxySpec&,
                                                          const ClientHook::CreateArgs&) {
  return std::make_unique<FailingHook>();
}
FL_REGISTER_PLUGIN(ClientHook, "failing", fedkit::ProxySpec, CreateFailing);

class LocalTrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::manual_seed(3);
    // Two separable blobs: class 0 around (-2, 0), class 1 around (2, 0).
    at::Tensor y = at::arange(40, at::kLong).remainder(2);
    at::Tensor x = at::randn({40, 2}).mul_(0.5);
    x.select(1, 0).add_(y.to(at::kFloat).mul(4).sub(2));
    examples_ = {x, y};
    for (int64_t i = 0; i < 20; ++i) indices_.push_back(i);
    global_ = ModelState::FromModule(model_);
    spec_.set_epochs(3);
    spec_.set_batch_size(4);
    spec_.mutable_optimizer()->set_lr(0.1);
    ProbeHook::loss_calls = 0;
    ProbeHook::strength = 0.0;
  }

  LocalTrainingInput Input(int64_t client, int round, const RoundPlan& plan) {
    LocalTrainingInput input;
    input.client_id = client;
    input.round = round;
    input.seed = 17;
    input.global = &global_;
    input.plan = &plan;
    input.examples = &examples_;
    input.indices = &indices_;
    return input;
  }

  double Accuracy(const ModelState& delta) {
    ModelState local = global_.Clone();
    local.Axpy(1.0, delta);
    Linear m;
    EXPECT_TRUE(local.LoadInto(m).ok());
    return m.Forward(examples_.x).argmax(1).eq(examples_.y).to(at::kFloat).mean().item<double>();
  }

  Linear model_;
  Examples examples_;
  std::vector<int64_t> indices_;
  ModelState global_;
  fedkit::ClientTrainingSpec spec_;
  ClientStateStore store_;
};

// One buffer wherever it changes what is computed or saves kernels: clipping's norm
// over one buffer rounds differently from its norm over the tensors, so a run
// clipping plain SGD's gradients keeps the buffer (bit-identical to before).
TEST(OptimizerLayoutTest, PerTensorOnlyForPlainSgdWithoutClipping) {
  auto layout = [](const char* text) {
    fedkit::ClientTrainingSpec spec;
    CHECK(google::protobuf::TextFormat::ParseFromString(text, &spec));
    return OptimizerLayout(spec);
  };
  using Layout = FlatParameters::Layout;
  EXPECT_EQ(layout("optimizer { kind: SGD lr: 0.1 }"), Layout::kPerTensor);
  EXPECT_EQ(layout("optimizer { kind: SGD lr: 0.1 } max_grad_norm: 1"), Layout::kOneBuffer);
  EXPECT_EQ(layout("optimizer { kind: SGD lr: 0.1 momentum: 0.9 }"), Layout::kOneBuffer);
  EXPECT_EQ(layout("optimizer { kind: SGD lr: 0.1 weight_decay: 0.01 }"), Layout::kOneBuffer);
  EXPECT_EQ(layout("optimizer { kind: ADAM lr: 0.001 }"), Layout::kOneBuffer);
}

TEST_F(LocalTrainerTest, EpochBudgetTrainsTheModelAndReportsSteps) {
  LocalTrainer trainer(spec_, {}, &store_);
  RoundPlan plan;
  auto update = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->num_examples, 20);
  EXPECT_EQ(update->local_steps, 3 * 5);  // 3 epochs of ceil(20 / 4) batches
  EXPECT_GT(Accuracy(update->delta), 0.9);
  EXPECT_EQ(update->bytes_sent, (4 + 2) * 4);
  EXPECT_GT(update->metrics.at("train_loss"), 0.0);
  EXPECT_LT(update->metrics.at("train_loss"), std::log(2.0));
}

// One full-batch SGD step per round from the same global model, so each round sees
// the same gradient g: with momentum 0.9 kept, round 2's buffer is 0.9 g + g, its
// delta 1.9 times round 1's; a fresh optimiser (or a rejected round 1, whose state
// is discarded) repeats round 1's delta.
TEST_F(LocalTrainerTest, KeptOptimizerStateCarriesMomentumIntoTheNextRound) {
  spec_.set_steps(1);
  spec_.set_batch_size(20);
  spec_.mutable_optimizer()->set_momentum(0.9);
  RoundPlan plan;
  for (const auto& [keep, accepted, ratio] :
       std::vector<std::tuple<bool, bool, double>>{{true, true, 1.9}, {true, false, 1.0},
                                                   {false, true, 1.0}}) {
    spec_.set_keep_optimizer_state(keep);
    ClientStateStore store;
    LocalTrainer trainer(spec_, {}, &store);
    auto first = trainer.Train(model_, Input(0, 1, plan));
    ASSERT_TRUE(first.ok()) << first.status();
    accepted ? store.Commit(0) : store.Discard(0);
    auto second = trainer.Train(model_, Input(0, 2, plan));
    ASSERT_TRUE(second.ok()) << second.status();
    for (size_t i = 0; i < first->delta.size(); ++i) {
      EXPECT_TRUE(second->delta.tensor(i).allclose(first->delta.tensor(i) * ratio, 1e-5, 1e-7))
          << "keep " << keep << " accepted " << accepted << " tensor " << i;
    }
  }
}

// Sparse-ternary upload with error feedback: the update is the encoding of the
// delta, bytes_up counts the encoding, and what it lost is sent with the next round
// (kept only when the server accepts).
TEST_F(LocalTrainerTest, TheUploadIsEncodedAndItsLossCarriedToTheNextRound) {
  spec_.set_steps(1);
  spec_.set_batch_size(20);
  spec_.mutable_upload()->set_kind(fedkit::CodecSpec::SPARSE_TERNARY);
  spec_.mutable_upload()->set_fraction(0.5);
  RoundPlan plan;
  LocalTrainer plain_trainer([&] {
    fedkit::ClientTrainingSpec plain = spec_;
    plain.clear_upload();
    return plain;
  }(), {}, &store_);
  auto raw = plain_trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(raw.ok()) << raw.status();

  for (bool accepted : {true, false}) {
    spec_.mutable_upload()->set_error_feedback(true);
    ClientStateStore store;
    LocalTrainer trainer(spec_, {}, &store);
    auto first = trainer.Train(model_, Input(0, 1, plan));
    ASSERT_TRUE(first.ok()) << first.status();
    // The zero-initialised model's first step moves the weight's rows by opposite
    // amounts ({{a, b}, {-a, -b}}) and the bias not at all (balanced classes): the
    // weight sends its 2 largest entries as signs and one magnitude, the bias
    // nothing but a magnitude.
    const at::Tensor weight = first->delta.tensor(0);
    EXPECT_EQ(weight.ne(0).sum().item<int64_t>(), 2);
    EXPECT_EQ(weight.abs().max().item<float>(),
              weight.abs().masked_select(weight.ne(0)).min().item<float>());
    EXPECT_TRUE(first->delta.tensor(1).eq(0).all().item<bool>());
    // Weight: positions (a 4-bit mask, 1 byte) + 2 signs (1 byte) + magnitude (4);
    // bias: magnitude (4).
    EXPECT_EQ(first->bytes_sent, (1 + 1 + 4) + 4);
    accepted ? store.Commit(0) : store.Discard(0);
    auto second = trainer.Train(model_, Input(0, 2, plan));
    ASSERT_TRUE(second.ok()) << second.status();
    // Round 2 trains from the same global model on the same batch, so its raw delta
    // is round 1's: accepted, it sends raw + residual = 2 raw - first; discarded, it
    // sends what round 1 sent.
    for (size_t i = 0; i < first->delta.size(); ++i) {
      const at::Tensor owed = accepted ? raw->delta.tensor(i) * 2 - first->delta.tensor(i)
                                       : raw->delta.tensor(i);
      const at::Tensor expected =
          EncodeTensor(owed, {CodecConfig::Kind::kSparseTernary, 0.5}).decoded;
      EXPECT_TRUE(at::allclose(second->delta.tensor(i), expected, 1e-5, 1e-7))
          << "accepted " << accepted << " tensor " << i;
    }
  }
}

TEST_F(LocalTrainerTest, TheSystemModelCutsTheStepsOrDropsTheClient) {
  fedkit::SystemSpec system_spec;
  system_spec.set_straggler_fraction(1.0);
  const SystemModel stragglers(system_spec, 5, 10);
  LocalTrainer trainer(spec_, {}, &store_);
  trainer.set_system_model(&stragglers);
  RoundPlan plan;
  for (int round = 1; round <= 4; ++round) {
    auto update = trainer.Train(model_, Input(0, round, plan));
    ASSERT_TRUE(update.ok()) << update.status();
    EXPECT_EQ(update->planned_steps, 15);
    EXPECT_EQ(update->local_steps, stragglers.CompletedSteps(0, round, 15));
    EXPECT_GE(update->local_steps, 1);
  }
  // A client not yet joined completes nothing and sends nothing.
  system_spec.Clear();
  system_spec.set_late_join_fraction(1.0);
  const SystemModel late(system_spec, 5, 10);
  trainer.set_system_model(&late);
  auto dropped = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->local_steps, 0);
  EXPECT_EQ(dropped->planned_steps, 15);
  EXPECT_TRUE(dropped->delta.empty());
  EXPECT_EQ(dropped->bytes_sent, 0);
}

TEST_F(LocalTrainerTest, KeptAdamStateCountsItsSteps) {
  spec_.set_steps(3);
  spec_.mutable_optimizer()->set_kind(fedkit::OptimizerSpec::ADAM);
  spec_.set_keep_optimizer_state(true);
  LocalTrainer trainer(spec_, {}, &store_);
  RoundPlan plan;
  ASSERT_TRUE(trainer.Train(model_, Input(0, 1, plan)).ok());
  store_.Commit(0);
  ASSERT_TRUE(trainer.Train(model_, Input(0, 2, plan)).ok());
  store_.Commit(0);
  const TensorMap kept = store_.Checkout(0, "@optimizer");
  ASSERT_TRUE(kept.count("0/step"));
  EXPECT_EQ(kept.at("0/step").item<int64_t>(), 6);
  EXPECT_EQ(kept.at("0/exp_avg").numel(), 4 + 2);  // one flat tensor over the model
}

// A linear model over 1x2x3 images, for the augmentation test.
class ImageLinear : public Model {
 public:
  ImageLinear() { weight_ = register_parameter("weight", at::zeros({2, 6})); }
  at::Tensor Forward(const at::Tensor& x) override { return at::linear(x.flatten(1), weight_); }
  at::Tensor weight_;
};

// Training batches are augmented, from a stream fixed by the (client, round) seed:
// the same seed gives the same update, and a flip-only augmentation of images that
// are not left-right symmetric changes it.
TEST(LocalTrainerAugmentationTest, AugmentsTrainingBatchesReproducibly) {
  torch::manual_seed(5);
  const Examples examples{at::randn({12, 1, 2, 3}), at::arange(12, at::kLong).remainder(2)};
  std::vector<int64_t> indices(12);
  for (int64_t i = 0; i < 12; ++i) indices[i] = i;
  ImageLinear model;
  const ModelState global = ModelState::FromModule(model);
  fedkit::ClientTrainingSpec spec;
  spec.set_epochs(2);
  spec.set_batch_size(4);
  spec.mutable_optimizer()->set_lr(0.1);
  const RoundPlan plan;
  LocalTrainingInput input;
  input.client_id = 0;
  input.round = 1;
  input.seed = 9;
  input.global = &global;
  input.plan = &plan;
  input.examples = &examples;
  input.indices = &indices;
  auto train = [&](ImageAugmentation augmentation) {
    ClientStateStore store;
    LocalTrainer trainer(spec, {}, &store, augmentation);
    auto update = trainer.Train(model, input);
    EXPECT_TRUE(update.ok()) << update.status();
    return update->delta.tensor(0);
  };
  const at::Tensor plain = train({});
  const at::Tensor flipped = train({.horizontal_flip = true});
  EXPECT_TRUE(flipped.equal(train({.horizontal_flip = true})));
  EXPECT_FALSE(flipped.equal(plain));
}

TEST_F(LocalTrainerTest, StepBudgetCyclesThroughTheData) {
  spec_.set_steps(12);
  LocalTrainer trainer(spec_, {}, &store_);
  RoundPlan plan;
  auto update = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(update->local_steps, 12);
}

TEST_F(LocalTrainerTest, SameSeedSameUpdateOtherSeedDifferent) {
  LocalTrainer trainer(spec_, {}, &store_);
  RoundPlan plan;
  auto a = trainer.Train(model_, Input(0, 1, plan));
  auto b = trainer.Train(model_, Input(0, 1, plan));
  EXPECT_TRUE(a->delta.tensor(0).equal(b->delta.tensor(0)));
  LocalTrainingInput other = Input(0, 1, plan);
  other.seed = 18;
  auto c = trainer.Train(model_, other);
  EXPECT_FALSE(a->delta.tensor(0).equal(c->delta.tensor(0)));
}

TEST_F(LocalTrainerTest, InOrderBatchesFollowThePartitionOrderWhateverTheSeed) {
  spec_.set_batch_order(fedkit::ClientTrainingSpec::IN_ORDER);
  spec_.set_epochs(2);
  spec_.set_batch_size(3);  // 20 examples: six batches of 3, then one of 2
  std::reverse(indices_.begin(), indices_.end());
  LocalTrainer trainer(spec_, {}, &store_);
  RoundPlan plan;
  auto a = trainer.Train(model_, Input(0, 1, plan));
  LocalTrainingInput other_seed = Input(0, 1, plan);
  other_seed.seed = 18;
  auto b = trainer.Train(model_, other_seed);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->local_steps, 14);

  // Plain SGD over the indices in the order given, batch by batch, both epochs.
  at::Tensor weight = global_.tensor(0).clone().requires_grad_(true);
  at::Tensor bias = global_.tensor(1).clone().requires_grad_(true);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (size_t begin = 0; begin < indices_.size(); begin += 3) {
      const std::vector<int64_t> rows(indices_.begin() + begin,
                                      indices_.begin() + std::min(begin + 3, indices_.size()));
      const at::Tensor batch = at::tensor(rows, at::kLong);
      at::cross_entropy_loss(at::linear(examples_.x.index_select(0, batch), weight, bias),
                             examples_.y.index_select(0, batch))
          .backward();
      at::NoGradGuard no_grad;
      weight.sub_(weight.grad().mul(0.1));
      bias.sub_(bias.grad().mul(0.1));
      weight.mutable_grad().zero_();
      bias.mutable_grad().zero_();
    }
  }
  EXPECT_TRUE(at::allclose(a->delta.tensor(0), weight.detach() - global_.tensor(0), 1e-5, 1e-6))
      << a->delta.tensor(0) << weight;
  EXPECT_TRUE(at::allclose(a->delta.tensor(1), bias.detach() - global_.tensor(1), 1e-5, 1e-6));
  EXPECT_TRUE(a->delta.tensor(0).equal(b->delta.tensor(0)));

  // Shuffled, the same data in another order gives another model.
  spec_.set_batch_order(fedkit::ClientTrainingSpec::SHUFFLED);
  auto shuffled = LocalTrainer(spec_, {}, &store_).Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(shuffled.ok());
  EXPECT_FALSE(at::allclose(shuffled->delta.tensor(0), a->delta.tensor(0), 1e-4, 1e-5));
}

// Recorded orders replay exactly: epochs in the given order and its reverse train
// as IN_ORDER does on those orders; a file whose line is not a permutation of the
// client's examples is refused, naming the file.
TEST_F(LocalTrainerTest, RecordedBatchOrdersAreReplayedEpochByEpoch) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/recorded";
  std::filesystem::create_directories(dir + "/2");
  std::vector<int64_t> reversed = indices_;
  std::reverse(reversed.begin(), reversed.end());
  {
    std::ofstream file(dir + "/2/5.txt");
    for (const std::vector<int64_t>* order : {&indices_, &reversed}) {
      for (int64_t i : *order) file << i << " ";
      file << "\n";
    }
  }
  spec_.set_epochs(2);
  spec_.set_batch_size(3);
  RoundPlan plan;
  spec_.set_batch_order(fedkit::ClientTrainingSpec::FROM_FILE);
  spec_.set_batch_order_dir(dir);
  auto replayed = LocalTrainer(spec_, {}, &store_).Train(model_, Input(5, 2, plan));
  ASSERT_TRUE(replayed.ok()) << replayed.status();

  // The same, as two IN_ORDER epochs: the first in partition order, the second
  // (a new run from its result) reversed.
  fedkit::ClientTrainingSpec one_epoch = spec_;
  one_epoch.set_batch_order(fedkit::ClientTrainingSpec::IN_ORDER);
  one_epoch.clear_batch_order_dir();
  one_epoch.set_epochs(1);
  auto first = LocalTrainer(one_epoch, {}, &store_).Train(model_, Input(5, 2, plan));
  ASSERT_TRUE(first.ok());
  ModelState after_first = global_.Clone();
  after_first.Axpy(1.0, first->delta);
  std::vector<int64_t> saved = indices_;
  indices_ = reversed;
  LocalTrainingInput second_input = Input(5, 2, plan);
  second_input.global = &after_first;
  auto second = LocalTrainer(one_epoch, {}, &store_).Train(model_, second_input);
  indices_ = saved;
  ASSERT_TRUE(second.ok());
  ModelState expected = after_first.Clone();
  expected.Axpy(1.0, second->delta);
  ModelState got = global_.Clone();
  got.Axpy(1.0, replayed->delta);
  EXPECT_TRUE(at::allclose(got.tensor(0), expected.tensor(0), 1e-5, 1e-6));
  // Both epochs in partition order (IN_ORDER) is another run: the second line counted.
  fedkit::ClientTrainingSpec in_order = one_epoch;
  in_order.set_epochs(2);
  auto both_forward = LocalTrainer(in_order, {}, &store_).Train(model_, Input(5, 2, plan));
  ASSERT_TRUE(both_forward.ok());
  EXPECT_FALSE(at::allclose(replayed->delta.tensor(0), both_forward->delta.tensor(0), 1e-4, 1e-5));

  {
    std::ofstream file(dir + "/2/6.txt");
    file << "0 1 2\n";
  }
  auto refused = LocalTrainer(spec_, {}, &store_).Train(model_, Input(6, 2, plan));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("2/6.txt"));
}

// A shuffled run records each epoch's order as drawn, without changing the run;
// replaying the record trains the same model bit for bit.
TEST_F(LocalTrainerTest, RecordedShufflesReplayToTheSameUpdate) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/own_orders";
  spec_.set_epochs(3);
  spec_.set_batch_size(3);
  RoundPlan plan;
  auto plain = LocalTrainer(spec_, {}, &store_).Train(model_, Input(4, 7, plan));
  ASSERT_TRUE(plain.ok()) << plain.status();
  fedkit::ClientTrainingSpec recording = spec_;
  recording.set_batch_order_record_dir(dir);
  auto recorded = LocalTrainer(recording, {}, &store_).Train(model_, Input(4, 7, plan));
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(recorded->delta.tensor(0).equal(plain->delta.tensor(0)));

  auto orders = ReadBatchOrders(dir, 7, "4", indices_);
  ASSERT_TRUE(orders.ok()) << orders.status();
  ASSERT_EQ(orders->size(), 3u);
  EXPECT_NE((*orders)[0], (*orders)[1]);  // reshuffled each epoch

  fedkit::ClientTrainingSpec replaying = spec_;
  replaying.set_batch_order(fedkit::ClientTrainingSpec::FROM_FILE);
  replaying.set_batch_order_dir(dir);
  auto replayed = LocalTrainer(replaying, {}, &store_).Train(model_, Input(4, 7, plan));
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_TRUE(replayed->delta.tensor(0).equal(plain->delta.tensor(0)));
  EXPECT_TRUE(replayed->delta.tensor(1).equal(plain->delta.tensor(1)));
}

TEST_F(LocalTrainerTest, HookStatePersistsPerClientAcrossRounds) {
  RoundPlan plan;
  plan.hooks.push_back({"probe", {}});
  LocalTrainer trainer(spec_, {}, &store_);
  auto r1 = trainer.Train(model_, Input(/*client=*/7, 1, plan));
  store_.Commit(7);
  auto r2 = trainer.Train(model_, Input(7, 2, plan));
  auto other = trainer.Train(model_, Input(8, 2, plan));
  store_.Commit(7);
  store_.Commit(8);
  ASSERT_TRUE(r1.ok() && r2.ok() && other.ok());
  EXPECT_EQ(r1->extras.at("probe").tensor(0).item<float>(), 1.0f);
  EXPECT_EQ(r2->extras.at("probe").tensor(0).item<float>(), 2.0f);
  EXPECT_EQ(other->extras.at("probe").tensor(0).item<float>(), 1.0f);
  EXPECT_EQ(store_.size(), 2);
  // The hold-out removed one example from training, and the extra counts in bytes.
  EXPECT_EQ(r1->num_examples, 19);
  EXPECT_EQ(r1->bytes_sent, (4 + 2 + 1) * 4);
}

// Regression: hook state was written straight into the store, so a client whose
// update the server then rejected still advanced its state (SCAFFOLD's c_i drifted
// from the server's c). It is staged, and only an accepted update commits it.
TEST_F(LocalTrainerTest, HookStateAdvancesOnlyWhenTheUpdateIsAccepted) {
  RoundPlan plan;
  plan.hooks.push_back({"probe", {}});
  LocalTrainer trainer(spec_, {}, &store_);
  ASSERT_TRUE(trainer.Train(model_, Input(7, 1, plan)).ok());
  EXPECT_EQ(store_.size(), 0);  // staged, not committed
  store_.Commit(7);
  ASSERT_TRUE(trainer.Train(model_, Input(7, 2, plan)).ok());
  store_.Discard(7);  // the server rejected round 2's update
  auto r3 = trainer.Train(model_, Input(7, 3, plan));
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->extras.at("probe").tensor(0).item<float>(), 2.0f);  // not 3
  EXPECT_EQ(store_.Committed(7, "probe").at("rounds").item<float>(), 1.0f);
}

TEST_F(LocalTrainerTest, AHookRequestedTwiceIsRefusedNamingBothSources) {
  RoundPlan plan;
  plan.hooks.push_back({"probe", {}});
  LocalTrainer trainer(spec_, {{"probe", {}}}, &store_);
  auto update = trainer.Train(model_, Input(0, 1, plan));
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(update.status().message()),
              ::testing::HasSubstr("client hook \"probe\" is requested twice: by the "
                                   "aggregator's round plan and by client.hooks"));
}

TEST_F(LocalTrainerTest, LossTermsReachTheOptimiser) {
  spec_.set_steps(20);
  RoundPlan plan;
  LocalTrainer plain(spec_, {}, &store_);
  const double free_norm = plain.Train(model_, Input(0, 1, plan))->delta.tensor(0).norm().item<double>();
  ProbeHook::strength = 1.0;  // lr 0.1 * 2 * 1.0: a 20% pull to zero per step
  // Hooks named in the spec run as well as the plan's.
  LocalTrainer pulled(spec_, {{"probe", {}}}, &store_);
  auto update = pulled.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok());
  EXPECT_EQ(ProbeHook::loss_calls, 20);
  EXPECT_LT(update->delta.tensor(0).norm().item<double>(), 0.5 * free_norm);
}

TEST_F(LocalTrainerTest, LearningRateDecaysPerRoundAndHooksSeeIt) {
  spec_.set_lr_decay(0.5);
  RoundPlan plan;
  plan.hooks.push_back({"probe", {}});
  LocalTrainer trainer(spec_, {}, &store_);
  ASSERT_TRUE(trainer.Train(model_, Input(0, /*round=*/3, plan)).ok());
  EXPECT_DOUBLE_EQ(ProbeHook::seen_learning_rate, 0.1 * 0.25);
}

TEST_F(LocalTrainerTest, GradientClippingBoundsEachStep) {
  // One plain SGD step with the gradient clipped to norm 1e-3 moves the weights by
  // exactly lr * 1e-3 (the unclipped gradient at zero weights is much larger).
  spec_.set_steps(1);
  spec_.set_max_grad_norm(1e-3);
  RoundPlan plan;
  LocalTrainer trainer(spec_, {}, &store_);
  auto update = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok());
  EXPECT_NEAR(std::sqrt(update->delta.SquaredNorm()), 0.1 * 1e-3, 1e-8);
}

TEST_F(LocalTrainerTest, HookErrorsNameTheClientAndHook) {
  RoundPlan plan;
  plan.hooks.push_back({"failing", {}});
  LocalTrainer trainer(spec_, {}, &store_);
  auto update = trainer.Train(model_, Input(4, 1, plan));
  EXPECT_EQ(update.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(update.status().message(),
            "client 4: client hook \"failing\" before training: no sensitivity subset");
}

TEST_F(LocalTrainerTest, UnknownHookIsAnError) {
  RoundPlan plan;
  plan.hooks.push_back({"nope", {}});
  LocalTrainer trainer(spec_, {}, &store_);
  EXPECT_THAT(trainer.Train(model_, Input(4, 1, plan)).status().message(),
              ::testing::HasSubstr("client_hook \"nope\" is not registered"));
}

// A label-flipping client trains exactly as an honest one would on flipped labels;
// a sign-flipping one sends exactly minus its honest update.
TEST_F(LocalTrainerTest, FaultyClientsFlipLabelsOrCorruptTheirUpdate) {
  RoundPlan plan;
  LocalTrainer honest(spec_, {}, &store_);
  auto expected = honest.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(expected.ok()) << expected.status();

  google::protobuf::RepeatedPtrField<fedkit::FaultSpec> flip;
  flip.Add()->set_kind(fedkit::FaultSpec::LABEL_FLIP);
  flip[0].set_fraction(1.0);
  const FaultModel flipping(flip, 1, 1, 2);
  LocalTrainer flipper(spec_, {}, &store_);
  flipper.set_fault_model(&flipping);
  auto flipped = flipper.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(flipped.ok()) << flipped.status();
  const Examples honest_examples = examples_;
  examples_.y = 1 - examples_.y;
  auto on_flipped_data = honest.Train(model_, Input(0, 1, plan));
  examples_ = honest_examples;
  ASSERT_TRUE(on_flipped_data.ok());
  EXPECT_TRUE(flipped->delta.tensor(0).equal(on_flipped_data->delta.tensor(0)));
  EXPECT_LT(Accuracy(flipped->delta), 0.1);

  google::protobuf::RepeatedPtrField<fedkit::FaultSpec> sign;
  sign.Add()->set_kind(fedkit::FaultSpec::SIGN_FLIP);
  sign[0].set_fraction(1.0);
  const FaultModel signing(sign, 1, 1, 2);
  LocalTrainer signer(spec_, {}, &store_);
  signer.set_fault_model(&signing);
  auto signed_update = signer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(signed_update.ok());
  for (size_t i = 0; i < expected->delta.size(); ++i) {
    EXPECT_TRUE(signed_update->delta.tensor(i).equal(-expected->delta.tensor(i)));
  }
}

TEST_F(LocalTrainerTest, PersonalTensorsStayOutOfTheUploadAndCarryOverToTheNextRound) {
  // The bias is personal: the update holds the weight only, the client's trained
  // bias waits in the store, and its next round starts from it, not from the
  // global bias (zeros). The second round's learning rate is negligible, so its
  // bias ends where it started.
  LocalTrainer trainer(spec_, {}, &store_);
  trainer.set_personal_tensors({"bias"});
  RoundPlan plan;
  auto first = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->delta.size(), 1u);
  EXPECT_EQ(first->delta.entries()[0].name, "weight");
  EXPECT_EQ(first->bytes_sent, 4 * 4);
  store_.Commit(0);
  const at::Tensor own = store_.Committed(0, kPersonalSlot).at("bias").clone();
  EXPECT_TRUE(own.equal(model_.bias_.detach()));
  ASSERT_GT(own.abs().max().item<float>(), 1e-3);

  fedkit::ClientTrainingSpec still = spec_;
  still.mutable_optimizer()->set_lr(1e-9);
  LocalTrainer second(still, {}, &store_);
  second.set_personal_tensors({"bias"});
  for (int64_t client : {0, 1}) {
    ASSERT_TRUE(second.Train(model_, Input(client, 2, plan)).ok());
    store_.Commit(client);
  }
  EXPECT_TRUE(store_.Committed(0, kPersonalSlot).at("bias").allclose(own, 0, 1e-6));
  // A client that never trained starts from the global model's.
  EXPECT_TRUE(store_.Committed(1, kPersonalSlot).at("bias").allclose(at::zeros({2}), 0, 1e-6));
}

TEST_F(LocalTrainerTest, FrozenTensorsAreNeitherTrainedNorSent) {
  // The bias is frozen: it keeps the global value (zeros) through training, the
  // update holds the weight only, and nothing is kept for the client.
  LocalTrainer trainer(spec_, {}, &store_);
  trainer.set_frozen_tensors({"bias"});
  RoundPlan plan;
  auto update = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  ASSERT_EQ(update->delta.size(), 1u);
  EXPECT_EQ(update->delta.entries()[0].name, "weight");
  EXPECT_GT(update->delta.tensor(0).abs().max().item<float>(), 0.1);
  EXPECT_TRUE(model_.bias_.detach().equal(at::zeros({2})));
  store_.Commit(0);
  EXPECT_TRUE(store_.Committed(0, kPersonalSlot).empty());
  // The replica trains it again for a run without frozen tensors.
  EXPECT_TRUE(model_.bias_.requires_grad());
}

TEST_F(LocalTrainerTest, PhasesTrainThePersonalPartThenTheSharedPart) {
  // FedRep's round by hand, full-batch gradient descent: the bias is personal.
  // Phase 1 (2 epochs): b <- b - lr grad_b F(W0, b), twice, W fixed. Phase 2 (the
  // client's epoch): W <- W0 - lr grad_W F(W0, b2), b fixed.
  fedkit::ClientTrainingSpec spec;
  spec.set_epochs(1);
  spec.set_batch_size(20);
  spec.mutable_optimizer()->set_lr(0.5);
  spec.mutable_optimizer()->set_momentum(0.9);  // each phase's optimiser starts afresh
  LocalTrainer trainer(spec, {}, &store_);
  trainer.set_personal_tensors({"bias"});
  trainer.set_phases({{LocalPhase::Part::kPersonal, 2}, {LocalPhase::Part::kShared, 0}});
  global_ = ModelState({{"weight", at::tensor({0.3f, -0.2f, 0.1f, 0.4f}).view({2, 2}), false},
                        {"bias", at::tensor({0.05f, -0.05f}), false}});
  RoundPlan plan;
  auto update = trainer.Train(model_, Input(0, 1, plan));
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->local_steps, 3);
  EXPECT_EQ(update->planned_steps, 3);

  const at::Tensor x = examples_.x.slice(0, 0, 20);
  const at::Tensor y = examples_.y.slice(0, 0, 20);
  auto gradients = [&](const at::Tensor& w, const at::Tensor& b) {
    at::Tensor wg = w.clone().requires_grad_(true);
    at::Tensor bg = b.clone().requires_grad_(true);
    at::cross_entropy_loss(at::linear(x, wg, bg), y).backward();
    return std::make_pair(wg.grad(), bg.grad());
  };
  const at::Tensor w0 = global_.tensor(0);
  at::Tensor b = global_.tensor(1);
  const at::Tensor first_step = gradients(w0, b).second;  // momentum buffer = gradient
  b = b - 0.5 * first_step;
  b = b - 0.5 * (0.9 * first_step + gradients(w0, b).second);
  const at::Tensor w1 = w0 - 0.5 * gradients(w0, b).first;

  ASSERT_EQ(update->delta.size(), 1u);
  EXPECT_TRUE(update->delta.tensor(0).allclose(w1 - w0, 0, 1e-6))
      << update->delta.tensor(0) << " vs " << (w1 - w0);
  store_.Commit(0);
  EXPECT_TRUE(store_.Committed(0, kPersonalSlot).at("bias").allclose(b, 0, 1e-6))
      << store_.Committed(0, kPersonalSlot).at("bias") << " vs " << b;
  EXPECT_TRUE(model_.weight_.requires_grad());
  EXPECT_TRUE(model_.bias_.requires_grad());

}

}  // namespace
}  // namespace fl
