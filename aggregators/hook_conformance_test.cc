// The client hooks' conformance suite: every registered hook, created through the
// registry, trained for two rounds on a tiny model by the real LocalTrainer.
// Linking a new hook into :all enrols it; there are no per-name exclusions.
//
// A hook's options and broadcast come from an aggregator that plans it (the first
// registered one whose AggregatorProperties::client_hooks names it, configured with
// its default options), as they would in a run; a hook no aggregator plans runs
// with its default options and no broadcast.

#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/local_trainer.h"
#include "fl/model.h"
#include "fl/personalization.h"
#include "fl/registry.h"
#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

class TinyModel : public fl::Model {
 public:
  TinyModel() {
    weight_ = register_parameter("weight", at::randn({3, 4}));
    bias_ = register_parameter("bias", at::randn({3}));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(x.flatten(1), weight_, bias_);
  }
  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    return std::vector<LayerInput>{{"weight", "bias", x.flatten(1), {}}};
  }

 private:
  at::Tensor weight_, bias_;
};

// What one client's round produced, with the state it left in the store.
struct RoundResult {
  fl::ClientUpdate update;
  fl::TensorMap state;
};

void ExpectSameTensors(const fl::TensorMap& a, const fl::TensorMap& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (const auto& [name, tensor] : a) {
    ASSERT_TRUE(b.count(name)) << what << ": " << name;
    EXPECT_TRUE(tensor.equal(b.at(name))) << what << ": " << name;
  }
}

void ExpectSameUpdate(const fl::ClientUpdate& a, const fl::ClientUpdate& b) {
  ASSERT_TRUE(a.delta.CheckSameLayout(b.delta).ok());
  for (size_t i = 0; i < a.delta.size(); ++i) {
    EXPECT_TRUE(a.delta.tensor(i).equal(b.delta.tensor(i))) << a.delta.entries()[i].name;
  }
  ASSERT_EQ(a.extras.size(), b.extras.size());
  for (const auto& [name, extra] : a.extras) {
    ASSERT_TRUE(b.extras.count(name)) << name;
    for (size_t i = 0; i < extra.size(); ++i) {
      EXPECT_TRUE(extra.tensor(i).equal(b.extras.at(name).tensor(i))) << name;
    }
  }
  EXPECT_EQ(a.num_examples, b.num_examples);
  EXPECT_EQ(a.bytes_sent, b.bytes_sent);
}

class HookConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    torch::manual_seed(11);
    global_ = fl::ModelState::FromModule(TinyModel());
    examples_ = {at::randn({40, 4}), at::arange(40, at::kLong).remainder(3)};
    proxy_ = {at::randn({12, 4}), at::arange(12, at::kLong).remainder(3)};
    context_.new_model = [] {
      return absl::StatusOr<std::unique_ptr<fl::Model>>(std::make_unique<TinyModel>());
    };
    context_.proxy = &proxy_;
    context_.round = 1;
    context_.num_clients = 10;
    context_.expected_cohort_size = 2;
    context_.planned_rounds = 2;
    plan_.hooks.push_back({GetParam(), {}});
    const auto& aggregators = fl::Registry<fl::Aggregator>::Global();
    for (const std::string& name : aggregators.Names()) {
      auto aggregator = aggregators.Create(name, google::protobuf::Any());
      if (!aggregator.ok() ||
          !absl::c_linear_search((*aggregator)->properties().client_hooks, GetParam())) {
        continue;
      }
      auto plan = (*aggregator)->Configure(global_, context_);
      ASSERT_TRUE(plan.ok()) << name << ": " << plan.status();
      for (const fl::HookRequest& request : plan->hooks) {
        if (request.name == GetParam()) plan_.hooks[0] = request;
      }
      plan_.broadcast = plan->broadcast;
      planned_by_ = name;
      break;
    }
  }

  // Client `client` trains one round (10 SGD steps on its 20 examples) from
  // global_ with the hook, against `store`; the store then holds the staged state.
  fl::ClientUpdate Train(fl::ClientStateStore& store, int64_t client, int round) {
    fedkit::ClientTrainingSpec spec;
    spec.set_steps(10);
    spec.set_batch_size(4);
    spec.mutable_optimizer()->set_lr(0.1);
    fl::LocalTrainer trainer(spec, {}, &store);
    std::vector<int64_t> indices(20);
    std::iota(indices.begin(), indices.end(), 20 * (client % 2));
    fl::LocalTrainingInput input;
    input.client_id = client;
    input.round = round;
    input.seed = 1000 * client + round;
    input.global = &global_;
    input.plan = &plan_;
    input.examples = &examples_;
    input.indices = &indices;
    TinyModel model;
    absl::StatusOr<fl::ClientUpdate> update = trainer.Train(model, input);
    EXPECT_TRUE(update.ok()) << "planned by " << planned_by_ << ": " << update.status();
    return update.ok() ? *std::move(update) : fl::ClientUpdate();
  }

  // Two rounds of `client`, committing each: what round 2 produced.
  RoundResult TwoRounds(fl::ClientStateStore& store, int64_t client) {
    Train(store, client, 1);
    store.Commit(client);
    RoundResult result{Train(store, client, 2), {}};
    store.Commit(client);
    result.state = Memory(store, client);
    return result;
  }

  // A hook's whole memory of a client: its slot in the store and the client's
  // personal tensors (where a personal model's hook keeps it: Ditto's v_k).
  fl::TensorMap Memory(const fl::ClientStateStore& store, int64_t client) const {
    fl::TensorMap memory;
    for (const std::string& slot : {GetParam(), std::string(fl::kPersonalSlot)}) {
      for (const auto& [name, tensor] : store.Committed(client, slot)) {
        memory[absl::StrCat(slot, "/", name)] = tensor;
      }
    }
    return memory;
  }

  fl::ModelState global_;
  fl::Examples examples_;
  fl::Examples proxy_;
  fl::ServerContext context_;
  fl::RoundPlan plan_;
  std::string planned_by_ = "(no aggregator)";
};

TEST_P(HookConformanceTest, CreatesFromDefaultOptions) {
  const auto& registry = fl::Registry<fl::ClientHook>::Global();
  EXPECT_TRUE(registry.Create(GetParam(), google::protobuf::Any()).ok());
}

TEST_P(HookConformanceTest, RefusesOptionsOfAnotherTypeOrCorrupt) {
  const auto& registry = fl::Registry<fl::ClientHook>::Global();
  google::protobuf::Any wrong;
  wrong.PackFrom(fedkit::ProxySpec());
  auto hook = registry.Create(GetParam(), wrong);
  EXPECT_EQ(hook.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(hook.status().message(), ::testing::HasSubstr("got fedkit.ProxySpec"));

  google::protobuf::Any corrupt = plan_.hooks[0].options;
  if (corrupt.type_url().empty()) {
    auto options = registry.UnpackOptions(GetParam(), google::protobuf::Any());
    ASSERT_TRUE(options.ok()) << options.status();
    corrupt.PackFrom(**options);
  }
  corrupt.set_value("\xff\xff\xff");
  EXPECT_EQ(registry.Create(GetParam(), corrupt).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(HookConformanceTest, DeterministicForAFixedSeed) {
  fl::ClientStateStore a, b;
  RoundResult first = TwoRounds(a, 3);
  RoundResult second = TwoRounds(b, 3);
  ExpectSameUpdate(first.update, second.update);
  ExpectSameTensors(first.state, second.state, "state");
}

// A hook's whole memory of a client is in the store: a copy of it (as a
// checkpoint would restore it) continues exactly as the original.
TEST_P(HookConformanceTest, StateRoundTripsThroughACopy) {
  fl::ClientStateStore original;
  Train(original, 3, 1);
  original.Commit(3);
  fl::ClientStateStore restored;
  std::map<std::string, fl::TensorMap> copy;
  for (const std::string& slot : {GetParam(), std::string(fl::kPersonalSlot)}) {
    for (const auto& [name, tensor] : original.Committed(3, slot)) {
      copy[slot][name] = tensor.clone();
    }
  }
  restored.Stage(3, std::move(copy));
  restored.Commit(3);
  fl::ClientUpdate from_original = Train(original, 3, 2);
  fl::ClientUpdate from_restored = Train(restored, 3, 2);
  ExpectSameUpdate(from_original, from_restored);
  original.Commit(3);
  restored.Commit(3);
  ExpectSameTensors(Memory(original, 3), Memory(restored, 3), "state");
}

TEST_P(HookConformanceTest, LeavesOtherHooksAndClientsAlone) {
  fl::ClientStateStore store;
  const fl::TensorMap other_hook = {{"x", at::arange(5.0)}};
  const fl::TensorMap other_client = {{"y", at::ones({2, 2})}};
  store.Stage(3, {{"another_hook", {{"x", other_hook.at("x").clone()}}}});
  store.Commit(3);
  store.Stage(4, {{GetParam(), {{"y", other_client.at("y").clone()}}}});
  store.Commit(4);
  TwoRounds(store, 3);
  ExpectSameTensors(store.Committed(3, "another_hook"), other_hook, "another hook's state");
  ExpectSameTensors(store.Committed(4, GetParam()), other_client, "another client's state");
}

// A rejected update leaves the client as it was: the next round repeats exactly.
TEST_P(HookConformanceTest, ARejectedRoundChangesNothing) {
  fl::ClientStateStore store;
  Train(store, 3, 1);
  store.Commit(3);
  const fl::TensorMap before = [&] {
    fl::TensorMap copy;
    for (const auto& [name, t] : Memory(store, 3)) copy[name] = t.clone();
    return copy;
  }();
  fl::ClientUpdate rejected = Train(store, 3, 2);
  store.Discard(3);
  ExpectSameTensors(Memory(store, 3), before, "state after a rejected round");
  ExpectSameUpdate(Train(store, 3, 2), rejected);
}

TEST_P(HookConformanceTest, ExtrasAreFiniteAndCountedInTheBytesSent) {
  fl::ClientStateStore store;
  RoundResult result = TwoRounds(store, 3);
  EXPECT_TRUE(result.update.delta.AllFinite());
  int64_t bytes = result.update.delta.NumBytes();
  for (const auto& [name, extra] : result.update.extras) {
    EXPECT_TRUE(extra.AllFinite()) << name;
    bytes += extra.NumBytes();
  }
  EXPECT_EQ(result.update.bytes_sent, bytes);
}

INSTANTIATE_TEST_SUITE_P(AllClientHooks, HookConformanceTest,
                         ::testing::ValuesIn(fl::Registry<fl::ClientHook>::Global().Names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace aggregators
