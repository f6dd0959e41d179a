#include "fl/thread_budget.h"

#include <thread>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

ThreadBudgetRequest Request(int cores, int64_t clients_per_round, bool convolutional = false) {
  ThreadBudgetRequest request;
  request.cores = cores;
  request.clients_per_round = clients_per_round;
  request.model_parameters = 200'000;
  request.convolutional = convolutional;
  return request;
}

TEST(ChooseThreadBudgetTest, OneSingleThreadedWorkerPerCoreWhenClientsOutnumberCores) {
  for (bool convolutional : {false, true}) {
    absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(Request(8, 10, convolutional));
    ASSERT_TRUE(budget.ok()) << budget.status();
    EXPECT_EQ(budget->workers, 8);
    EXPECT_EQ(budget->threads_per_worker, 1);
    EXPECT_EQ(budget->worker.intra_op, 1);
    EXPECT_EQ(budget->worker.blas, 1);
    EXPECT_THAT(budget->warnings, IsEmpty());
  }
}

TEST(ChooseThreadBudgetTest, ConvolutionalModelsGiveTheServerTheIdleCoresInLibTorchsPool) {
  absl::StatusOr<ThreadBudget> conv = ChooseThreadBudget(Request(8, 10, true));
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->server.intra_op, 8);
  EXPECT_EQ(conv->server.blas, 1);
  absl::StatusOr<ThreadBudget> mlp = ChooseThreadBudget(Request(8, 10, false));
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->server.intra_op, 1);
  EXPECT_EQ(mlp->server.blas, 1);
}

TEST(ChooseThreadBudgetTest, LeftOverCoresBecomeThreadsInTheModelsPool) {
  absl::StatusOr<ThreadBudget> mlp = ChooseThreadBudget(Request(8, 2, false));
  ASSERT_TRUE(mlp.ok());
  EXPECT_EQ(mlp->workers, 2);  // no more than the clients per round
  EXPECT_EQ(mlp->threads_per_worker, 4);
  EXPECT_EQ(mlp->worker.intra_op, 1);
  EXPECT_EQ(mlp->worker.blas, 4);
  EXPECT_THAT(mlp->reason, HasSubstr("OpenBLAS"));
  absl::StatusOr<ThreadBudget> conv = ChooseThreadBudget(Request(8, 2, true));
  ASSERT_TRUE(conv.ok());
  EXPECT_EQ(conv->worker.intra_op, 4);
  EXPECT_EQ(conv->worker.blas, 1);
}

TEST(ChooseThreadBudgetTest, MemoryLimitsTheReplicas) {
  ThreadBudgetRequest request = Request(8, 10);
  request.model_parameters = 100'000'000;
  // 32 bytes a parameter and worker: 3.2 GB each, so three fit in 10 GB.
  request.memory_bytes = 10'000'000'000;
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->workers, 3);
  EXPECT_EQ(budget->threads_per_worker, 2);
  EXPECT_THAT(budget->reason, HasSubstr("memory"));
}

TEST(ChooseThreadBudgetTest, SpecValuesWinOverTheEnvironmentWithAWarning) {
  ThreadBudgetRequest request = Request(8, 10);
  request.workers = 3;
  request.threads_per_worker = 2;
  request.omp_threads_env = "1";
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->workers, 3);
  EXPECT_EQ(budget->worker.intra_op, 1);
  EXPECT_EQ(budget->worker.blas, 2);
  ASSERT_EQ(budget->warnings.size(), 1u);
  EXPECT_THAT(budget->warnings[0], HasSubstr("overrides OMP_NUM_THREADS=1"));
}

TEST(ChooseThreadBudgetTest, WorkersAloneGetTheCoresLeftAsThreads) {
  ThreadBudgetRequest request = Request(8, 10);
  request.workers = 2;
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->threads_per_worker, 4);
  EXPECT_EQ(budget->worker.blas, 4);
}

TEST(ChooseThreadBudgetTest, EnvironmentVariablesAreKeptAndReported) {
  ThreadBudgetRequest request = Request(4, 10, true);
  request.omp_threads_env = "1";
  request.openblas_threads_env = "1";
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->workers, 4);
  EXPECT_EQ(budget->worker.intra_op, 1);
  EXPECT_EQ(budget->worker.blas, 1);
  // The user sized the pools: the server keeps that size too.
  EXPECT_EQ(budget->server.intra_op, 1);
  EXPECT_THAT(budget->reason,
              HasSubstr("OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 from the environment"));
  EXPECT_THAT(budget->warnings, IsEmpty());
}

TEST(ChooseThreadBudgetTest, OneVariableStandsForBothPoolsAndBothAboveOneIsWarned) {
  ThreadBudgetRequest request = Request(8, 10);
  request.omp_threads_env = "2";
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->worker.intra_op, 2);
  EXPECT_EQ(budget->worker.blas, 2);
  EXPECT_EQ(budget->workers, 4);
  ASSERT_EQ(budget->warnings.size(), 1u);
  EXPECT_THAT(budget->warnings[0], HasSubstr("both have more than one thread"));
}

TEST(ChooseThreadBudgetTest, OversubscriptionIsWarned) {
  ThreadBudgetRequest request = Request(2, 10);
  request.workers = 4;
  request.threads_per_worker = 2;
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(request);
  ASSERT_TRUE(budget.ok());
  ASSERT_EQ(budget->warnings.size(), 1u);
  EXPECT_THAT(budget->warnings[0], HasSubstr("8 threads on 2 cores: oversubscribed"));
}

TEST(ChooseThreadBudgetTest, BadValuesNameTheFieldOrVariable) {
  ThreadBudgetRequest request = Request(2, 10);
  request.workers = 0;
  EXPECT_THAT(ChooseThreadBudget(request).status().message(),
              HasSubstr("simulation.workers: must be >= 1, got 0"));
  request = Request(2, 10);
  request.threads_per_worker = -1;
  EXPECT_THAT(ChooseThreadBudget(request).status().message(),
              HasSubstr("simulation.threads_per_worker: must be >= 1, got -1"));
  request = Request(2, 10);
  request.openblas_threads_env = "four";
  EXPECT_THAT(ChooseThreadBudget(request).status().message(),
              HasSubstr("OPENBLAS_NUM_THREADS=\"four\": expected a positive integer"));
}

TEST(ChooseThreadBudgetTest, JsonCarriesEveryNumberAndTheReason) {
  absl::StatusOr<ThreadBudget> budget = ChooseThreadBudget(Request(8, 2, true));
  ASSERT_TRUE(budget.ok());
  const std::string json = budget->ToJson();
  EXPECT_THAT(json, HasSubstr("\"cores\": 8, \"workers\": 2, \"threads_per_worker\": 4, "
                              "\"worker_intra_op_threads\": 4, \"worker_blas_threads\": 1, "
                              "\"server_intra_op_threads\": 8, \"server_blas_threads\": 1"));
  EXPECT_THAT(json, HasSubstr("\"reason\": \"2 worker(s), one per client"));
}

TEST(UsableCoresTest, AtLeastOneAndNoMoreThanTheMachineHas) {
  EXPECT_GE(UsableCores(), 1);
  EXPECT_LE(UsableCores(), static_cast<int>(std::thread::hardware_concurrency()));
}

TEST(ApplyThreadsTest, EachPoolReportsWhatWasSet) {
  for (const PoolThreads threads : {PoolThreads{2, 1}, PoolThreads{1, 3}, PoolThreads{1, 1}}) {
    const AppliedThreads applied = ApplyThreads(threads);
    EXPECT_EQ(applied.intra_op, threads.intra_op);
    EXPECT_EQ(at::get_num_threads(), threads.intra_op);
    if (at::hasMKL()) {
      // PyPI's LibTorch (--config=torch2) links MKL into libtorch_cpu, which runs on
      // the intra-op pool: there is no OpenBLAS pool to size.
      EXPECT_FALSE(applied.blas_controllable);
    } else {
      ASSERT_TRUE(applied.blas_controllable)
          << "OpenBLAS is not loaded: tools/setup.sh installs it as Debian LibTorch's BLAS";
      EXPECT_EQ(applied.blas, threads.blas);
    }
    EXPECT_EQ(applied.inter_op, 1);
  }
}

TEST(ApplyThreadsTest, ThreadsStartedAfterwardsUseTheIntraOpCount) {
  for (int threads : {2, 1}) {
    ApplyThreads(threads, 1);
    int seen = 0;
    std::thread worker([&seen] { seen = at::get_num_threads(); });
    worker.join();
    EXPECT_EQ(seen, threads);
  }
}

}  // namespace
}  // namespace fl
