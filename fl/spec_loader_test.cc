#include "fl/spec_loader.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kValidSpec[] = R"pb(
name: "quickstart"
seed: 17
device: CPU
dataset { name: "fashion_mnist" }
partition {
  name: "dirichlet"
  num_clients: 100
  options {
    [type.googleapis.com/fedkit.ProxySpec] { split: TRAIN size: 3 }
  }
}
model { name: "mlp" }
client {
  epochs: 2
  batch_size: 50
  optimizer { kind: ADAM lr: 0.05 momentum: 0.9 }
}
server { rounds: 50 clients_per_round: 10 eval_every: 5 }
aggregator { name: "fedavg" }
)pb";

fedkit::ExperimentSpec ParseOrDie(const std::string& text) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(text, "test");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : fedkit::ExperimentSpec();
}

TEST(ParseSpecTest, ValidSpecHasItsFields) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(kValidSpec, "valid.textproto");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "quickstart");
  EXPECT_EQ(spec->seed(), 17);
  EXPECT_EQ(spec->device(), fedkit::ExperimentSpec::CPU);
  EXPECT_EQ(spec->dataset().name(), "fashion_mnist");
  EXPECT_EQ(spec->partition().name(), "dirichlet");
  EXPECT_EQ(spec->partition().num_clients(), 100);
  EXPECT_EQ(spec->model().name(), "mlp");
  EXPECT_EQ(spec->client().budget_case(), fedkit::ClientTrainingSpec::kEpochs);
  EXPECT_EQ(spec->client().epochs(), 2);
  EXPECT_EQ(spec->client().batch_size(), 50);
  EXPECT_EQ(spec->client().optimizer().kind(), fedkit::OptimizerSpec::ADAM);
  EXPECT_DOUBLE_EQ(spec->client().optimizer().lr(), 0.05);
  EXPECT_DOUBLE_EQ(spec->client().optimizer().momentum(), 0.9);
  EXPECT_EQ(spec->server().rounds(), 50);
  EXPECT_EQ(spec->server().clients_per_round(), 10);
  EXPECT_TRUE(spec->server().has_eval_every());
  EXPECT_EQ(spec->server().eval_every(), 5);
  EXPECT_FALSE(spec->server().has_eval_batch_size());
  EXPECT_EQ(spec->aggregator().name(), "fedavg");

  ASSERT_TRUE(spec->partition().has_options());
  EXPECT_EQ(spec->partition().options().type_url(), "type.googleapis.com/fedkit.ProxySpec");
  fedkit::ProxySpec proxy;
  ASSERT_TRUE(spec->partition().options().UnpackTo(&proxy));
  EXPECT_EQ(proxy.split(), fedkit::ProxySpec::TRAIN);
  EXPECT_EQ(proxy.size(), 3);
}

TEST(ParseSpecTest, EmptyTextIsAnEmptySpec) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec("", "empty");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ByteSizeLong(), 0);
}

TEST(ParseSpecTest, MisspelledFieldNamesSourceLineAndColumn) {
  // Line and column are 1-based. protobuf's parser reports an unknown field at the
  // token after its name: "sede" spans columns 3-6 of line 3, the ':' is column 7.
  absl::StatusOr<fedkit::ExperimentSpec> spec =
      ParseSpec("name: \"x\"\nserver {\n  sede: 1\n}\n", "exp.textproto");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("exp.textproto:3:7: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("\"sede\""));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("fedkit.ServerSpec"));
}

TEST(ParseSpecTest, MisspelledTopLevelFieldOnFirstLine) {
  // The ':' after "nmae" is on line 1, column 5.
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec("nmae: \"x\"", "a.txt");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("a.txt:1:5: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("nmae"));
}

TEST(ParseSpecTest, SyntaxErrorNamesSourceLineAndColumn) {
  // The ':' after "rounds" is missing; the parser trips over "3" on line 2, column 10.
  absl::StatusOr<fedkit::ExperimentSpec> spec =
      ParseSpec("server {\n  rounds 3\n}\n", "syntax.textproto");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("syntax.textproto:2:10: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("\":\""));
}

TEST(ParseSpecTest, WrongValueTypeIsAnError) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec("seed: \"many\"", "v");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("v:1:7: "));
}

TEST(ParseSpecTest, AnyWithUnknownTypeFails) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(
      "model {\n  name: \"mlp\"\n  options { [type.googleapis.com/fedkit.NoSuchOptions] { x: 1 } }\n}\n",
      "any.textproto");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), StartsWith("any.textproto:3:"));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("fedkit.NoSuchOptions"));
}

TEST(ParseSpecTest, AnyWithKnownTypeButUnknownFieldFails) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(
      "model { options { [type.googleapis.com/fedkit.OptimizerSpec] { lr: 1 size: 3 } } }",
      "any2");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("size"));
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(LoadSpecFileTest, MissingFileIsNotFound) {
  const std::string path = TempPath("does/not/exist.textproto");
  absl::StatusOr<fedkit::ExperimentSpec> spec = LoadSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(path));
}

TEST(LoadSpecFileTest, ReadsARealFile) {
  const std::string path = TempPath("load_spec_file_test.textproto");
  {
    std::ofstream out(path, std::ios::trunc);
    out << kValidSpec;
    ASSERT_TRUE(out.good());
  }
  absl::StatusOr<fedkit::ExperimentSpec> spec = LoadSpecFile(path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "quickstart");
  EXPECT_EQ(spec->seed(), 17);
  EXPECT_EQ(spec->server().rounds(), 50);
}

TEST(LoadSpecFileTest, ErrorsInAFileNameThePath) {
  const std::string path = TempPath("bad_spec_file_test.textproto");
  {
    std::ofstream out(path, std::ios::trunc);
    out << "name: \"x\"\n\nbogus: 1\n";
    ASSERT_TRUE(out.good());
  }
  absl::StatusOr<fedkit::ExperimentSpec> spec = LoadSpecFile(path);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  // Line 3; the ':' after "bogus" is column 6.
  EXPECT_THAT(std::string(spec.status().message()), StartsWith(path + ":3:6: "));
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr("bogus"));
}

TEST(ApplyOverrideTest, SubMessageFieldsMergeFieldByField) {
  fedkit::ExperimentSpec spec = ParseOrDie(kValidSpec);
  ASSERT_TRUE(ApplyOverride("server { rounds: 3 }", spec).ok());
  EXPECT_EQ(spec.server().rounds(), 3);
  EXPECT_EQ(spec.server().clients_per_round(), 10);
  EXPECT_EQ(spec.server().eval_every(), 5);
  // Untouched parts of the spec stay.
  EXPECT_EQ(spec.name(), "quickstart");
  EXPECT_EQ(spec.client().epochs(), 2);
}

TEST(ApplyOverrideTest, ZeroOverridesNonZero) {
  fedkit::ExperimentSpec spec = ParseOrDie(kValidSpec);
  ASSERT_EQ(spec.seed(), 17);
  ASSERT_TRUE(ApplyOverride("seed: 0", spec).ok());
  EXPECT_EQ(spec.seed(), 0);

  ASSERT_TRUE(ApplyOverride("client { optimizer { momentum: 0 } }", spec).ok());
  EXPECT_DOUBLE_EQ(spec.client().optimizer().momentum(), 0.0);
  EXPECT_DOUBLE_EQ(spec.client().optimizer().lr(), 0.05);

  ASSERT_TRUE(ApplyOverride("device: AUTO", spec).ok());
  EXPECT_EQ(spec.device(), fedkit::ExperimentSpec::AUTO);
}

TEST(ApplyOverrideTest, SwitchesOneofFromEpochsToSteps) {
  fedkit::ExperimentSpec spec = ParseOrDie(kValidSpec);
  ASSERT_EQ(spec.client().budget_case(), fedkit::ClientTrainingSpec::kEpochs);
  ASSERT_TRUE(ApplyOverride("client { steps: 25 }", spec).ok());
  EXPECT_EQ(spec.client().budget_case(), fedkit::ClientTrainingSpec::kSteps);
  EXPECT_EQ(spec.client().steps(), 25);
  EXPECT_EQ(spec.client().epochs(), 0);
  EXPECT_EQ(spec.client().batch_size(), 50);
}

TEST(ApplyOverrideTest, AFailedOverrideLeavesTheSpecUnchanged) {
  fedkit::ExperimentSpec spec;
  spec.set_seed(7);
  spec.mutable_server()->set_rounds(10);
  EXPECT_FALSE(ApplyOverride("seed: 1 server { roundz: 3 }", spec).ok());
  EXPECT_EQ(spec.seed(), 7);
  EXPECT_EQ(spec.server().rounds(), 10);
}

TEST(ApplyOverrideTest, RepeatedFieldAppends) {
  fedkit::ExperimentSpec spec = ParseOrDie(std::string(kValidSpec) +
                                           "client { hooks { name: \"prox\" } }\n");
  ASSERT_EQ(spec.client().hooks_size(), 1);
  ASSERT_TRUE(ApplyOverride("client { hooks { name: \"clip\" } }", spec).ok());
  ASSERT_EQ(spec.client().hooks_size(), 2);
  EXPECT_EQ(spec.client().hooks(0).name(), "prox");
  EXPECT_EQ(spec.client().hooks(1).name(), "clip");
}

TEST(ApplyOverrideTest, AnyIsReplacedWhole) {
  fedkit::ExperimentSpec spec = ParseOrDie(kValidSpec);
  ASSERT_TRUE(ApplyOverride(
                  "partition { options { [type.googleapis.com/fedkit.OptimizerSpec] { lr: 0.5 } } }",
                  spec)
                  .ok());
  EXPECT_EQ(spec.partition().options().type_url(), "type.googleapis.com/fedkit.OptimizerSpec");
  fedkit::OptimizerSpec optimizer;
  ASSERT_TRUE(spec.partition().options().UnpackTo(&optimizer));
  EXPECT_DOUBLE_EQ(optimizer.lr(), 0.5);
  EXPECT_EQ(spec.partition().num_clients(), 100);
}

TEST(ApplyOverrideTest, UnknownFieldFailsWithSetSource) {
  fedkit::ExperimentSpec spec = ParseOrDie(kValidSpec);
  // "roundz" starts at column 10; the ':' after it is column 16.
  absl::Status status = ApplyOverride("server { roundz: 3 }", spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), StartsWith("--set:1:16: "));
  EXPECT_THAT(std::string(status.message()), HasSubstr("roundz"));
}

}  // namespace
}  // namespace fl
