#include "fl/deploy/deployed_run.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "fl/spec_loader.h"
#include "gmock/gmock.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace fl::deploy {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

fedkit::ExperimentSpec Spec(const std::string& text) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(text, "test spec");
  CHECK(spec.ok()) << spec.status();
  return *spec;
}

constexpr char kFashionMnist[] = R"pb(
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 50 test_limit: 20 }
    }
  }
)pb";

TEST(OwnDatasetTest, ReadsTheSpecsDatasetWithItsOptionsFromTheClientsFolder) {
  const std::string own = TempDir("own");
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}) {
    std::filesystem::create_symlink(absl::StrCat("/usr/share/datasets/fashion-mnist/", name),
                                    absl::StrCat(own, "/", name));
  }
  absl::StatusOr<std::unique_ptr<Dataset>> dataset = OwnDataset(Spec(kFashionMnist), own);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ASSERT_TRUE((*dataset)->CheckAvailable().ok());
  absl::StatusOr<DatasetSplits> splits = (*dataset)->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(splits->train.size(), 50);  // the spec's train_limit
  EXPECT_EQ(splits->test.size(), 20);

  const std::string empty = TempDir("empty");
  absl::StatusOr<std::unique_ptr<Dataset>> missing = OwnDataset(Spec(kFashionMnist), empty);
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_THAT((*missing)->CheckAvailable().message(),
              HasSubstr(absl::StrCat(empty, "/train-images-idx3-ubyte")));
}

TEST(OwnDatasetTest, ADatasetThatReadsNoFolderIsRefused) {
  absl::StatusOr<std::unique_ptr<Dataset>> dataset =
      OwnDataset(Spec(R"pb(dataset { name: "synthetic_leaf" })pb"), "/tmp");
  EXPECT_EQ(dataset.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dataset.status().message(),
              HasSubstr("dataset \"synthetic_leaf\" reads no folder of files"));
}

TEST(LoadDeployedRunTest, RefusesSecureAggregationWithTheReason) {
  const std::string path = absl::StrCat(TempDir("secure"), "/spec.textproto");
  std::ofstream(path) << kFashionMnist;
  absl::StatusOr<DeployedRun> run = LoadDeployedRun(path, "server { secure_aggregation { } }");
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(),
              HasSubstr("server.secure_aggregation cannot be deployed: the masks are added by"));
}

TEST(LoadDeployedRunTest, RefusesNoiseTheServerCouldRecompute) {
  const std::string path = absl::StrCat(TempDir("reproducible"), "/spec.textproto");
  std::ofstream(path) << kFashionMnist << R"pb(
    name: "dp" seed: 1 device: CPU
    partition { name: "iid" num_clients: 4 }
    model { name: "mlp" options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [8] } } }
    client { steps: 1 batch_size: 4 optimizer { kind: SGD lr: 0.1 } }
    server { rounds: 1 clients_per_round: 2 }
    simulation { workers: 1 threads_per_worker: 1 }
  )pb";
  auto dp = [](const std::string& more) {
    return absl::StrCat(
        "aggregator { name: \"dp_fedavg\" options { "
        "[type.googleapis.com/fedkit.aggregators.DpFedAvgOptions] { clip_norm: 1 ",
        more, " } } }");
  };
  absl::StatusOr<DeployedRun> secure = LoadDeployedRun(path, dp(""));
  EXPECT_TRUE(secure.ok()) << secure.status();
  absl::StatusOr<DeployedRun> run = LoadDeployedRun(path, dp("reproducible_noise: true"));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.status().message(),
              HasSubstr("aggregator \"dp_fedavg\" draws its privacy noise from the spec's seed "
                        "(options.reproducible_noise), which cannot be deployed"));
}

TEST(ReadResumePointTest, NamesTheMissingCheckpointAndRefusesAsynchronousRuns) {
  const std::string dir = TempDir("no_checkpoint");
  absl::StatusOr<Checkpoint> missing = ReadResumePoint(dir, Spec(kFashionMnist), at::kCPU);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/checkpoint.fkc"));

  absl::StatusOr<Checkpoint> async = ReadResumePoint(
      dir, Spec(absl::StrCat(kFashionMnist, "server { async { concurrency: 2 } }")), at::kCPU);
  EXPECT_EQ(async.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(async.status().message(), HasSubstr("cannot resume"));
}

}  // namespace
}  // namespace fl::deploy
