#include "fl/data_splits.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

Examples ThreeClasses() {
  // 30 examples, labels 0,1,2,0,1,2,...; x[i] = i so positions can be traced.
  at::Tensor x = at::arange(30, at::kFloat).reshape({30, 1});
  at::Tensor y = at::arange(30, at::kLong).remainder(3);
  return {x, y};
}

TEST(TakeClassBalancedTest, TakesEqualCountsPerClassAndKeepsTheRest) {
  auto split = TakeClassBalanced(ThreeClasses(), 9, 3, 1);
  ASSERT_TRUE(split.ok()) << split.status();
  const auto& [taken, rest] = *split;
  ASSERT_EQ(taken.size(), 9);
  ASSERT_EQ(rest.size(), 21);
  EXPECT_TRUE(at::bincount(taken.y, {}, 3).equal(at::tensor({3, 3, 3}, at::kLong)));
  // Together they are the original examples, each once.
  at::Tensor all = std::get<0>(at::cat({taken.x, rest.x}).flatten().sort());
  EXPECT_TRUE(all.equal(at::arange(30, at::kFloat)));
  // Labels stay with their inputs.
  EXPECT_TRUE(taken.x.flatten().to(at::kLong).remainder(3).equal(taken.y));
}

TEST(TakeClassBalancedTest, RemainderGoesToLowestClasses) {
  auto split = TakeClassBalanced(ThreeClasses(), 5, 3, 1);
  ASSERT_TRUE(split.ok());
  EXPECT_TRUE(at::bincount(split->first.y, {}, 3).equal(at::tensor({2, 2, 1}, at::kLong)));
}

TEST(TakeClassBalancedTest, SeedChangesTheChoice) {
  auto a = TakeClassBalanced(ThreeClasses(), 6, 3, 1);
  auto b = TakeClassBalanced(ThreeClasses(), 6, 3, 2);
  EXPECT_TRUE(a->first.x.equal(TakeClassBalanced(ThreeClasses(), 6, 3, 1)->first.x));
  EXPECT_FALSE(a->first.x.equal(b->first.x));
}

TEST(TakeClassBalancedTest, AnotherAlignedTensorLosesTheSameRows) {
  // What RunExperiment relies on to keep per-example owner ids aligned with the
  // training rows left after a proxy set is carved out.
  const Examples data = ThreeClasses();
  const at::Tensor owners = at::arange(30, at::kLong).mul(7);
  auto split = TakeClassBalanced(data, 9, 3, 4);
  auto owner_split = TakeClassBalanced({owners, data.y}, 9, 3, 4);
  ASSERT_TRUE(split.ok() && owner_split.ok());
  EXPECT_TRUE(owner_split->second.x.equal(split->second.x.flatten().to(at::kLong).mul(7)));
}

TEST(TakeClassBalancedTest, TooFewOfAClassIsAnError) {
  Examples skewed{at::zeros({10, 1}), at::tensor({0, 0, 0, 0, 0, 0, 0, 0, 1, 2}, at::kLong)};
  auto split = TakeClassBalanced(skewed, 6, 3, 1);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(split.status().message(), "class 1 has 1 examples, a balanced set of 6 needs 2");
  auto too_many = TakeClassBalanced(ThreeClasses(), 31, 3, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LongTailedTest, CountsFollowTheOfficialRule) {
  // FedLAW's LT proxy: 200 examples, 10 classes, imbalance 0.1: floor(20 * 0.1^(c/9)) =
  // 20, 15.49, 11.99, 9.28, 7.19, 5.57, 4.31, 3.34, 2.58, 2.0 -> floored.
  EXPECT_EQ(LongTailedClassCounts(200, 10, 0.1),
            (std::vector<int64_t>{20, 15, 11, 9, 7, 5, 4, 3, 2, 2}));
  // Imbalance 1 is a balanced set without the remainder rule.
  EXPECT_EQ(LongTailedClassCounts(7, 3, 1.0), (std::vector<int64_t>{2, 2, 2}));
}

TEST(LongTailedTest, TakesTheCountsAndKeepsTheRest) {
  // 30 examples of 3 classes, size 9, imbalance 0.25: floor(3 * 0.25^(c/2)) = 3, 1, 0.
  auto split = TakeLongTailed(ThreeClasses(), 9, 3, 0.25, 1);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_TRUE(at::bincount(split->first.y, {}, 3).equal(at::tensor({3, 1, 0}, at::kLong)));
  EXPECT_EQ(split->second.size(), 26);
  EXPECT_TRUE(split->first.x.flatten().to(at::kLong).remainder(3).equal(split->first.y));
}

TEST(LongTailedTest, AnEmptySetIsAnError) {
  auto split = TakeLongTailed(ThreeClasses(), 2, 3, 0.5, 1);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Train: ThreeClasses() with owner ids 7 * x; test: ThreeClasses() with x + 100.
DatasetSplits TrainAndTest() {
  DatasetSplits data;
  data.train = ThreeClasses();
  data.train_owners = at::arange(30, at::kLong).mul(7);
  data.test = ThreeClasses();
  data.test.x = data.test.x + 100;
  return data;
}

fedkit::ProxySpec Proxy(fedkit::ProxySpec::Split split, int size) {
  fedkit::ProxySpec proxy;
  proxy.set_split(split);
  proxy.set_size(size);
  return proxy;
}

TEST(TakeProxyTest, FromTestLeavesTrainAlone) {
  DatasetSplits data = TrainAndTest();
  auto proxy = TakeProxy(Proxy(fedkit::ProxySpec::TEST, 6), 3, 5, data);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto expected = TakeClassBalanced(TrainAndTest().test, 6, 3, 5);
  EXPECT_TRUE(proxy->x.equal(expected->first.x));
  EXPECT_TRUE(proxy->y.equal(expected->first.y));
  EXPECT_TRUE(data.test.x.equal(expected->second.x));
  EXPECT_EQ(data.test.size(), 24);
  EXPECT_TRUE(data.train.x.equal(ThreeClasses().x));
  EXPECT_EQ(data.train_owners.numel(), 30);
}

TEST(TakeProxyTest, FromTrainDropsTheSameOwnerIds) {
  DatasetSplits data = TrainAndTest();
  auto proxy = TakeProxy(Proxy(fedkit::ProxySpec::TRAIN, 9), 3, 4, data);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_TRUE(at::bincount(proxy->y, {}, 3).equal(at::tensor({3, 3, 3}, at::kLong)));
  EXPECT_EQ(data.train.size(), 21);
  EXPECT_TRUE(data.train_owners.equal(data.train.x.flatten().to(at::kLong).mul(7)));
  EXPECT_EQ(data.test.size(), 30);
}

TEST(TakeProxyTest, ImbalanceBelowOneIsLongTailed) {
  DatasetSplits data = TrainAndTest();
  fedkit::ProxySpec spec = Proxy(fedkit::ProxySpec::TEST, 9);
  spec.set_imbalance(0.25);
  auto proxy = TakeProxy(spec, 3, 1, data);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  // floor(3 * 0.25^(c/2)) = 3, 1, 0, as LongTailedTest.TakesTheCountsAndKeepsTheRest.
  EXPECT_TRUE(at::bincount(proxy->y, {}, 3).equal(at::tensor({3, 1, 0}, at::kLong)));
  EXPECT_EQ(data.test.size(), 26);
}

TEST(TakeProxyTest, SizeZeroTakesNothing) {
  DatasetSplits data = TrainAndTest();
  auto proxy = TakeProxy(Proxy(fedkit::ProxySpec::TRAIN, 0), 3, 1, data);
  ASSERT_TRUE(proxy.ok());
  EXPECT_EQ(proxy->size(), 0);
  EXPECT_EQ(data.train.size(), 30);
  EXPECT_EQ(data.train_owners.numel(), 30);
}

TEST(TakeProxyTest, TooLargeIsAnErrorAndChangesNothing) {
  DatasetSplits data = TrainAndTest();
  auto proxy = TakeProxy(Proxy(fedkit::ProxySpec::TRAIN, 31), 3, 1, data);
  EXPECT_EQ(proxy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(data.train.size(), 30);
  EXPECT_EQ(data.train_owners.numel(), 30);
}

TEST(TakeProxyTest, ReportsTheDrawnRowsInTheProxySetsOrder) {
  DatasetSplits data = TrainAndTest();
  std::vector<int64_t> indices;
  auto proxy = TakeProxy(Proxy(fedkit::ProxySpec::TEST, 6), 3, 5, data, &indices);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ASSERT_EQ(indices.size(), 6u);
  // x of the test split is row + 100.
  EXPECT_TRUE(proxy->x.flatten().equal(at::tensor(indices, at::kLong).to(at::kFloat) + 100));
}

// A proxy file in the test's temporary folder.
fedkit::ProxySpec ProxyFile(fedkit::ProxySpec::Split split, const std::string& name,
                            const std::string& json) {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::ofstream(path) << json;
  fedkit::ProxySpec proxy;
  proxy.set_split(split);
  proxy.set_indices_path(path);
  return proxy;
}

TEST(TakeProxyTest, AFileGivesExactlyItsRowsInItsOrder) {
  DatasetSplits data = TrainAndTest();
  std::vector<int64_t> indices;
  auto proxy = TakeProxy(ProxyFile(fedkit::ProxySpec::TRAIN, "rows.json",
                                   R"({"indices": [17, 2, 9, 4]})"),
                         3, 1, data, &indices);
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  EXPECT_THAT(indices, ::testing::ElementsAre(17, 2, 9, 4));
  EXPECT_TRUE(proxy->x.flatten().equal(at::tensor({17.f, 2.f, 9.f, 4.f})));
  EXPECT_TRUE(proxy->y.equal(at::tensor({2, 2, 0, 1}, at::kLong)));
  // The rest keeps its order, and the owner ids lose the same rows.
  ASSERT_EQ(data.train.size(), 26);
  EXPECT_EQ(data.train.x[0].item<float>(), 0);
  EXPECT_EQ(data.train.x[2].item<float>(), 3);
  EXPECT_EQ(data.train.x[3].item<float>(), 5);
  EXPECT_TRUE(data.train_owners.equal(data.train.x.flatten().to(at::kLong).mul(7)));
  EXPECT_EQ(data.test.size(), 30);
}

// The message of the failure of proxy file `json` on the TEST split (30 rows),
// the file's path replaced by "F"; `data` must be left as it was.
std::string FileError(const std::string& json) {
  DatasetSplits data = TrainAndTest();
  const fedkit::ProxySpec spec = ProxyFile(fedkit::ProxySpec::TEST, "bad.json", json);
  auto proxy = TakeProxy(spec, 3, 1, data);
  EXPECT_FALSE(proxy.ok());
  EXPECT_EQ(data.test.size(), 30);
  std::string message(proxy.status().message());
  const std::string& path = spec.indices_path();
  for (size_t at; (at = message.find(path)) != std::string::npos;) {
    message.replace(at, path.size(), "F");
  }
  return message;
}

TEST(TakeProxyTest, EveryFaultOfAFileNamesTheFieldAndTheFile) {
  EXPECT_EQ(FileError(R"({"indices": [3, 30]})"),
            "server.proxy.indices_path: F: index 30 is outside [0, 30), the TEST split's size");
  EXPECT_EQ(FileError(R"({"indices": [-1]})"),
            "server.proxy.indices_path: F: index -1 is outside [0, 30), the TEST split's size");
  EXPECT_EQ(FileError(R"({"indices": [4, 8, 4]})"),
            "server.proxy.indices_path: F: index 4 appears twice");
  EXPECT_EQ(FileError(R"({"indices": []})"), "server.proxy.indices_path: F: no indices");
  EXPECT_THAT(FileError(R"({"indexes": [1]})"),
              ::testing::StartsWith("server.proxy.indices_path: F: not a proxy file: "));
  DatasetSplits data = TrainAndTest();
  fedkit::ProxySpec missing;
  missing.set_indices_path("/nonexistent/proxy.json");
  EXPECT_EQ(TakeProxy(missing, 3, 1, data).status().message(),
            "server.proxy.indices_path: cannot read proxy file /nonexistent/proxy.json: "
            "No such file or directory");
}

}  // namespace
}  // namespace fl
