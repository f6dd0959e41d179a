#include "fl/client_evaluation.h"

#include <ATen/ATen.h>

#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

at::Tensor Labels(std::vector<int64_t> labels) { return at::tensor(labels, at::kLong); }

// The labels of client `position`'s test examples, counted by class.
std::vector<int64_t> ClassCounts(const ClientTestSets& sets, const at::Tensor& test, int64_t position,
                                 int64_t num_classes) {
  const at::Tensor own = sets.indices.index_select(0, at::nonzero(sets.owner.eq(position)).view({-1}));
  const at::Tensor labels = test.index_select(0, own);
  std::vector<int64_t> counts(num_classes, 0);
  for (int64_t i = 0; i < labels.numel(); ++i) ++counts[labels[i].item<int64_t>()];
  return counts;
}

// Test split: class 0 six times, class 1 twice, class 2 five times (13 examples).
at::Tensor TestLabels() { return Labels({0, 1, 2, 0, 0, 2, 2, 0, 1, 2, 0, 2, 0}); }

TEST(LabelMatchedTestSetsTest, SplitsTheClientsSizeByLargestRemainders) {
  // Client 0 trains on three 0s and one 1; 6 test examples: 6 x 3/4 = 4.5 and
  // 6 x 1/4 = 1.5, the tied remainder to class 0: five 0s, one 1, no 2.
  const at::Tensor train = Labels({0, 0, 0, 1, 2, 2});
  ClientTestSetOptions options;
  options.examples_per_client = 6;
  auto sets = LabelMatchedTestSets(train, {{0, 1, 2, 3}, {4, 5}}, TestLabels(), 3, options, 7);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_THAT(sets->clients, ElementsAre(0, 1));
  EXPECT_THAT(sets->sizes, ElementsAre(6, 5));
  EXPECT_THAT(ClassCounts(*sets, TestLabels(), 0, 3), ElementsAre(5, 1, 0));
  // Client 1 trains on 2s only and there are five: all of them, one short.
  EXPECT_THAT(ClassCounts(*sets, TestLabels(), 1, 3), ElementsAre(0, 0, 5));
  EXPECT_EQ(sets->shortfall, 1);
  // Without replacement within a client.
  const at::Tensor first = sets->indices.narrow(0, 0, 6);
  EXPECT_EQ(std::get<0>(at::_unique(first)).numel(), 6);
}

TEST(LabelMatchedTestSetsTest, DefaultSizeFollowsTheTrainingShare) {
  // 8 training examples, 13 test: a client of 4 gets round(6.5) = 7, one of 1
  // gets round(1.625) = 2, and one of 3 round(4.875) = 5.
  const at::Tensor train = Labels({0, 0, 2, 2, 1, 0, 2, 2});
  auto sets = LabelMatchedTestSets(train, {{0, 1, 2, 3}, {4}, {5, 6, 7}}, TestLabels(), 3, {}, 7);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_THAT(sets->sizes, ElementsAre(7, 2, 5));
  // 7 x 2/4 = 3.5 each of 0 and 2: the tie to class 0.
  EXPECT_THAT(ClassCounts(*sets, TestLabels(), 0, 3), ElementsAre(4, 0, 3));
  EXPECT_THAT(ClassCounts(*sets, TestLabels(), 1, 3), ElementsAre(0, 2, 0));
  // One 0 and two 2s: 5/3 = 1 r 2 and 10/3 = 3 r 1; the larger remainder wins.
  EXPECT_THAT(ClassCounts(*sets, TestLabels(), 2, 3), ElementsAre(2, 0, 3));
  EXPECT_EQ(sets->owner.numel(), 14);
  EXPECT_EQ(sets->shortfall, 0);
}

TEST(LabelMatchedTestSetsTest, AClientWhoseClassesAreNeverTestedIsLeftOutAndCounted) {
  const at::Tensor train = Labels({3, 3, 0});
  auto sets = LabelMatchedTestSets(train, {{0, 1}, {2}}, TestLabels(), 4, {}, 7);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_THAT(sets->clients, ElementsAre(1));
  EXPECT_EQ(sets->untestable, 1);
}

TEST(LabelMatchedTestSetsTest, TheSeedDecidesTheDrawAndTheSampleOfClients) {
  std::vector<int64_t> test_labels(1000);
  for (int64_t i = 0; i < 1000; ++i) test_labels[i] = i % 10;
  const at::Tensor test = Labels(test_labels);
  const at::Tensor train = at::arange(100, at::kLong).remainder(10);
  std::vector<std::vector<int64_t>> shares(10);
  for (int64_t i = 0; i < 100; ++i) shares[i % 10].push_back(i);  // client k: class k only
  ClientTestSetOptions options;
  options.sample_clients = 4;
  options.examples_per_client = 20;
  auto a = LabelMatchedTestSets(train, shares, test, 10, options, 1);
  auto again = LabelMatchedTestSets(train, shares, test, 10, options, 1);
  auto other = LabelMatchedTestSets(train, shares, test, 10, options, 2);
  ASSERT_TRUE(a.ok() && again.ok() && other.ok());
  EXPECT_EQ(a->clients.size(), 4u);
  EXPECT_TRUE(std::is_sorted(a->clients.begin(), a->clients.end()));
  EXPECT_EQ(a->clients, again->clients);
  EXPECT_TRUE(a->indices.equal(again->indices));
  // Another seed: other clients or other examples (100 of each class to draw 20 from).
  EXPECT_FALSE(a->clients == other->clients && a->indices.equal(other->indices));
  for (size_t p = 0; p < a->clients.size(); ++p) {
    std::vector<int64_t> expected(10, 0);
    expected[a->clients[p]] = 20;
    EXPECT_EQ(ClassCounts(*a, test, static_cast<int64_t>(p), 10), expected) << a->clients[p];
  }
}

TEST(LabelMatchedTestSetsTest, BadInputNamesWhatIsWrong) {
  const at::Tensor train = Labels({0, 1});
  ClientTestSetOptions options;
  options.examples_per_client = -1;
  EXPECT_THAT(LabelMatchedTestSets(train, {{0}}, TestLabels(), 3, options, 1).status().message(),
              HasSubstr("examples_per_client: must be >= 0, got -1"));
  options = {};
  options.sample_clients = 3;
  EXPECT_THAT(LabelMatchedTestSets(train, {{0}, {1}}, TestLabels(), 3, options, 1).status().message(),
              HasSubstr("sample_clients: must be in [0, 2]"));
  EXPECT_THAT(LabelMatchedTestSets(train, {{0}}, TestLabels(), 2, {}, 1).status().message(),
              HasSubstr("test labels: must be in [0, 2), got [0, 2]"));
  EXPECT_THAT(LabelMatchedTestSets(train, {{5}}, TestLabels(), 3, {}, 1).status().message(),
              HasSubstr("client 0's share: index 5 is outside the training split of 2"));
  EXPECT_THAT(LabelMatchedTestSets(train, {{0}}, Labels({}), 3, {}, 1).status().message(),
              HasSubstr("test split is empty"));
}

TEST(SummarizeClientAccuracyTest, MeanSpreadTenthPercentileAndWorstByHand) {
  // Accuracies 1, 1/2, 0, 3/4 over sets of 1, 2, 1 and 4 examples. Mean 0.5625;
  // population variance (0.4375^2 + 0.0625^2 + 0.5625^2 + 0.1875^2) / 4 =
  // 0.13671875; 10th percentile: sorted 0, 0.5, 0.75, 1 at position 0.3 -> 0.15
  // (numpy.percentile's default).
  ClientTestSets sets;
  sets.clients = {2, 5, 7, 9};
  sets.sizes = {1, 2, 1, 4};
  sets.indices = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}, at::kLong);
  sets.owner = at::tensor(std::vector<int64_t>{0, 1, 1, 2, 3, 3, 3, 3}, at::kLong);
  const at::Tensor correct = at::tensor(std::vector<int64_t>{1, 1, 0, 0, 1, 0, 1, 1}).to(at::kBool);
  const ClientAccuracy accuracy = SummarizeClientAccuracy(sets, correct);
  EXPECT_THAT(accuracy.per_client, ElementsAre(1.0, 0.5, 0.0, 0.75));
  EXPECT_DOUBLE_EQ(accuracy.mean, 0.5625);
  EXPECT_DOUBLE_EQ(accuracy.stddev, std::sqrt(0.13671875));
  EXPECT_DOUBLE_EQ(accuracy.percentile_10, 0.15);
  EXPECT_EQ(accuracy.worst, 0.0);
  // Pooled: 1 + 1 + 0 + 3 right of 8.
  EXPECT_DOUBLE_EQ(accuracy.pooled, 5.0 / 8.0);
}

}  // namespace
}  // namespace fl
