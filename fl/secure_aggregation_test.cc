#include "fl/secure_aggregation.h"

#include <ATen/ATen.h>

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

// Sums of weighted deltas, weights and updates; refuses an update of weight 0.
class WeightedSums : public Aggregator {
 public:
  absl::StatusOr<RoundPlan> Configure(const ModelState& global, ServerContext&) override {
    sum_ = at::zeros({3}, at::kDouble);
    weight_ = at::zeros({}, at::kDouble);
    count_ = at::zeros({}, at::kLong);
    ++configured;
    return RoundPlan();
  }
  absl::Status Accumulate(ClientUpdate update, ServerContext&) override {
    if (update.num_examples == 0) return absl::InvalidArgumentError("no examples");
    sum_ += update.delta.tensor(0).to(at::kDouble) * static_cast<double>(update.num_examples);
    weight_ += static_cast<double>(update.num_examples);
    count_ += 1;
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
    return global;
  }
  std::optional<std::map<std::string, at::Tensor>> PartialSums() const override {
    return std::map<std::string, at::Tensor>{
        {"count", count_.clone()}, {"sum", sum_.clone()}, {"weight", weight_.clone()}};
  }
  int configured = 0;

 private:
  at::Tensor sum_, weight_, count_;
};

ClientUpdate Update(int64_t id, std::vector<float> delta, int64_t n) {
  ClientUpdate update;
  update.client_id = id;
  update.delta = ModelState({{"w", at::tensor(delta), false}});
  update.num_examples = n;
  return update;
}

class SecureAggregationRoundTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.update_norm_bound = 10;
    config_.max_weight = 40;
    updates_ = {Update(3, {0.5f, -1.25f, 2.0f}, 10), Update(7, {-0.3f, 0.7f, 0.1f}, 40),
                Update(8, {1.5f, 0.25f, -2.5f}, 25), Update(11, {0.0f, 0.0f, 0.9f}, 5),
                Update(12, {-4.0f, 3.0f, 0.2f}, 20)};
    global_ = ModelState({{"w", at::zeros({3}), false}});
  }

  std::map<std::string, at::Tensor> Layout() {
    WeightedSums layout;
    EXPECT_TRUE(layout.Configure(global_, context_).ok());
    return *layout.PartialSums();
  }

  // The plain sums over updates_[i] for i in `who`.
  std::map<std::string, at::Tensor> Plain(const std::vector<size_t>& who) {
    WeightedSums plain;
    EXPECT_TRUE(plain.Configure(global_, context_).ok());
    for (size_t i : who) EXPECT_TRUE(plain.Accumulate(CloneUpdate(updates_[i]), context_).ok());
    return *plain.PartialSums();
  }

  std::vector<int64_t> Cohort() const {
    std::vector<int64_t> ids;
    for (const ClientUpdate& u : updates_) ids.push_back(u.client_id);
    return ids;
  }

  absl::StatusOr<std::map<std::string, at::Tensor>> RunWith(const std::vector<size_t>& who,
                                                            SecureAggregationRound** kept = nullptr) {
    auto round = SecureAggregationRound::Start(config_, Cohort(), Layout(), 99);
    if (!round.ok()) return round.status();
    WeightedSums client_side;
    for (size_t i : who) {
      absl::Status status = (*round)->Contribute(updates_[i], client_side, global_, context_);
      if (!status.ok()) return status;
    }
    auto sums = (*round)->Unmask();
    if (kept != nullptr) *kept = (held_ = *std::move(round)).get();
    return sums;
  }

  static void ExpectWithin(const std::map<std::string, at::Tensor>& actual,
                           const std::map<std::string, at::Tensor>& expected, double tolerance) {
    ASSERT_EQ(actual.size(), expected.size());
    for (const auto& [name, tensor] : expected) {
      ASSERT_EQ(actual.at(name).scalar_type(), tensor.scalar_type()) << name;
      const double error =
          (actual.at(name).to(at::kDouble) - tensor.to(at::kDouble)).abs().max().item<double>();
      EXPECT_LE(error, tolerance) << name << ": " << actual.at(name) << " vs " << tensor;
    }
  }

  SecureAggregationConfig config_;
  std::vector<ClientUpdate> updates_;
  ModelState global_;
  ServerContext context_;
  std::unique_ptr<SecureAggregationRound> held_;
};

TEST(SecureAggregationDefaultsTest, NeighbourhoodAndMajorityThreshold) {
  EXPECT_EQ(NeighbourhoodSize(100, 0), 100);
  EXPECT_EQ(DefaultThreshold(100, 0), 51);
  // k = 14: 7 on each side along the ring, plus itself.
  EXPECT_EQ(NeighbourhoodSize(100, 14), 15);
  EXPECT_EQ(DefaultThreshold(100, 14), 8);
  EXPECT_EQ(NeighbourhoodSize(100, 13), 15);  // rounded up to even
  // A ring that already joins everyone is the complete graph.
  EXPECT_EQ(NeighbourhoodSize(9, 8), 9);
  EXPECT_EQ(DefaultThreshold(3, 0), 2);
  EXPECT_EQ(DefaultThreshold(2, 0), 2);
}

TEST_F(SecureAggregationRoundTest, TheUnmaskedTotalIsThePlainSumWithinTheQuantum) {
  SecureAggregationRound* round = nullptr;
  auto sums = RunWith({0, 1, 2, 3, 4}, &round);
  ASSERT_TRUE(sums.ok()) << sums.status();
  // bound 40 x 10^2 = 4000 over 5 summands: scale 2^16 (4000 x 5 x 2^16 < 2^31).
  EXPECT_DOUBLE_EQ(round->quantum(), 1.0 / 65536);
  ExpectWithin(*sums, Plain({0, 1, 2, 3, 4}), 5 * round->quantum());
  // Weights and counts are integers: exact.
  EXPECT_EQ(sums->at("weight").item<double>(), 100);
  EXPECT_EQ(sums->at("count").item<int64_t>(), 5);
  EXPECT_EQ(round->contributions(), 5);
  EXPECT_EQ(round->clipped_updates(), 0);
  EXPECT_EQ(round->saturated_values(), 0);
  // Every client sent its keys, its shares and a masked vector of 5 words.
  EXPECT_GT(round->bytes_up(), 5 * (64 + 5 * 4));
}

// A server holding the spec knows the round's seed. Were the clients' keys
// drawn from it, it could recompute every secret and unmask each update (as the
// old code allowed: both rounds below advertised the same keys). Two rounds
// under one seed: fresh keys each time, the same total to the bit.
TEST_F(SecureAggregationRoundTest, KeysComeFromTheOsAndTheTotalStillReproduces) {
  SecureAggregationRound* first = nullptr;
  auto first_sums = RunWith({0, 1, 2, 3, 4}, &first);
  ASSERT_TRUE(first_sums.ok()) << first_sums.status();
  const std::map<int64_t, secagg::PublicKeys> first_keys = first->advertised_keys();
  SecureAggregationRound* second = nullptr;
  auto second_sums = RunWith({0, 1, 2, 3, 4}, &second);
  ASSERT_TRUE(second_sums.ok()) << second_sums.status();
  ASSERT_EQ(first_keys.size(), 5u);
  for (const auto& [id, keys] : second->advertised_keys()) {
    EXPECT_NE(keys.encryption, first_keys.at(id).encryption) << "client " << id;
    EXPECT_NE(keys.masking, first_keys.at(id).masking) << "client " << id;
  }
  for (const auto& [name, tensor] : *first_sums) {
    EXPECT_TRUE(tensor.equal(second_sums->at(name))) << name;
  }
}

TEST_F(SecureAggregationRoundTest, ClientsThatDropAfterTheKeyExchangeAreLeftOutExactly) {
  auto sums = RunWith({0, 2, 4});
  ASSERT_TRUE(sums.ok()) << sums.status();
  ExpectWithin(*sums, Plain({0, 2, 4}), 3.0 / 65536);
  EXPECT_EQ(sums->at("count").item<int64_t>(), 3);
}

TEST_F(SecureAggregationRoundTest, FewerContributionsThanTheThresholdAbort) {
  config_.threshold = 4;
  auto sums = RunWith({0, 1, 2});
  EXPECT_EQ(sums.status().code(), absl::StatusCode::kFailedPrecondition) << sums.status();
  EXPECT_THAT(sums.status().message(), ::testing::HasSubstr("fewer than the threshold 4"));
}

TEST_F(SecureAggregationRoundTest, ACohortBelowTheThresholdAbortsAtTheKeyExchange) {
  auto round = SecureAggregationRound::Start(config_, {3}, Layout(), 1);
  EXPECT_EQ(round.status().code(), absl::StatusCode::kFailedPrecondition) << round.status();
  config_.threshold = 6;
  round = SecureAggregationRound::Start(config_, Cohort(), Layout(), 1);
  EXPECT_EQ(round.status().code(), absl::StatusCode::kFailedPrecondition) << round.status();
}

// Client 12's update has norm sqrt(16 + 9 + 0.04) > 4: it is clipped to 4 before
// its sums are taken, and counted.
TEST_F(SecureAggregationRoundTest, AnUpdateAboveTheNormBoundIsClippedOnTheClient) {
  config_.update_norm_bound = 4;
  SecureAggregationRound* round = nullptr;
  auto sums = RunWith({0, 3, 4}, &round);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(round->clipped_updates(), 1);
  const double norm = std::sqrt(16 + 9 + 0.04);
  const std::vector<float> clipped = {static_cast<float>(-4.0 * 4 / norm),
                                      static_cast<float>(3.0 * 4 / norm),
                                      static_cast<float>(0.2 * 4 / norm)};
  updates_[4] = Update(12, clipped, 20);
  ExpectWithin(*sums, Plain({0, 3, 4}), 3 * round->quantum() + 1e-5);
}

TEST_F(SecureAggregationRoundTest, ValuesBeyondTheRangeSaturateAndAreCounted) {
  // The range is max_weight x max(1, bound)^2 = 1: the weights 10 and 40 exceed it.
  config_.max_weight = 1;
  config_.update_norm_bound = 1;
  SecureAggregationRound* round = nullptr;
  auto sums = RunWith({0, 1, 3}, &round);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_GE(round->saturated_values(), 3);  // at least the three weights
  EXPECT_EQ(sums->at("weight").item<double>(), 3);
  // With the updates unclipped again, a range of its own that holds every value
  // (the largest, 40 x 1.25 = 50 and the weight 40) saturates nothing.
  config_.update_norm_bound = 10;
  config_.value_range = 50;
  sums = RunWith({0, 1, 3}, &round);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(round->saturated_values(), 0);
  ExpectWithin(*sums, Plain({0, 1, 3}), 3 * round->quantum());
}

TEST_F(SecureAggregationRoundTest, AnUpdateTheClientsAggregatorRefusesIsNotSent) {
  auto round = SecureAggregationRound::Start(config_, Cohort(), Layout(), 5);
  ASSERT_TRUE(round.ok());
  WeightedSums client_side;
  ClientUpdate empty = Update(3, {1, 1, 1}, 0);
  EXPECT_EQ((*round)->Contribute(empty, client_side, global_, context_).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*round)->contributions(), 0);
  // Configured afresh for each client, so nothing of one leaks into the next.
  for (size_t i : {1, 2, 3}) {
    ASSERT_TRUE((*round)->Contribute(updates_[i], client_side, global_, context_).ok());
  }
  EXPECT_EQ(client_side.configured, 4);
  auto sums = (*round)->Unmask();
  ASSERT_TRUE(sums.ok()) << sums.status();
  ExpectWithin(*sums, Plain({1, 2, 3}), 3.0 / 65536);
}

TEST_F(SecureAggregationRoundTest, AClientOutsideTheCohortOrSendingTwiceIsAnError) {
  auto round = SecureAggregationRound::Start(config_, Cohort(), Layout(), 5);
  ASSERT_TRUE(round.ok());
  WeightedSums client_side;
  EXPECT_FALSE((*round)->Contribute(Update(99, {1, 1, 1}, 1), client_side, global_, context_).ok());
  ASSERT_TRUE((*round)->Contribute(updates_[0], client_side, global_, context_).ok());
  EXPECT_FALSE((*round)->Contribute(updates_[0], client_side, global_, context_).ok());
}

}  // namespace
}  // namespace fl
