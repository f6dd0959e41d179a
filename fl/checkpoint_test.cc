#include "fl/checkpoint.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/spec_loader.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

std::string TempPath(const std::string& name) {
  return absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

ModelState SmallModel(double offset) {
  return ModelState({{"fc.weight", at::arange(6, at::kFloat).reshape({2, 3}) + offset, false},
                     {"fc.bias", at::full({2}, offset, at::kFloat), false},
                     {"bn.num_batches_tracked", at::full({}, 7, at::kLong), true}});
}

Checkpoint Sample() {
  Checkpoint checkpoint;
  checkpoint.spec = "name: \"sample\"\n";
  ServerProgress& server = checkpoint.server;
  server.rounds_done = 3;
  server.global = SmallModel(0.5);
  server.clients_copy = SmallModel(-1.0);
  server.download_bytes = 1234;
  server.pending.clients = 2;
  server.pending.bytes_up = 1LL << 40;
  server.pending.local_steps = 99;
  server.pending.virtual_seconds = 0.1 + 0.7;  // exactly, not to a few digits
  server.seconds = 12.5;
  server.best_model = SmallModel(2.0);
  server.best_round = 2;
  server.best_accuracy = 0.625;
  checkpoint.aggregator_state["m/fc.weight"] = at::randn({2, 3}, at::kDouble);
  checkpoint.aggregator_state["empty"] = at::zeros({0, 4});
  checkpoint.client_states[{4, "scaffold"}]["c/fc.bias"] = at::tensor({1.5f, -2.5f});
  checkpoint.client_states[{17, "@optimizer"}]["flag"] = at::tensor({1, 0}).to(at::kBool);
  MetricsRow row;
  row.round = 3;
  row.test_accuracy = 0.1 + 0.2;  // not representable in few digits: stored exactly
  row.test_loss = 2.25;
  row.diagnostics = {{"eta_g", 1.0 / 3.0}};
  row.client_accuracy = {{"client_acc_mean", 2.0 / 3.0}, {"client_acc_worst", 0.1}};
  checkpoint.rows = {row};
  checkpoint.diagnostics = {{1, {{"eta_g", 2.0}}}, {3, {{"eta_g", 1.0 / 3.0}}}};
  return checkpoint;
}

void ExpectSameState(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.entries()[i].name, b.entries()[i].name);
    EXPECT_EQ(a.entries()[i].is_buffer, b.entries()[i].is_buffer);
    EXPECT_EQ(a.tensor(i).scalar_type(), b.tensor(i).scalar_type());
    EXPECT_TRUE(a.tensor(i).equal(b.tensor(i))) << a.entries()[i].name;
  }
}

TEST(CheckpointTest, RoundTripsEverythingExactly) {
  const Checkpoint original = Sample();
  const std::string path = TempPath("round_trip.fkc");
  ASSERT_TRUE(WriteCheckpoint(path, original).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path, at::kCPU);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->spec, original.spec);
  const ServerProgress& a = original.server;
  const ServerProgress& b = read->server;
  EXPECT_EQ(b.rounds_done, 3);
  ExpectSameState(a.global, b.global);
  ASSERT_TRUE(b.clients_copy.has_value());
  ExpectSameState(*a.clients_copy, *b.clients_copy);
  ASSERT_TRUE(b.best_model.has_value());
  ExpectSameState(*a.best_model, *b.best_model);
  EXPECT_EQ(b.download_bytes, 1234);
  EXPECT_EQ(b.pending.clients, 2);
  EXPECT_EQ(b.pending.bytes_up, 1LL << 40);
  EXPECT_EQ(b.pending.local_steps, 99);
  EXPECT_EQ(b.pending.virtual_seconds, 0.1 + 0.7);
  EXPECT_EQ(b.seconds, 12.5);
  EXPECT_EQ(b.best_round, 2);
  EXPECT_EQ(b.best_accuracy, 0.625);
  ASSERT_EQ(read->aggregator_state.size(), 2u);
  EXPECT_TRUE(read->aggregator_state.at("m/fc.weight").equal(original.aggregator_state.at("m/fc.weight")));
  EXPECT_EQ(read->aggregator_state.at("empty").sizes(), (std::vector<int64_t>{0, 4}));
  ASSERT_EQ(read->client_states.size(), 2u);
  EXPECT_TRUE(read->client_states.at({4, "scaffold"}).at("c/fc.bias").equal(at::tensor({1.5f, -2.5f})));
  EXPECT_TRUE(read->client_states.at({17, "@optimizer"}).at("flag").equal(at::tensor({1, 0}).to(at::kBool)));
  ASSERT_EQ(read->rows.size(), 1u);
  EXPECT_EQ(read->rows[0].test_accuracy, 0.1 + 0.2);
  EXPECT_EQ(read->rows[0].diagnostics, original.rows[0].diagnostics);
  EXPECT_EQ(read->rows[0].client_accuracy, original.rows[0].client_accuracy);
  ASSERT_EQ(read->diagnostics.size(), 2u);
  EXPECT_EQ(read->diagnostics[1].round, 3);
  EXPECT_EQ(read->diagnostics[1].values, original.diagnostics[1].values);
}

TEST(CheckpointTest, WithoutOptionalPartsReadsBackWithout) {
  Checkpoint original = Sample();
  original.server.clients_copy.reset();
  original.server.best_model.reset();
  const std::string path = TempPath("minimal.fkc");
  ASSERT_TRUE(WriteCheckpoint(path, original).ok());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path, at::kCPU);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->server.clients_copy.has_value());
  EXPECT_FALSE(read->server.best_model.has_value());
}

TEST(CheckpointTest, EveryTruncationIsRefused) {
  const std::string path = TempPath("whole.fkc");
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  const std::string bytes = ReadBytes(path);
  for (size_t size = 0; size < bytes.size(); ++size) {
    absl::StatusOr<Checkpoint> read = ParseCheckpoint(bytes.substr(0, size), "cut", at::kCPU);
    ASSERT_FALSE(read.ok()) << "cut to " << size << " of " << bytes.size() << " bytes";
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  }
}

TEST(CheckpointTest, AFlippedBitAnywhereIsRefused) {
  const std::string path = TempPath("flipped.fkc");
  ASSERT_TRUE(WriteCheckpoint(path, Sample()).ok());
  const std::string bytes = ReadBytes(path);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string damaged = bytes;
    damaged[i] ^= static_cast<char>(1 << (i % 8));
    absl::StatusOr<Checkpoint> read = ParseCheckpoint(damaged, "flipped", at::kCPU);
    ASSERT_FALSE(read.ok()) << "byte " << i;
    EXPECT_NE(read.status().message().find("flipped"), std::string::npos) << read.status();
  }
}

TEST(CheckpointTest, ErrorsNameTheFile) {
  absl::StatusOr<Checkpoint> missing = ReadCheckpoint(TempPath("no_such.fkc"), at::kCPU);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such.fkc"), std::string::npos);
  const std::string other = TempPath("not_a_checkpoint.fkc");
  std::ofstream(other) << "round,test_accuracy\n1,0.5\n";
  absl::StatusOr<Checkpoint> wrong = ReadCheckpoint(other, at::kCPU);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(wrong.status().message().find("not_a_checkpoint.fkc"), std::string::npos);
  absl::Status unwritable = WriteCheckpoint(TempPath("no_such_dir/c.fkc"), Sample());
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("no_such_dir/c.fkc"), std::string::npos) << unwritable;
}

TEST(CheckpointTest, ANewCheckpointReplacesTheOldOnlyWhenComplete) {
  const std::string path = TempPath("replaced.fkc");
  Checkpoint first = Sample();
  ASSERT_TRUE(WriteCheckpoint(path, first).ok());
  Checkpoint second = Sample();
  second.server.rounds_done = 4;
  // A stale temporary file from a killed writer does not matter.
  std::ofstream(path + ".tmp") << "half a checkpoint";
  ASSERT_TRUE(WriteCheckpoint(path, second).ok());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path, at::kCPU);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->server.rounds_done, 4);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

fedkit::ExperimentSpec Spec(const std::string& text) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = ParseSpec(text, "test");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

TEST(CheckResumableTest, RoundsOutputAndSimulationMayChange) {
  const auto base = Spec(R"pb(name: "a" server { rounds: 10 } client { optimizer { lr: 0.1 } })pb");
  EXPECT_TRUE(CheckResumable(base, base).ok());
  const auto more = Spec(
      R"pb(name: "a" server { rounds: 20 } client { optimizer { lr: 0.1 } }
           output { dir: "elsewhere" } simulation { workers: 4 })pb");
  EXPECT_TRUE(CheckResumable(base, more).ok());
}

TEST(CheckResumableTest, AnyOtherDifferenceIsNamed) {
  const auto base = Spec(R"pb(name: "a" seed: 1 client { optimizer { lr: 0.1 } })pb");
  const auto other = Spec(R"pb(name: "a" seed: 2 client { optimizer { lr: 0.2 } })pb");
  absl::Status status = CheckResumable(base, other);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("seed"), std::string::npos) << status;
  EXPECT_NE(status.message().find("client.optimizer.lr"), std::string::npos) << status;
}

TEST(CheckResumableTest, RoundsAreFixedWhenJoinsAndLeavesSpanTheRun) {
  const auto base = Spec(R"pb(server { rounds: 10 } client { system { late_join_fraction: 0.2 } })pb");
  const auto more = Spec(R"pb(server { rounds: 20 } client { system { late_join_fraction: 0.2 } })pb");
  absl::Status status = CheckResumable(base, more);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("server.rounds"), std::string::npos) << status;
}

}  // namespace
}  // namespace fl
