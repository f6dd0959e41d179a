#include "tools/sweep/progress.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace sweep {
namespace {

TEST(ProgressTest, FormatsEta) {
  EXPECT_EQ(FormatEta(45), "45s");
  EXPECT_EQ(FormatEta(14 * 60), "14m");
  EXPECT_EQ(FormatEta(14 * 60 + 1), "15m");
  EXPECT_EQ(FormatEta(2 * 3600 + 5 * 60), "2h05m");
}

TEST(ProgressTest, CountsAndEtaFromTheRunsFinishedSoFar) {
  std::FILE* sink = std::tmpfile();
  // 36 runs, 10 finished before, 2 at a time.
  Progress progress(36, 10, 2, sink);
  EXPECT_EQ(progress.Line(), "[done 10/36, 0 running, 0 failed]");
  progress.Started();
  progress.Started();
  progress.Started();
  progress.Finished(true, 100);
  progress.Finished(false, 5);
  // 24 left (1 running, 23 waiting) x 100 s / 2 jobs = 1200 s.
  EXPECT_EQ(progress.Line(), "[done 11/36, 1 running, 1 failed] ETA 20m");
  std::fclose(sink);
}

}  // namespace
}  // namespace sweep
