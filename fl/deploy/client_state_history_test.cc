#include "fl/deploy/client_state_history.h"

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::deploy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

// Commits `value` as client `id`'s state of hook "h", as an accepted round does.
void Commit(ClientStateStore& store, int64_t id, float value) {
  store.Stage(id, {{"h", {{"c", at::full({2}, value)}}}});
  store.Commit(id);
}

float Held(const ClientStateStore& store, int64_t id) {
  const TensorMap& state = store.Committed(id, "h");
  return state.empty() ? -1.0f : state.at("c")[0].item<float>();
}

std::unique_ptr<ClientStateHistory> Open(const std::string& dir, ClientStateStore& store,
                                         const std::string& digest = "d1", int64_t id = 3) {
  auto history = ClientStateHistory::Open(dir, id, digest, at::kCPU, &store);
  EXPECT_TRUE(history.ok()) << history.status();
  return history.ok() ? *std::move(history) : nullptr;
}

TEST(ClientStateHistoryTest, GoesBackToTheStateOfTheRoundTheServerResumedAfter) {
  const std::string dir = FreshDir("rewind");
  ClientStateStore store;
  auto history = Open(dir, store);
  for (int round = 1; round <= 4; ++round) {
    ASSERT_EQ(*history->Rewind(round - 1), round == 1 ? 0 : round - 1);
    Commit(store, 3, 10.0f * round);
    ASSERT_TRUE(history->Record(round).ok());
  }
  EXPECT_THAT(history->rounds(), ElementsAre(1, 2, 3, 4));
  // The server resumes after round 2: round 3's task comes again.
  ASSERT_EQ(*history->Rewind(2), 2);
  EXPECT_EQ(Held(store, 3), 20.0f);
  EXPECT_THAT(history->rounds(), ElementsAre(1, 2));
  EXPECT_FALSE(std::filesystem::exists(dir + "/after_round_3.state"));
  // Back to the very start: no state at all.
  ASSERT_EQ(*history->Rewind(0), 0);
  EXPECT_EQ(Held(store, 3), -1.0f);
  EXPECT_TRUE(history->rounds().empty());
}

TEST(ClientStateHistoryTest, ARestartedClientContinuesFromItsNewestState) {
  const std::string dir = FreshDir("restart");
  {
    ClientStateStore store;
    auto history = Open(dir, store);
    Commit(store, 3, 1.0f);
    ASSERT_TRUE(history->Record(1).ok());
    Commit(store, 3, 5.0f);
    ASSERT_TRUE(history->Record(5).ok());
  }
  ClientStateStore store;
  auto history = Open(dir, store);
  EXPECT_THAT(history->rounds(), ElementsAre(1, 5));
  EXPECT_EQ(Held(store, 3), -1.0f);
  // Its next task is round 8's (it was not sampled in 6 and 7): the newest state.
  ASSERT_EQ(*history->Rewind(7), 5);
  EXPECT_EQ(Held(store, 3), 5.0f);
  // An asynchronous run's tasks ask for the newest state too.
  ASSERT_EQ(*history->Rewind(INT_MAX), 5);
}

TEST(ClientStateHistoryTest, KeepsOnlyWhatTheServersCheckpointCanNeed) {
  const std::string dir = FreshDir("forget");
  ClientStateStore store;
  auto history = Open(dir, store);
  for (int round : {1, 3, 4, 6}) {
    Commit(store, 3, round);
    ASSERT_TRUE(history->Record(round).ok());
  }
  ASSERT_TRUE(history->Forget(0).ok());
  EXPECT_THAT(history->rounds(), ElementsAre(1, 3, 4, 6));
  // A checkpoint after round 5 resumes with round 4's state.
  ASSERT_TRUE(history->Forget(5).ok());
  EXPECT_THAT(history->rounds(), ElementsAre(4, 6));
  EXPECT_FALSE(std::filesystem::exists(dir + "/after_round_3.state"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/after_round_4.state"));
}

TEST(ClientStateHistoryTest, AClientWithoutStateRecordsNothing) {
  const std::string dir = FreshDir("stateless");
  ClientStateStore store;
  auto history = Open(dir, store);
  Commit(store, 2, 1.0f);  // another client's: not this one's to keep
  ASSERT_TRUE(history->Record(1).ok());
  EXPECT_TRUE(history->rounds().empty());
}

TEST(ClientStateHistoryTest, RefusesAnotherRunsOrClientsFolder) {
  const std::string dir = FreshDir("owned");
  ClientStateStore store;
  Open(dir, store, "d1", 3);
  auto other_run = ClientStateHistory::Open(dir, 3, "d2", at::kCPU, &store);
  EXPECT_EQ(other_run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_run.status().message(),
              HasSubstr("belongs to another run or client (its run file says \"fedkit client hook "
                        "state: spec digest d1, client 3\"; this is \"fedkit client hook state: "
                        "spec digest d2, client 3\")"));
  auto other_client = ClientStateHistory::Open(dir, 4, "d1", at::kCPU, &store);
  EXPECT_EQ(other_client.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ClientStateHistoryTest, ACorruptStateIsAnErrorNamingItsFile) {
  const std::string dir = FreshDir("corrupt");
  ClientStateStore store;
  auto history = Open(dir, store);
  Commit(store, 3, 1.0f);
  ASSERT_TRUE(history->Record(2).ok());
  std::ofstream(dir + "/after_round_2.state", std::ios::trunc) << "not a state";
  ClientStateStore fresh;
  auto reopened = Open(dir, fresh);
  absl::StatusOr<int> rewound = reopened->Rewind(2);
  ASSERT_FALSE(rewound.ok());
  EXPECT_THAT(rewound.status().message(), HasSubstr(dir + "/after_round_2.state"));
}

}  // namespace
}  // namespace fl::deploy
