// The asynchronous loop (ServerConfig::async) on schedules worked by hand, and a
// real run's independence from the number of workers.

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/checkpoint.h"
#include "fl/experiment.h"
#include "fl/server.h"
#include "fl/spec_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

// TheOnlineIndexDrawsAsAScanOfEveryClient: per client, the rounds (version + 1)
// it trained for, from the implementation that scanned every client.
constexpr char kScannedSchedule[] =
    "0:1,8,16,25,25 2:12,28,30 4:12 6:17 8:6,11 10:1,7,16,23 13:20,21,22 14:21 "
    "15:1,8,9,16,17,25,27 16:2 17:12,20,27 19:6,21,23 21:3,26 25:1,8,16,25 26:2,5 "
    "28:14,21 30:1,9,16,25 32:4 34:6,13,21 36:9,26 39:1,7,14,15,16,23 ";

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::Pointwise;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The model is float32: deltas scaled by s(tau) carry float rounding.
auto Near(std::vector<double> expected) { return Pointwise(DoubleNear(1e-5), expected); }

// Pulls the one-weight model to its target: delta = target - w.
class PullingClient : public Client {
 public:
  PullingClient(int64_t id, float target) : id_(id), target_(target) {}
  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return 1; }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan&,
                                     int round) override {
    rounds.push_back(round);
    ClientUpdate update;
    update.client_id = id_;
    update.delta = ModelState({{"w", at::full({1}, target_) - global.tensor(0), false}});
    update.num_examples = 1;
    update.local_steps = update.planned_steps = 1;
    update.bytes_sent = 4;
    if (non_finite) update.delta.mutable_tensor(0).fill_(NAN);
    return update;
  }
  void Acknowledge(bool accepted) override { verdicts.push_back(accepted); }
  std::vector<bool> verdicts;
  std::vector<int> rounds;  // as Train was asked
  bool non_finite = false;

 private:
  int64_t id_;
  float target_;
};

// The mean of the accepted deltas, added to the model: FedAvg through sums.
class MeanStep : public Aggregator {
 public:
  explicit MeanStep(bool sums_only = true) : sums_only_(sums_only) {}
  AggregatorProperties properties() const override {
    AggregatorProperties properties;
    properties.sums_only = sums_only_;
    return properties;
  }
  absl::Status Accumulate(ClientUpdate update, ServerContext&) override {
    sum_ += update.delta.tensor(0).item<double>();
    ++count_;
    accumulated.push_back(update.delta.tensor(0).item<double>());
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
    ModelState next = global.Clone();
    next.mutable_tensor(0) += sum_ / count_;
    sum_ = 0;
    count_ = 0;
    return next;
  }
  std::vector<double> accumulated;

 private:
  bool sums_only_;
  double sum_ = 0;
  int count_ = 0;
};

class AsyncLoopTest : public ::testing::Test {
 protected:
  // Clients 0, 1, 2 pull towards 10, 20, 40 and take 3, 5 and 4 virtual seconds.
  struct Run {
    absl::StatusOr<ModelState> model;
    std::vector<MetricsRow> rows;
    std::vector<double> accumulated;
    std::vector<std::vector<bool>> verdicts;
    std::vector<std::vector<int>> rounds;
  };
  Run RunAsync(const std::string& name, ServerConfig::Async async, int steps, int workers = 1,
               bool sums_only = true, std::vector<bool> non_finite = {false, false, false},
               std::function<OnlineWindow(int64_t, double)> next_window = nullptr) {
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<PullingClient*> raw;
    const float targets[] = {10, 20, 40};
    for (int k = 0; k < 3; ++k) {
      auto client = std::make_unique<PullingClient>(k, targets[k]);
      client->non_finite = non_finite[k];
      raw.push_back(client.get());
      clients.push_back(std::move(client));
    }
    MeanStep aggregator(sums_only);
    auto sink = MetricsSink::Open(absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name),
                                  fedkit::ExperimentSpec());
    EXPECT_TRUE(sink.ok());
    ServerConfig config{.rounds = steps, .workers = workers};
    config.async = async;
    config.task_seconds = [](int64_t client, int, int64_t) {
      const double seconds[] = {3.0, 5.0, 4.0};
      return seconds[client];
    };
    config.next_window = std::move(next_window);
    Server server(config, &aggregator, std::move(clients), ServerContext(),
                  [](const ModelState& state) -> absl::StatusOr<Evaluation> {
                    return Evaluation{state.tensor(0).item<double>(), 0.0, 1};
                  },
                  sink->get());
    Run run;
    run.model = server.Run(ModelState({{"w", at::zeros({1}), false}}));
    run.rows = (*sink)->rows();
    run.accumulated = aggregator.accumulated;
    for (PullingClient* client : raw) {
      run.verdicts.push_back(client->verdicts);
      run.rounds.push_back(client->rounds);
    }
    return run;
  }
  static double W(const Run& run) { return run.model->tensor(0).item<double>(); }
  static ServerConfig::Async Polynomial(int buffer_size) {
    ServerConfig::Async async{.concurrency = 3, .buffer_size = buffer_size};
    async.staleness = {Staleness::Kind::kPolynomial, 1.0};  // s = 1 / (1 + tau)
    return async;
  }
};

// Concurrency 3 of 3 clients: each arrival is replaced by itself. Arrivals at
// t = 3 (client 0), 4 (2), 5 (1), each from version 0; K = 1:
//   t=3  tau 0  delta 10 - 0 = 10, s = 1    -> w = 10
//   t=4  tau 1  delta 40 - 0 = 40, s = 1/2  -> w = 30
//   t=5  tau 2  delta 20 - 0 = 20, s = 1/3  -> w = 36.667
TEST_F(AsyncLoopTest, FedBuffOneUpdateAStepByHand) {
  const Run run = RunAsync("fedbuff1", Polynomial(1), 3);
  ASSERT_TRUE(run.model.ok()) << run.model.status();
  EXPECT_THAT(run.accumulated, Near({10.0, 20.0, 20.0 / 3}));
  EXPECT_NEAR(W(run), 10 + 20 + 20.0 / 3, 1e-5);
  ASSERT_EQ(run.rows.size(), 3u);
  EXPECT_DOUBLE_EQ(run.rows[0].virtual_seconds, 3.0);
  EXPECT_DOUBLE_EQ(run.rows[1].virtual_seconds, 4.0);
  EXPECT_DOUBLE_EQ(run.rows[2].virtual_seconds, 5.0);
  EXPECT_NEAR(run.rows[1].test_accuracy, 30.0, 1e-5);
  EXPECT_EQ(run.rows[2].clients, 1);
}

// K = 2. Client 0 arrives first (t = 3) and, every idle client having trained
// from version 0, trains from it again (arrives t = 6):
//   t=3  c0 tau 0  10        buffer [10]
//   t=4  c2 tau 0  40        buffer [10, 40]  -> w = 25
//   t=5  c1 tau 1  20 / 2    buffer [10]
//   t=6  c0 tau 1  10 / 2    buffer [10, 5]   -> w = 32.5
TEST_F(AsyncLoopTest, FedBuffTwoUpdatesAStepByHand) {
  const Run run = RunAsync("fedbuff2", Polynomial(2), 2);
  ASSERT_TRUE(run.model.ok()) << run.model.status();
  EXPECT_THAT(run.accumulated, Near({10.0, 40.0, 10.0, 5.0}));
  EXPECT_NEAR(W(run), 32.5, 1e-5);
  ASSERT_EQ(run.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(run.rows[0].virtual_seconds, 4.0);
  EXPECT_DOUBLE_EQ(run.rows[1].virtual_seconds, 6.0);
  EXPECT_EQ(run.rows[1].clients, 2);
  EXPECT_EQ(run.rows[1].bytes_up, 4 * 4);
}

// FedAsync, a = 0.5: w <- w + a s(tau) (w_client - w), w_client = 0 + delta.
//   t=3  w_client 10, s 1    -> 0 + 0.5 (10 - 0) = 5
//   t=4  w_client 40, s 1/2  -> 5 + 0.25 (40 - 5) = 13.75
//   t=5  w_client 20, s 1/3  -> 13.75 + (0.5 / 3) (20 - 13.75) = 14.7917
TEST_F(AsyncLoopTest, FedAsyncMixesTheClientsModelByHand) {
  ServerConfig::Async async = Polynomial(1);
  async.mixing_rate = 0.5;
  const Run run = RunAsync("fedasync", async, 3);
  ASSERT_TRUE(run.model.ok()) << run.model.status();
  EXPECT_NEAR(W(run), 13.75 + 0.5 / 3 * (20 - 13.75), 1e-5);
  EXPECT_NEAR(run.accumulated[1], 0.25 * 35, 1e-5);
}

// max_staleness 1, K = 1. Client 1's update (from version 0, arriving at t = 5
// after two steps) is dropped and counted:
//   t=3  c0 from v0  tau 0  10              -> w = 10; c0 again from v1 (t = 6)
//   t=4  c2 from v0  tau 1  40 / 2          -> w = 30; c2 again from v2 (t = 8)
//   t=5  c1 from v0  tau 2  stale, dropped;  c1 again from v2 (t = 10)
//   t=6  c0 from v1  tau 1  (10 - 10) / 2   -> w = 30
TEST_F(AsyncLoopTest, UpdatesStalerThanTheLimitAreDroppedAndCounted) {
  ServerConfig::Async async = Polynomial(1);
  async.staleness.max_staleness = 1;
  const Run run = RunAsync("stale", async, 3);
  ASSERT_TRUE(run.model.ok()) << run.model.status();
  EXPECT_THAT(run.accumulated, Near({10.0, 20.0, 0.0}));
  EXPECT_NEAR(W(run), 30.0, 1e-5);
  ASSERT_EQ(run.rows.size(), 3u);
  EXPECT_THAT(run.rows[2].rejected_by_reason, ElementsAre(Pair("stale", 1)));
  EXPECT_EQ(run.rows[1].rejected, 0);
  EXPECT_DOUBLE_EQ(run.rows[2].virtual_seconds, 6.0);
  // Clients hear every verdict.
  EXPECT_THAT(run.verdicts[1], ElementsAre(false));
  EXPECT_THAT(run.verdicts[0], ElementsAre(true, true));
}

TEST_F(AsyncLoopTest, ANonFiniteUpdateIsRejectedAsInARound) {
  const Run run = RunAsync("non_finite", Polynomial(1), 2, 1, true, {false, false, true});
  ASSERT_TRUE(run.model.ok()) << run.model.status();
  // Client 2 (t = 4) is rejected; client 1 (t = 5, tau 1) makes the second step.
  EXPECT_THAT(run.accumulated, Near({10.0, 10.0}));
  EXPECT_THAT(run.rows[1].rejected_by_reason, ElementsAre(Pair("non_finite", 1)));
}

// Online windows: c0 always, c1 in [0, 4) (its 5 s task cannot finish), c2 from
// t = 4.5; two in flight, K = 1, s = 1 / (1 + tau):
//   t=0    c0, c1 start from v0 (c2 offline)
//   t=3    c0 tau 0  10            -> w = 10; c0 starts from v1 (arrives 6)
//   t=4    c1 goes offline: dropped, untrained; nobody idle is online
//   t=4.5  c2 comes online, starts from v1 (arrives 8.5)
//   t=6    c0 tau 0  10 - 10 = 0   -> w = 10; c0 from v2 (arrives 9)
//   t=8.5  c2 tau 1  (40 - 10) / 2 -> w = 25; c2 from v3
//   t=9    c0 tau 1  (10 - 10) / 2 -> w = 25
TEST_F(AsyncLoopTest, OnlyOnlineClientsStartAndOneGoingOfflineDropsOut) {
  auto next_window = [](int64_t client, double at) {
    const OnlineWindow windows[] = {{0, kInf}, {0, 4}, {4.5, kInf}};
    const OnlineWindow window = windows[client];
    return at < window.end ? window : OnlineWindow{kInf, kInf};
  };
  ServerConfig::Async async = Polynomial(1);
  async.concurrency = 2;
  for (int workers : {1, 3}) {
    const Run run = RunAsync(absl::StrCat("online", workers), async, 4, workers, true,
                             {false, false, false}, next_window);
    ASSERT_TRUE(run.model.ok()) << run.model.status();
    EXPECT_THAT(run.accumulated, Near({10.0, 0.0, 15.0, 0.0}));
    EXPECT_NEAR(W(run), 25.0, 1e-5);
    std::vector<double> clock;
    std::vector<int> dropped;
    for (const MetricsRow& row : run.rows) {
      clock.push_back(row.virtual_seconds);
      dropped.push_back(row.dropped);
    }
    EXPECT_THAT(clock, ElementsAre(3.0, 6.0, 8.5, 9.0));
    EXPECT_THAT(dropped, ElementsAre(0, 1, 0, 0));
    EXPECT_THAT(run.rounds[0], ElementsAre(1, 2, 3));
    EXPECT_THAT(run.rounds[1], ElementsAre());  // went offline untrained
    // c2's second task (from v3) may have been trained ahead by a worker.
    ASSERT_GE(run.rounds[2].size(), 1u);
    EXPECT_EQ(run.rounds[2][0], 2);
    EXPECT_THAT(run.verdicts[1], ElementsAre(false));
  }
}

TEST_F(AsyncLoopTest, NoClientEverOnlineAgainFailsNamingTheTime) {
  ServerConfig::Async async = Polynomial(1);
  async.concurrency = 1;
  const Run run = RunAsync("never_online", async, 2, 1, true, {false, false, false},
                           [](int64_t client, double at) {
                             return client == 0 && at < 1 ? OnlineWindow{0, 1}
                                                          : OnlineWindow{kInf, kInf};
                           });
  EXPECT_EQ(run.model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(run.model.status().message(),
              HasSubstr("step 1: no client is in flight or online at or after virtual second 1"));
}

TEST_F(AsyncLoopTest, TheSameResultForAnyNumberOfWorkers) {
  const Run one = RunAsync("workers1", Polynomial(2), 6, 1);
  const Run three = RunAsync("workers3", Polynomial(2), 6, 3);
  ASSERT_TRUE(one.model.ok() && three.model.ok());
  EXPECT_EQ(one.accumulated, three.accumulated);
  EXPECT_TRUE(one.model->tensor(0).equal(three.model->tensor(0)));
}

// Five clients, two in flight, three updates a step: several arrivals share a
// version, and a client that arrives is not drawn again for the same model (its
// task would repeat), so no client trains twice as the same round.
// Which client starts from which version, with 40 clients online 10 s in every
// 20 s at five phases, 8 in flight, K = 2, 30 steps. The expected schedule is the
// one the first implementation gave, which scanned every client for the online
// idle ones at each start; the online index must draw exactly the same clients.
TEST(AsyncDispatchTest, TheOnlineIndexDrawsAsAScanOfEveryClient) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<PullingClient*> raw;
  for (int k = 0; k < 40; ++k) {
    clients.push_back(std::make_unique<PullingClient>(k, static_cast<float>(k)));
    raw.push_back(static_cast<PullingClient*>(clients.back().get()));
  }
  MeanStep aggregator;
  auto sink = MetricsSink::Open(absl::StrCat(std::getenv("TEST_TMPDIR"), "/online_index"),
                                fedkit::ExperimentSpec());
  ASSERT_TRUE(sink.ok());
  ServerConfig config{.rounds = 30, .seed = 5};
  config.async = ServerConfig::Async{.concurrency = 8, .buffer_size = 2};
  config.task_seconds = [](int64_t client, int, int64_t) { return 1.0 + (client * 7 % 13); };
  config.next_window = [](int64_t client, double at) {
    const double phase = 3.0 * static_cast<double>(client % 5);
    double start = phase + 20.0 * std::floor((at - phase) / 20.0);
    if (at >= start + 10.0) start += 20.0;
    return OnlineWindow{start, start + 10.0};
  };
  Server server(config, &aggregator, std::move(clients), ServerContext(),
                [](const ModelState&) -> absl::StatusOr<Evaluation> { return Evaluation{}; },
                sink->get());
  ASSERT_TRUE(server.Run(ModelState({{"w", at::zeros({1}), false}})).ok());
  std::string schedule;
  for (int k = 0; k < 40; ++k) {
    if (raw[k]->rounds.empty()) continue;
    absl::StrAppend(&schedule, k, ":", absl::StrJoin(raw[k]->rounds, ","), " ");
  }
  EXPECT_EQ(schedule, kScannedSchedule);
}

TEST(AsyncDispatchTest, NoClientTrainsTwiceFromTheSameVersion) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<PullingClient*> raw;
  for (int k = 0; k < 5; ++k) {
    clients.push_back(std::make_unique<PullingClient>(k, 10.0f * k));
    raw.push_back(static_cast<PullingClient*>(clients.back().get()));
  }
  MeanStep aggregator;
  auto sink = MetricsSink::Open(absl::StrCat(std::getenv("TEST_TMPDIR"), "/dispatch"),
                                fedkit::ExperimentSpec());
  ASSERT_TRUE(sink.ok());
  ServerConfig config{.rounds = 20, .seed = 11};
  config.async = ServerConfig::Async{.concurrency = 2, .buffer_size = 3};
  config.task_seconds = [](int64_t client, int, int64_t) { return 1.0 + 0.25 * client; };
  Server server(config, &aggregator, std::move(clients), ServerContext(),
                [](const ModelState&) -> absl::StatusOr<Evaluation> { return Evaluation{}; },
                sink->get());
  ASSERT_TRUE(server.Run(ModelState({{"w", at::zeros({1}), false}})).ok());
  int tasks = 0;
  for (PullingClient* client : raw) {
    std::set<int> distinct(client->rounds.begin(), client->rounds.end());
    EXPECT_EQ(distinct.size(), client->rounds.size()) << client->id();
    tasks += static_cast<int>(client->rounds.size());
  }
  EXPECT_GE(tasks, 60);  // 20 steps of 3
}

TEST_F(AsyncLoopTest, AnAggregatorThatNeedsAWholeCohortIsRefused) {
  const Run run = RunAsync("refused", Polynomial(1), 1, 1, /*sums_only=*/false);
  EXPECT_THAT(run.model.status().message(), HasSubstr("sums_only"));
}

// A real run (Fashion-MNIST slice, MLP, FedAvg) through the runner: the spec's
// async block, the clock from client.system, and the same bits for 1 and 3 workers.
constexpr char kSpec[] = R"pb(
  name: "async"
  seed: 5
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 3000 test_limit: 1000 }
    }
  }
  partition {
    name: "dirichlet"
    num_clients: 30
    options { [type.googleapis.com/fedkit.data.DirichletOptions] { alpha: 0.5 } }
  }
  model {
    name: "mlp"
    options { [type.googleapis.com/fedkit.models.MlpOptions] { hidden: [32] } }
  }
  client {
    epochs: 1
    batch_size: 32
    optimizer { kind: SGD lr: 0.05 }
    system {
      speed_sigma: 1.0
      step_seconds: 0.1
      download_bytes_per_second: 1e6
      upload_bytes_per_second: 2.5e5
    }
  }
  server {
    rounds: 8
    clients_per_round: 5
    async {
      concurrency: 8
      buffer_size: 3
      staleness { kind: POLYNOMIAL exponent: 0.5 }
    }
  }
  aggregator { name: "fedavg" }
  simulation { workers: 1 threads_per_worker: 1 }
)pb";

// `synchronous`: without server.async.
ExperimentResult RunSpec(const std::string& overrides, const std::string& dir,
                         bool synchronous = false) {
  auto spec = ParseSpec(kSpec, "kSpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ApplyOverride(overrides, *spec).ok()) << overrides;
  if (synchronous) spec->mutable_server()->clear_async();
  auto experiment = BuildExperiment(*spec);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  if (!experiment.ok()) return {};
  auto result = RunExperiment(*experiment, absl::StrCat(std::getenv("TEST_TMPDIR"), "/", dir));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ExperimentResult();
}

TEST(AsyncRunTest, BitIdenticalForOneAndThreeWorkers) {
  const ExperimentResult one = RunSpec("", "run1");
  const ExperimentResult three = RunSpec("simulation { workers: 3 }", "run3");
  ASSERT_EQ(one.rows.size(), 8u);
  ASSERT_EQ(three.rows.size(), 8u);
  for (size_t r = 0; r < one.rows.size(); ++r) {
    EXPECT_EQ(one.rows[r].test_accuracy, three.rows[r].test_accuracy) << r;
    EXPECT_EQ(one.rows[r].virtual_seconds, three.rows[r].virtual_seconds) << r;
    EXPECT_EQ(one.rows[r].clients, 3) << r;
  }
  // The clock moves forward, and learning happens.
  EXPECT_GT(one.rows[7].virtual_seconds, one.rows[0].virtual_seconds);
  EXPECT_GT(one.rows[7].test_accuracy, 0.3);
  for (size_t i = 0; i < one.final_model.size(); ++i) {
    EXPECT_TRUE(one.final_model.tensor(i).equal(three.final_model.tensor(i))) << i;
  }
}

// Stopped after step 4 (a checkpoint with clients in flight, some trained ahead),
// then resumed with another number of workers: the same run, bit for bit. FedAdam
// keeps server state across steps; stale updates carry the versions they hold.
TEST(AsyncRunTest, ACheckpointedAndResumedRunEqualsTheUninterruptedOne) {
  const std::string adam =
      "aggregator { name: 'fedadam' } server { async { concurrency: 10 buffer_size: 2 "
      "staleness { kind: HINGE exponent: 2 knee: 1 max_staleness: 6 } } } ";
  const ExperimentResult straight = RunSpec(adam + "simulation { workers: 2 }", "straight");

  auto spec = ParseSpec(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride(adam + "server { rounds: 4 } output { checkpoint_every: 2 } "
                                   "simulation { workers: 3 }",
                            *spec)
                  .ok());
  auto first = BuildExperiment(*spec);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/resumed");
  ASSERT_TRUE(RunExperiment(*first, dir).ok());
  auto checkpoint = ReadCheckpoint(dir + "/" + kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_EQ(checkpoint->server.rounds_done, 4);
  ASSERT_TRUE(checkpoint->server.async.has_value());
  EXPECT_EQ(checkpoint->server.async->in_flight.size(), 9u);  // the tenth is replaced next
  EXPECT_FALSE(checkpoint->server.async->versions.empty());

  ASSERT_TRUE(ApplyOverride("server { rounds: 8 } simulation { workers: 1 }", *spec).ok());
  auto rest = BuildExperiment(*spec);
  ASSERT_TRUE(rest.ok()) << rest.status();
  auto resumed = RunExperiment(*rest, dir, &*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(straight.rows.size(), 8u);
  ASSERT_EQ(resumed->rows.size(), 8u);
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(straight.rows[r].test_accuracy, resumed->rows[r].test_accuracy) << r;
    EXPECT_EQ(straight.rows[r].train_loss, resumed->rows[r].train_loss) << r;
    EXPECT_EQ(straight.rows[r].virtual_seconds, resumed->rows[r].virtual_seconds) << r;
    EXPECT_EQ(straight.rows[r].rejected, resumed->rows[r].rejected) << r;
  }
  for (size_t i = 0; i < straight.final_model.size(); ++i) {
    EXPECT_TRUE(straight.final_model.tensor(i).equal(resumed->final_model.tensor(i))) << i;
  }
}

// A trace of 10 devices (30 clients cycle over them): speeds, and online windows
// short enough that some tasks are cut off.
std::string WriteTrace() {
  const std::string path = absl::StrCat(std::getenv("TEST_TMPDIR"), "/trace.csv");
  std::ofstream out(path);
  out << "client,speed,available\n";
  for (int d = 0; d < 10; ++d) {
    const char* windows[] = {"", "0-0.5 1-1.5 2-2.5 3-inf", "0.3-1.2 2-inf"};
    out << d << "," << 0.5 + 0.2 * d << "," << windows[d % 3] << "\n";
  }
  return path;
}

int TotalDropped(const ExperimentResult& result) {
  int dropped = 0;
  for (const MetricsRow& row : result.rows) dropped += row.dropped;
  return dropped;
}

// With a trace, in either mode: clients go offline mid-task and drop out, the run
// is the same for any number of workers, and (async) resumes bit for bit.
TEST(AsyncRunTest, ATraceRunsInBothModesAndResumesExactly) {
  const std::string trace =
      absl::StrCat("client { system { trace_path: '", WriteTrace(), "' } } ");
  const ExperimentResult sync =
      RunSpec(trace + "server { rounds: 4 clients_per_round: 10 }", "tsync", true);
  ASSERT_EQ(sync.rows.size(), 4u);
  EXPECT_GT(TotalDropped(sync), 0);
  const ExperimentResult one = RunSpec(trace, "trace1");
  const ExperimentResult three = RunSpec(trace + "simulation { workers: 3 }", "trace3");
  ASSERT_EQ(one.rows.size(), 8u);
  ASSERT_EQ(three.rows.size(), 8u);
  EXPECT_GT(TotalDropped(one), 0);
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(one.rows[r].test_accuracy, three.rows[r].test_accuracy) << r;
    EXPECT_EQ(one.rows[r].virtual_seconds, three.rows[r].virtual_seconds) << r;
    EXPECT_EQ(one.rows[r].dropped, three.rows[r].dropped) << r;
  }

  auto spec = ParseSpec(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride(trace + "server { rounds: 4 } output { checkpoint_every: 2 }", *spec)
                  .ok());
  auto first = BuildExperiment(*spec);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/trace_resumed");
  ASSERT_TRUE(RunExperiment(*first, dir).ok());
  auto checkpoint = ReadCheckpoint(dir + "/" + kCheckpointFile, at::kCPU);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ASSERT_TRUE(ApplyOverride("server { rounds: 8 } simulation { workers: 2 }", *spec).ok());
  auto rest = BuildExperiment(*spec);
  ASSERT_TRUE(rest.ok()) << rest.status();
  auto resumed = RunExperiment(*rest, dir, &*checkpoint);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed->rows.size(), 8u);
  for (size_t r = 0; r < 8; ++r) {
    EXPECT_EQ(one.rows[r].test_accuracy, resumed->rows[r].test_accuracy) << r;
    EXPECT_EQ(one.rows[r].virtual_seconds, resumed->rows[r].virtual_seconds) << r;
    EXPECT_EQ(one.rows[r].dropped, resumed->rows[r].dropped) << r;
  }
}

TEST(AsyncRunTest, ABadTraceIsNamedAndPoissonSamplingRefused) {
  auto spec = ParseSpec(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride("client { system { trace_path: '/nonexistent/t.csv' } }", *spec).ok());
  auto experiment = BuildExperiment(*spec);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto result = RunExperiment(*experiment, absl::StrCat(std::getenv("TEST_TMPDIR"), "/bad"));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(),
              HasSubstr("client.system.trace_path: cannot read client trace /nonexistent/t.csv"));

  ASSERT_TRUE(ApplyOverride("server { cohort_sampling: POISSON }", *spec).ok());
  spec->mutable_server()->clear_async();
  auto poisson = BuildExperiment(*spec);
  ASSERT_FALSE(poisson.ok());
  EXPECT_THAT(poisson.status().message(),
              HasSubstr("server.cohort_sampling: POISSON samples every client with the same "
                        "probability, which a trace's online windows"));
}

TEST(AsyncRunTest, TheSpecIsCheckedWithPaths) {
  auto spec = ParseSpec(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride("server { async { concurrency: 31 buffer_size: 2 mixing_rate: 1.5 } "
                            "screening { max_norm_to_median: 3 } min_accepted_updates: 2 }",
                            *spec)
                  .ok());
  auto experiment = BuildExperiment(*spec);
  ASSERT_FALSE(experiment.ok());
  const std::string message(experiment.status().message());
  EXPECT_THAT(message, HasSubstr("server.async.concurrency: must be in [1, partition.num_clients "
                                 "= 30], got 31"));
  EXPECT_THAT(message, HasSubstr("server.async.mixing_rate: must be in (0, 1], got 1.5"));
  EXPECT_THAT(message, HasSubstr("server.async.buffer_size: must be 1 with mixing_rate"));
  EXPECT_THAT(message, HasSubstr("server.screening.max_norm_to_median: excludes server.async"));
  EXPECT_THAT(message, HasSubstr("server.min_accepted_updates: excludes server.async"));
}

TEST(AsyncRunTest, AnAggregatorThatNeedsTheWholeCohortIsRefusedByItsProperty) {
  auto spec = ParseSpec(kSpec, "kSpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride("aggregator { name: 'median' }", *spec).ok());
  auto experiment = BuildExperiment(*spec);
  ASSERT_FALSE(experiment.ok());
  EXPECT_THAT(experiment.status().message(),
              HasSubstr("server.async: aggregator \"median\" (with these options) does not "
                        "aggregate through sums alone"));
}

}  // namespace
}  // namespace fl
