#include <cmath>
#include <memory>

#include <ATen/ATen.h>

#include "aggregators/common/scalar_toy.h"
#include "aggregators/feddf/feddf_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {
namespace {

using ::fedkit::aggregators::FedDfOptions;

std::unique_ptr<fl::Aggregator> Create(const FedDfOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("feddf", any);
  EXPECT_TRUE(aggregator.ok()) << aggregator.status();
  return *std::move(aggregator);
}

double Sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

FedDfOptions OneStep(double temperature) {
  FedDfOptions options;
  options.mutable_sgd()->set_steps(1);
  options.mutable_sgd()->set_lr(0.1);
  options.mutable_sgd()->set_momentum(0);
  options.mutable_sgd()->set_weight_decay(0);
  options.set_temperature(temperature);
  return options;
}

TEST(FedDfTest, OneStepAgainstHandComputation) {
  // Student: FedAvg w = 2.5, logits (2.5, -2.5) at x = 1. Teacher: the mean of the
  // clients' logits (1, -1) and (3, -3) = (2, -2), uniform over clients. With
  // p = softmax(teacher / T), q = softmax(student / T) and dz/dw = (1, -1):
  //   d/dw T^2 KL(p || q) = T (q_0 - p_0 - (q_1 - p_1)) = 2T (sigmoid(5/T) - sigmoid(4/T)).
  for (double t : {1.0, 2.0}) {
    toy::ScalarToy toy;
    fl::ServerContext context = toy.Context();
    auto next = toy::ScalarToy::Round(*Create(OneStep(t)), context);
    ASSERT_TRUE(next.ok()) << next.status();
    const double w = 2.5 - 0.1 * 2 * t * (Sigmoid(5 / t) - Sigmoid(4 / t));
    EXPECT_NEAR(next->tensor(0).item<double>(), w, 1e-12) << t;
  }
}

TEST(FedDfTest, DefaultsReduceTheProxyLoss) {
  // The ensemble (w = 2 in logit terms) sits closer to the proxy optimum w = 0 than
  // FedAvg's 2.5, so distilling into it lowers the proxy cross-entropy.
  toy::ScalarToy toy;
  fl::ServerContext context = toy.Context();
  auto next = toy::ScalarToy::Round(*Create(FedDfOptions()), context);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_LT(context.diagnostics.at("proxy_loss_after"), context.diagnostics.at("proxy_loss_before"));
  const double w = next->tensor(0).item<double>();
  EXPECT_LT(w, 2.5);  // towards the teacher
  EXPECT_GT(w, 2.0);
}

TEST(FedDfTest, RejectsASecondUpdateFromOneClient) {
  toy::ScalarToy toy;
  fl::ServerContext context = toy.Context();
  auto feddf = Create(FedDfOptions());
  ASSERT_TRUE(feddf->Configure(toy::Scalar(0), context).ok());
  auto updates = toy::ScalarToy::Updates();
  fl::ClientUpdate again = updates[0];
  ASSERT_TRUE(feddf->Accumulate(std::move(updates[0]), context).ok());
  EXPECT_FALSE(feddf->Accumulate(std::move(again), context).ok());
}

TEST(FedDfTest, BadOptionsAreReportedTogether) {
  FedDfOptions options;
  options.set_temperature(0);
  options.mutable_sgd()->set_batch_size(0);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto aggregator = fl::Registry<fl::Aggregator>::Global().Create("feddf", any);
  const std::string message(aggregator.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("options.temperature: must be > 0, got 0"));
  EXPECT_THAT(message, ::testing::HasSubstr("options.sgd.batch_size: must be >= 1, got 0"));
}

}  // namespace
}  // namespace aggregators
