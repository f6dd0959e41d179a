#include <cmath>
#include <memory>

#include <ATen/ATen.h>

#include "aggregators/common/scalar_toy.h"
#include "aggregators/server_ft/server_ft_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::ServerFtOptions;

std::unique_ptr<fl::Aggregator> Create(const ServerFtOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("server_ft", any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return *std::move(aggregator);
}

TEST(ServerFtTest, OneStepFromFedAvgAgainstHandComputation) {
  // FedAvg: w = (1 * 1 + 3 * 3) / 4 = 2.5. One full-batch SGD step on the proxy loss
  // (gradient tanh(w)), lr 0.1, no momentum or decay: w = 2.5 - 0.1 tanh(2.5).
  ServerFtOptions options;
  options.mutable_sgd()->set_steps(1);
  options.mutable_sgd()->set_lr(0.1);
  options.mutable_sgd()->set_momentum(0);
  options.mutable_sgd()->set_weight_decay(0);
  toy::ScalarToy toy;
  fl::ServerContext context = toy.Context();
  auto next = toy::ScalarToy::Round(*Create(options), context);
  ASSERT_TRUE(next.ok()) << next.status();
  const double w = 2.5 - 0.1 * std::tanh(2.5);
  EXPECT_NEAR(next->tensor(0).item<double>(), w, 1e-12);
  EXPECT_NEAR(context.diagnostics.at("proxy_loss_before"), toy::ScalarToyLoss(2.5), 1e-12);
  EXPECT_NEAR(context.diagnostics.at("proxy_loss_after"), toy::ScalarToyLoss(w), 1e-12);
}

TEST(ServerFtTest, DefaultsReduceTheProxyLoss) {
  toy::ScalarToy toy;
  fl::ServerContext context = toy.Context();
  ASSERT_TRUE(toy::ScalarToy::Round(*Create(ServerFtOptions()), context).ok());
  EXPECT_LT(context.diagnostics.at("proxy_loss_after"),
            0.5 * context.diagnostics.at("proxy_loss_before"));
}

TEST(ServerFtTest, WithoutAProxySetFailsNamingTheField) {
  fl::ServerContext context;
  auto plan = Create(ServerFtOptions())->Configure(toy::Scalar(0), context);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(plan.status().message()), ::testing::HasSubstr("server.proxy.size"));
}

TEST(ServerFtTest, BadOptionsNameTheirPath) {
  ServerFtOptions options;
  options.mutable_sgd()->set_lr(-1);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("server_ft", any);
  EXPECT_THAT(std::string(aggregator.status().message()),
              ::testing::HasSubstr("options.sgd.lr: must be > 0, got -1"));
}

}  // namespace
}  // namespace aggregators
