#include "fl/system_model.h"

#include <cmath>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(SystemModelTest, EveryoneCompletesByDefault) {
  const SystemModel model(fedkit::SystemSpec(), 1, 10);
  for (int64_t k = 0; k < 50; ++k) EXPECT_EQ(model.CompletedSteps(k, 3, 25), 25);
}

TEST(SystemModelTest, StragglersCompleteAUniformShareAtTheirRate) {
  fedkit::SystemSpec spec;
  spec.set_straggler_fraction(0.3);
  const SystemModel model(spec, 7, 100);
  int incomplete = 0;
  std::set<int64_t> seen;
  const int draws = 20000;
  for (int k = 0; k < draws; ++k) {
    const int64_t s = model.CompletedSteps(k % 200, 1 + k / 200, 4);
    ASSERT_GE(s, 1);
    ASSERT_LE(s, 4);
    seen.insert(s);
    incomplete += s < 4;
  }
  // A straggler completes 1, 2 or 3 of 4 steps with probability 3/4: 0.3 * 0.75.
  EXPECT_NEAR(incomplete / double(draws), 0.225, 0.01);
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2, 3, 4}));
}

TEST(SystemModelTest, DrawsDependOnlyOnSeedClientAndRound) {
  fedkit::SystemSpec spec;
  spec.set_straggler_fraction(0.5);
  spec.set_inactive_fraction(0.2);
  const SystemModel a(spec, 3, 20), b(spec, 3, 20), other(spec, 4, 20);
  int differ = 0;
  for (int64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(a.CompletedSteps(k, 5, 10), b.CompletedSteps(k, 5, 10));
    // Asking in another order changes nothing.
    EXPECT_EQ(a.CompletedSteps(99 - k, 6, 10), b.CompletedSteps(99 - k, 6, 10));
    differ += a.CompletedSteps(k, 5, 10) != other.CompletedSteps(k, 5, 10);
  }
  EXPECT_GT(differ, 20);
}

TEST(SystemModelTest, ASpeedProfileWithADeadlineCapsEachClientTheSameEveryRound) {
  fedkit::SystemSpec spec;
  spec.set_speed_sigma(1.0);
  spec.set_deadline(1.0);
  const SystemModel model(spec, 2, 10);
  int capped = 0, missed = 0;
  for (int64_t k = 0; k < 1000; ++k) {
    const int64_t s = model.CompletedSteps(k, 1, 10);
    EXPECT_EQ(model.CompletedSteps(k, 7, 10), s) << k;
    capped += s < 10;
    missed += s == 0;
  }
  // Half the clients (speed below the median 1) miss the deadline for some steps;
  // speed < 0.1 (about 1 %) completes none.
  EXPECT_NEAR(capped / 1000.0, 0.5, 0.05);
  EXPECT_NEAR(missed / 1000.0, 0.011, 0.01);
}

TEST(SystemModelTest, LateJoinersAndEarlyLeaversAreAbsentOutsideTheirWindow) {
  fedkit::SystemSpec spec;
  spec.set_late_join_fraction(1.0);
  const SystemModel late(spec, 5, 10);
  for (int64_t k = 0; k < 20; ++k) {
    EXPECT_EQ(late.CompletedSteps(k, 1, 3), 0) << k;   // nobody joins before round 2
    EXPECT_EQ(late.CompletedSteps(k, 10, 3), 3) << k;  // everybody is there by round 10
  }
  spec.Clear();
  spec.set_early_leave_fraction(1.0);
  const SystemModel early(spec, 5, 10);
  for (int64_t k = 0; k < 20; ++k) {
    EXPECT_EQ(early.CompletedSteps(k, 1, 3), 3) << k;
    EXPECT_EQ(early.CompletedSteps(k, 10, 3), 0) << k;
  }
}

TEST(SystemModelTest, ChecksItsFieldsWithTheirPaths) {
  fedkit::SystemSpec spec;
  spec.set_inactive_fraction(1.0);
  spec.set_deadline(-1);
  spec.set_speed_sigma(0.5);
  EXPECT_EQ(SystemModel::Check(spec).message(),
            "client.system.inactive_fraction: must be in [0, 1), got 1\n"
            "client.system.deadline: must be >= 0, got -1");
  spec.Clear();
  spec.set_deadline(0.5);
  EXPECT_THAT(std::string(SystemModel::Check(spec).message()),
              ::testing::HasSubstr("client.system.deadline: needs speed_sigma"));
}

TEST(SystemModelTest, WithoutADeadlineEveryClientCompletesAtItsOwnSpeed) {
  fedkit::SystemSpec spec;
  spec.set_speed_sigma(1.0);
  const SystemModel model(spec, 2, 10);
  for (int64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(model.CompletedSteps(k, 1, 10), 10) << k;
    EXPECT_DOUBLE_EQ(model.TaskSeconds(k, 1, 10, 0, 0), 10.0 / model.Speed(k)) << k;
  }
}

TEST(SystemModelTest, ATaskTakesItsTransfersAndItsStepsAtTheClientsSpeed) {
  fedkit::SystemSpec spec;
  spec.set_step_seconds(0.5);
  spec.set_download_bytes_per_second(1000);
  spec.set_upload_bytes_per_second(500);
  const SystemModel model(spec, 1, 10);
  // 2000 B down at 1000 B/s, 10 steps of 0.5 s, 1000 B up at 500 B/s.
  EXPECT_DOUBLE_EQ(model.TaskSeconds(3, 1, 10, 2000, 1000), 2.0 + 5.0 + 2.0);
  // Without bandwidths the transfers take no time; without step_seconds a step is 1 s.
  const SystemModel defaults(fedkit::SystemSpec(), 1, 10);
  EXPECT_DOUBLE_EQ(defaults.TaskSeconds(3, 1, 10, 2000, 1000), 10.0);
}

TEST(SystemModelTest, ASlowClientIsCutAtTheDeadlineAndTakesAtMostIt) {
  fedkit::SystemSpec spec;
  spec.set_speed_sigma(1.0);
  spec.set_deadline(0.8);
  spec.set_step_seconds(2.0);
  const SystemModel model(spec, 4, 10);
  int cut = 0;
  for (int64_t k = 0; k < 200; ++k) {
    const double speed = model.Speed(k);
    const int64_t steps = model.CompletedSteps(k, 1, 20);
    EXPECT_DOUBLE_EQ(model.TaskSeconds(k, 1, 20, 0, 0), steps * 2.0 / speed) << k;
    // The deadline, 0.8 of a speed-1 client's time for all 20 steps: 32 s.
    EXPECT_LE(model.TaskSeconds(k, 1, 20, 0, 0), 32.0 + 1e-9) << k;
    cut += steps < 20;
  }
  EXPECT_GT(cut, 50);
}

TEST(SystemModelTest, BandwidthsShareOneLogNormalFactorPerClient) {
  fedkit::SystemSpec spec;
  spec.set_download_bytes_per_second(4e6);
  spec.set_upload_bytes_per_second(1e6);
  spec.set_bandwidth_sigma(1.0);
  const SystemModel model(spec, 9, 10), again(spec, 9, 10);
  int below = 0;
  for (int64_t k = 0; k < 2000; ++k) {
    EXPECT_DOUBLE_EQ(model.DownloadBandwidth(k), 4.0 * model.UploadBandwidth(k));
    EXPECT_EQ(model.UploadBandwidth(k), again.UploadBandwidth(k));
    below += model.UploadBandwidth(k) < 1e6;
  }
  EXPECT_NEAR(below / 2000.0, 0.5, 0.04);  // median 1e6
  // The bandwidth draws leave the speeds as they were.
  spec.set_speed_sigma(0.5);
  spec.set_deadline(1.0);
  fedkit::SystemSpec no_bandwidth = spec;
  no_bandwidth.clear_bandwidth_sigma();
  const SystemModel with(spec, 9, 10), without(no_bandwidth, 9, 10);
  for (int64_t k = 0; k < 50; ++k) EXPECT_EQ(with.Speed(k), without.Speed(k));
}

TEST(SystemModelTest, TheClocksFieldsAreChecked) {
  fedkit::SystemSpec spec;
  spec.set_step_seconds(0);
  spec.set_upload_bytes_per_second(-1);
  spec.set_bandwidth_sigma(-0.5);
  EXPECT_EQ(SystemModel::Check(spec).message(),
            "client.system.bandwidth_sigma: must be >= 0, got -0.5\n"
            "client.system.step_seconds: must be > 0 and finite, got 0\n"
            "client.system.upload_bytes_per_second: must be > 0 and finite, got -1");
}

// A trace's cells replace the draws for their device; empty cells keep them, and
// clients cycle over the devices.
TEST(SystemModelTest, ATraceReplacesTheDrawsItGives) {
  fedkit::SystemSpec spec;
  spec.set_speed_sigma(1.0);
  spec.set_download_bytes_per_second(4e6);
  spec.set_upload_bytes_per_second(1e6);
  spec.set_bandwidth_sigma(0.5);
  spec.set_deadline(0.25);
  absl::StatusOr<ClientTrace> trace = ClientTrace::Parse(
      "client,speed,download_bytes_per_second,available\n0,2,100,5-9\n1,,,\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  const SystemModel drawn(spec, 3, 10);
  const SystemModel traced(spec, 3, 10, std::make_shared<const ClientTrace>(*trace));
  EXPECT_EQ(traced.Speed(0), 2.0);
  EXPECT_EQ(traced.Speed(4), 2.0);  // device 0 again
  EXPECT_EQ(traced.Speed(1), drawn.Speed(1));
  EXPECT_EQ(traced.Speed(3), drawn.Speed(3));
  EXPECT_EQ(traced.DownloadBandwidth(0), 100.0);
  EXPECT_EQ(traced.UploadBandwidth(0), drawn.UploadBandwidth(0));
  EXPECT_EQ(traced.DownloadBandwidth(1), drawn.DownloadBandwidth(1));
  // The deadline cuts by the trace's speed: floor(20 min(1, 2 x 0.25)) = 10 steps,
  // 10 x 1 s / 2, 300 B down at 100 B/s, 1000 B up at the drawn upload bandwidth.
  EXPECT_EQ(traced.CompletedSteps(0, 1, 20), 10);
  EXPECT_DOUBLE_EQ(traced.TaskSeconds(0, 1, 20, 300, 1000),
                   3.0 + 5.0 + 1000 / drawn.UploadBandwidth(0));
  EXPECT_TRUE(traced.has_availability());
  EXPECT_FALSE(drawn.has_availability());
  EXPECT_EQ(traced.NextWindow(0, 6).end, 9.0);
  EXPECT_EQ(traced.NextWindow(1, 6).start, 0.0);  // always online
}

TEST(SystemModelTest, ADeadlineTakesATraceInsteadOfSpeedSigma) {
  fedkit::SystemSpec spec;
  spec.set_deadline(0.5);
  spec.set_trace_path("t.csv");
  EXPECT_TRUE(SystemModel::Check(spec).ok());
}

}  // namespace
}  // namespace fl
