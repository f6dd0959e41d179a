#include "fl/server.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fl/client_sampler.h"
#include "fl/dataset.h"
#include "fl/experiment.h"
#include "fl/model.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A client that returns a fixed delta (optionally poisoned) and counts its calls.
class FakeClient : public Client {
 public:
  FakeClient(int64_t id, float value, int64_t n) : id_(id), value_(value), n_(n) {}
  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return n_; }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override {
    ++calls;
    received.push_back(global.tensor(0).clone());
    if (fail) return absl::InternalError("boom");
    ClientUpdate update;
    update.client_id = id_;
    update.delta = ModelState({{"w", at::full({2}, value_), false}});
    update.num_examples = n_;
    update.local_steps = steps;
    update.planned_steps = 5;
    if (steps == 0) {  // dropped out: nothing but the step counts
      update.delta = ModelState();
      return update;
    }
    update.metrics["train_loss"] = value_;
    update.bytes_sent = 8;
    if (broken_shape) update.delta = ModelState({{"w", at::zeros({3}), false}});
    return update;
  }
  void Acknowledge(bool accepted) override { (accepted ? accepted_acks : rejected_acks)++; }
  int calls = 0;
  int accepted_acks = 0;
  int rejected_acks = 0;
  bool fail = false;
  bool broken_shape = false;
  int64_t steps = 5;  // of 5 planned
  std::vector<at::Tensor> received;  // the model each round started from

 private:
  int64_t id_;
  float value_;
  int64_t n_;
};

// Adds the plain sum of accepted deltas and reports how many it saw.
class SumAggregator : public Aggregator {
 public:
  absl::Status Accumulate(ClientUpdate update, ServerContext& context) override {
    if (!sum_) sum_ = update.delta.ZerosLike();
    sum_->Axpy(1.0, update.delta);
    ++seen_;
    order.push_back(update.client_id);
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext& context) override {
    ModelState next = global.Clone();
    next.Axpy(1.0, *sum_);
    context.diagnostics["seen"] = seen_;
    if (evaluate_doubled) {
      context.evaluation_model = next.Clone();
      context.evaluation_model->Scale(2.0);
    }
    sum_.reset();
    seen_ = 0;
    return next;
  }
  std::vector<int64_t> order;
  bool evaluate_doubled = false;

 private:
  std::optional<ModelState> sum_;
  int seen_ = 0;
};

// The size-weighted mean of the deltas, through partial sums (sums_only).
class MeanSums : public Aggregator {
 public:
  AggregatorProperties properties() const override {
    AggregatorProperties properties;
    properties.sums_only = true;
    return properties;
  }
  absl::StatusOr<RoundPlan> Configure(const ModelState& global, ServerContext&) override {
    sums_.clear();
    for (size_t i = 0; i < global.size(); ++i) {
      sums_[absl::StrCat("sum/", i)] = at::zeros(global.tensor(i).sizes(), at::kDouble);
    }
    sums_["weight"] = at::zeros({}, at::kDouble);
    return RoundPlan();
  }
  absl::Status Accumulate(ClientUpdate update, ServerContext&) override {
    ++accumulated;
    const double n = static_cast<double>(update.num_examples);
    for (size_t i = 0; i < update.delta.size(); ++i) {
      sums_[absl::StrCat("sum/", i)] += update.delta.tensor(i).to(at::kDouble) * n;
    }
    sums_["weight"] += n;
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
    ModelState next = global.Clone();
    for (size_t i = 0; i < next.size(); ++i) {
      next.mutable_entries()[i].tensor +=
          (sums_[absl::StrCat("sum/", i)] / sums_["weight"]).to(at::kFloat);
    }
    return next;
  }
  std::optional<std::map<std::string, at::Tensor>> PartialSums() const override {
    std::map<std::string, at::Tensor> copy;
    for (const auto& [name, sum] : sums_) copy[name] = sum.clone();
    return copy;
  }
  absl::Status MergePartialSums(std::map<std::string, at::Tensor> sums) override {
    sums_ = std::move(sums);
    return absl::OkStatus();
  }
  int accumulated = 0;

 private:
  std::map<std::string, at::Tensor> sums_;
};

class ServerTest : public ::testing::Test {
 protected:
  std::unique_ptr<MetricsSink> Sink(const std::string& name) {
    auto sink = MetricsSink::Open(std::string(getenv("TEST_TMPDIR")) + "/" + name,
                                  fedkit::ExperimentSpec());
    EXPECT_TRUE(sink.ok());
    return *std::move(sink);
  }
  static absl::StatusOr<Evaluation> Evaluate(const ModelState& state) {
    return Evaluation{state.tensor(0)[0].item<double>(), 0.5, 10};
  }
  ModelState Zero() { return ModelState({{"w", at::zeros({2}), false}}); }
};

TEST_F(ServerTest, FullParticipationAccumulatesEveryClientInCohortOrder) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int k = 0; k < 4; ++k) clients.push_back(std::make_unique<FakeClient>(k, k + 1.0f, 10));
  SumAggregator aggregator;
  auto sink = Sink("full");
  ServerConfig config{.rounds = 2, .clients_per_round = 4, .eval_every = 1, .workers = 3};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  auto final_model = server.Run(Zero());
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  // Each round adds 1 + 2 + 3 + 4.
  EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), 20.0f);
  EXPECT_THAT(aggregator.order, ::testing::ElementsAre(0, 1, 2, 3, 0, 1, 2, 3));
  ASSERT_EQ(sink->rows().size(), 2);
  const MetricsRow& row = sink->rows()[1];
  EXPECT_EQ(row.clients, 4);
  EXPECT_EQ(row.rejected, 0);
  EXPECT_EQ(row.bytes_up, 2 * 4 * 8);
  EXPECT_EQ(row.bytes_down, 2 * 4 * 8);  // the 2-float global model to 4 clients, twice
  EXPECT_EQ(row.local_steps, 2 * 4 * 5);  // 5 steps per client, 4 clients, 2 rounds
  EXPECT_DOUBLE_EQ(row.train_loss, 2.5);  // size-weighted mean of 1..4
  EXPECT_EQ(row.diagnostics.at("seen"), 4);
}

TEST_F(ServerTest, NonFiniteFailedAndMisshapenUpdatesAreRejectedAndCounted) {
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(std::make_unique<FakeClient>(0, 1.0f, 10));
  clients.push_back(std::make_unique<FakeClient>(1, std::numeric_limits<float>::quiet_NaN(), 10));
  clients.push_back(std::make_unique<FakeClient>(2, 1.0f, 10));
  clients.push_back(std::make_unique<FakeClient>(3, 1.0f, 10));
  static_cast<FakeClient*>(clients[2].get())->fail = true;
  static_cast<FakeClient*>(clients[3].get())->broken_shape = true;
  std::vector<const Client*> raw;
  for (const auto& c : clients) raw.push_back(c.get());
  SumAggregator aggregator;
  auto sink = Sink("rejects");
  ServerConfig config{.rounds = 1, .clients_per_round = 4};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  auto final_model = server.Run(Zero());
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), 1.0f);
  EXPECT_EQ(sink->rows()[0].clients, 1);
  EXPECT_EQ(sink->rows()[0].rejected, 3);
  EXPECT_THAT(sink->rows()[0].rejected_by_reason,
              ::testing::UnorderedElementsAre(::testing::Pair("non_finite", 1),
                                              ::testing::Pair("training", 1),
                                              ::testing::Pair("shape", 1)));
  // Each client hears the verdict on its update, so it keeps its hooks' new state
  // only when accepted (a failed training is a rejection too).
  for (int k = 0; k < 4; ++k) {
    const auto* client = static_cast<const FakeClient*>(raw[k]);
    EXPECT_EQ(client->accepted_acks, k == 0 ? 1 : 0) << k;
    EXPECT_EQ(client->rejected_acks, k == 0 ? 0 : 1) << k;
  }
}

// The virtual clock: a round lasts until its slowest accepted client; a rejected
// or dropped client, however slow, does not hold it up.
TEST_F(ServerTest, ARoundLastsUntilItsSlowestAcceptedClient) {
  for (int workers : {1, 3}) {
    std::vector<std::unique_ptr<Client>> clients;
    for (int k = 0; k < 4; ++k) clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
    static_cast<FakeClient*>(clients[2].get())->broken_shape = true;
    static_cast<FakeClient*>(clients[3].get())->steps = 0;
    SumAggregator aggregator;
    auto sink = Sink(absl::StrCat("clock", workers));
    ServerConfig config{.rounds = 2, .clients_per_round = 4, .workers = workers};
    std::vector<std::tuple<int64_t, int, int64_t>> asked;
    absl::Mutex mutex;
    config.task_seconds = [&](int64_t client, int round, int64_t bytes_down) {
      absl::MutexLock lock(&mutex);
      asked.emplace_back(client, round, bytes_down);
      // Client 1 is the slowest accepted one: 7 s in round 1, 8 s in round 2.
      const double seconds[] = {3.0, 6.0 + round, 50.0, 90.0};
      return seconds[client];
    };
    Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
    ASSERT_TRUE(server.Run(Zero()).ok());
    ASSERT_EQ(sink->rows().size(), 2);
    EXPECT_DOUBLE_EQ(sink->rows()[0].virtual_seconds, 7.0);
    EXPECT_DOUBLE_EQ(sink->rows()[1].virtual_seconds, 7.0 + 8.0);  // cumulative
    // Asked for the accepted clients only, with the 2-float model's 8 bytes.
    std::sort(asked.begin(), asked.end());
    EXPECT_THAT(asked, ::testing::ElementsAre(std::make_tuple(0, 1, 8), std::make_tuple(0, 2, 8),
                                              std::make_tuple(1, 1, 8), std::make_tuple(1, 2, 8)));
  }
}

// Online windows (a client trace): a round samples among the clients online when
// it starts, waits when none is, and a client whose window closes before its task
// ends drops out untrained, holding the round until it goes offline. Tasks take
// 3, 4, 100 and 5 s; windows [20, inf), [0, 10), [0, 6), [0, 2); 3 a round:
//   round 1 at 0:  online 1, 2, 3. 1 done at 4; 2 offline at 6, 3 at 2 (dropped)
//                  -> lasts 6
//   round 2 at 6:  online 1 only; 6 + 4 >= 10: offline at 10 (dropped) -> lasts 4
//   round 3 at 10: nobody online; wait until 20 for 0, done at 23     -> lasts 13
//   round 4 at 23: online 0, done at 26                                -> lasts 3
TEST_F(ServerTest, ARoundSamplesOnlineClientsAndLosesThoseThatGoOffline) {
  for (int workers : {1, 3}) {
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<const FakeClient*> raw;
    for (int k = 0; k < 4; ++k) {
      clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
      raw.push_back(static_cast<const FakeClient*>(clients.back().get()));
    }
    SumAggregator aggregator;
    auto sink = Sink(absl::StrCat("online", workers));
    ServerConfig config{.rounds = 4, .clients_per_round = 3, .workers = workers};
    config.task_seconds = [](int64_t client, int, int64_t) {
      const double seconds[] = {3.0, 4.0, 100.0, 5.0};
      return seconds[client];
    };
    config.next_window = [](int64_t client, double at) {
      const OnlineWindow windows[] = {{20, kInf}, {0, 10}, {0, 6}, {0, 2}};
      const OnlineWindow window = windows[client];
      return at < window.end ? window : OnlineWindow{kInf, kInf};
    };
    Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
    absl::StatusOr<ModelState> final_model = server.Run(Zero());
    ASSERT_TRUE(final_model.ok()) << final_model.status();
    ASSERT_EQ(sink->rows().size(), 4);
    std::vector<double> clock;
    std::vector<int> accepted, dropped;
    for (const MetricsRow& row : sink->rows()) {
      clock.push_back(row.virtual_seconds);
      accepted.push_back(row.clients);
      dropped.push_back(row.dropped);
    }
    EXPECT_THAT(clock, ::testing::ElementsAre(6.0, 10.0, 23.0, 26.0));
    EXPECT_THAT(accepted, ::testing::ElementsAre(1, 0, 1, 1));
    EXPECT_THAT(dropped, ::testing::ElementsAre(2, 1, 0, 0));
    // Only the clients that finish in time train.
    EXPECT_EQ(raw[0]->calls, 2);
    EXPECT_EQ(raw[1]->calls, 1);
    EXPECT_EQ(raw[2]->calls, 0);
    EXPECT_EQ(raw[3]->calls, 0);
    EXPECT_EQ(raw[1]->rejected_acks, 1);
  }
}

TEST_F(ServerTest, ARunWithNoClientEverOnlineAgainFailsNamingTheTime) {
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(std::make_unique<FakeClient>(0, 1.0f, 10));
  SumAggregator aggregator;
  auto sink = Sink("never_online");
  ServerConfig config{.rounds = 2, .clients_per_round = 1};
  config.task_seconds = [](int64_t, int, int64_t) { return 5.0; };
  config.next_window = [](int64_t, double at) {
    return at < 1 ? OnlineWindow{0, 1} : OnlineWindow{kInf, kInf};
  };
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  absl::StatusOr<ModelState> final_model = server.Run(Zero());
  EXPECT_EQ(final_model.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(final_model.status().message(),
              HasSubstr("round 2: no client is online at or after virtual second 1 "
                        "(client.system.trace_path)"));
}

// Norm screening against the round's median: an update far above it never reaches
// the aggregator, whatever the number of workers, and is counted as "norm".
TEST_F(ServerTest, NormScreeningRejectsUpdatesFarAboveTheMedian) {
  for (int workers : {1, 3}) {
    std::vector<std::unique_ptr<Client>> clients;
    // Norms are value * sqrt(2); the median of {1, 1, 1, 1, 50} is 1.
    for (int k = 0; k < 5; ++k) {
      clients.push_back(std::make_unique<FakeClient>(k, k == 3 ? 50.0f : 1.0f, 10));
    }
    std::vector<const Client*> raw;
    for (const auto& c : clients) raw.push_back(c.get());
    SumAggregator aggregator;
    auto sink = Sink(absl::StrCat("norm_screening_", workers));
    ServerConfig config{.rounds = 2, .clients_per_round = 5, .max_norm_to_median = 3.0,
                        .workers = workers};
    Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
    auto final_model = server.Run(Zero());
    ASSERT_TRUE(final_model.ok()) << final_model.status();
    // Two rounds of the four unit updates; none of the 50s.
    EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), 8.0f);
    EXPECT_THAT(aggregator.order, ::testing::ElementsAre(0, 1, 2, 4, 0, 1, 2, 4));
    const MetricsRow& row = sink->rows()[1];
    EXPECT_EQ(row.clients, 4);
    EXPECT_EQ(row.rejected, 1);
    EXPECT_THAT(row.rejected_by_reason, ::testing::ElementsAre(::testing::Pair("norm", 1)));
    EXPECT_EQ(static_cast<const FakeClient*>(raw[3])->rejected_acks, 2);
    EXPECT_EQ(static_cast<const FakeClient*>(raw[0])->accepted_acks, 2);
    std::ifstream csv(std::string(getenv("TEST_TMPDIR")) + "/norm_screening_" +
                      std::to_string(workers) + "/metrics.csv");
    std::string header, first;
    std::getline(csv, header);
    std::getline(csv, first);
    EXPECT_THAT(header, ::testing::EndsWith(",seconds,virtual_seconds,rejected_norm,seen"));
    EXPECT_THAT(first, ::testing::EndsWith(",1,4"));
  }
}

TEST_F(ServerTest, NormScreeningUsesTheMiddlePairsMeanForAnEvenCohort) {
  std::vector<std::unique_ptr<Client>> clients;
  // Median of {1, 2, 3, 100} is 2.5; twice that keeps 1, 2 and 3.
  for (float value : {1.0f, 2.0f, 3.0f, 100.0f}) {
    clients.push_back(std::make_unique<FakeClient>(clients.size(), value, 10));
  }
  SumAggregator aggregator;
  auto sink = Sink("norm_screening_even");
  ServerConfig config{.rounds = 1, .clients_per_round = 4, .max_norm_to_median = 2.0};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  auto final_model = server.Run(Zero());
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), 6.0f);
  EXPECT_EQ(sink->rows()[0].rejected_by_reason.at("norm"), 1);
}

TEST_F(ServerTest, AWholeCohortFailingStopsTheRun) {
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(std::make_unique<FakeClient>(0, 1.0f, 10));
  static_cast<FakeClient*>(clients[0].get())->fail = true;
  SumAggregator aggregator;
  auto sink = Sink("allfail");
  Server server(ServerConfig{}, &aggregator, std::move(clients), ServerContext(), Evaluate,
                sink.get());
  auto final_model = server.Run(Zero());
  EXPECT_EQ(final_model.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(final_model.status().message(),
              HasSubstr("round 1: every update was rejected; first: boom"));
}

TEST_F(ServerTest, ARoundBelowTheQuorumFailsTheRunAndOneAtItAggregates) {
  // Rounds of 3: one client fails training, one drops out (no step), one trains.
  auto cohort = [](int64_t dropped_steps) {
    std::vector<std::unique_ptr<Client>> clients;
    for (int k = 0; k < 3; ++k) clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
    static_cast<FakeClient*>(clients[0].get())->fail = true;
    static_cast<FakeClient*>(clients[1].get())->steps = dropped_steps;
    return clients;
  };
  SumAggregator aggregator;
  auto sink = Sink("quorum");
  ServerConfig config{.rounds = 2, .clients_per_round = 3, .min_accepted_updates = 2};
  Server below(config, &aggregator, cohort(0), ServerContext(), Evaluate, sink.get());
  auto failed = below.Run(Zero());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(),
              HasSubstr("round 1: 1 updates accepted, fewer than server.min_accepted_updates = 2 "
                        "(1 rejected, 1 dropped out); first rejection: boom"));
  EXPECT_TRUE(sink->rows().empty());

  // The same cohort with the dropout training reaches the quorum: both updates count.
  SumAggregator fresh;
  auto reached_sink = Sink("quorum_reached");
  Server reached(config, &fresh, cohort(5), ServerContext(), Evaluate, reached_sink.get());
  auto model = reached.Run(Zero());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_FLOAT_EQ(model->tensor(0)[0].item<float>(), 4.0f);  // 2 rounds x 2 updates of 1
  EXPECT_EQ(reached_sink->rows().back().clients, 2);
}

TEST_F(ServerTest, PartialParticipationAndEvaluationPeriod) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<FakeClient*> raw;
  for (int k = 0; k < 10; ++k) {
    clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
    raw.push_back(static_cast<FakeClient*>(clients.back().get()));
  }
  SumAggregator aggregator;
  auto sink = Sink("partial");
  ServerConfig config{.rounds = 7, .clients_per_round = 3, .eval_every = 3, .seed = 4};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  ASSERT_TRUE(server.Run(Zero()).ok());
  int calls = 0;
  for (FakeClient* c : raw) calls += c->calls;
  EXPECT_EQ(calls, 21);
  // Rounds 3 and 6, and the last round.
  ASSERT_EQ(sink->rows().size(), 3);
  EXPECT_EQ(sink->rows()[0].round, 3);
  EXPECT_EQ(sink->rows()[1].round, 6);
  EXPECT_EQ(sink->rows()[2].round, 7);
  EXPECT_EQ(sink->rows()[2].bytes_up, 7 * 3 * 8);
  // Updates are counted in every round, not only in evaluated ones: each row has
  // those of the rounds since the previous row.
  EXPECT_EQ(sink->rows()[0].clients, 9);
  EXPECT_EQ(sink->rows()[1].clients, 9);
  EXPECT_EQ(sink->rows()[2].clients, 3);
  // Diagnostics are kept for every round, evaluated or not.
  std::ifstream in(std::string(getenv("TEST_TMPDIR")) + "/partial/diagnostics.csv");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "round,seen\n1,3\n2,3\n3,3\n4,3\n5,3\n6,3\n7,3\n");
}

TEST_F(ServerTest, PoissonSamplingVariesTheCohortAndKeepsTheModelWhenItIsEmpty) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<FakeClient*> raw;
  for (int k = 0; k < 10; ++k) {
    clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
    raw.push_back(static_cast<FakeClient*>(clients.back().get()));
  }
  SumAggregator aggregator;
  auto sink = Sink("poisson");
  // q = 1/10: a round draws nobody with probability 0.9^10 = 0.35.
  ServerConfig config{.rounds = 40, .clients_per_round = 1, .poisson_sampling = true, .seed = 3};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  auto final_model = server.Run(Zero());
  ASSERT_TRUE(final_model.ok()) << final_model.status();
  int calls = 0;
  for (FakeClient* c : raw) calls += c->calls;
  std::set<int> sizes;
  int trained = 0;
  for (const MetricsRow& row : sink->rows()) {
    sizes.insert(row.clients);
    trained += row.clients;
  }
  EXPECT_EQ(trained, calls);
  // Each accepted update adds 1 to every weight; an empty round adds nothing.
  EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), static_cast<float>(calls));
  EXPECT_TRUE(sizes.count(0)) << "no empty cohort in 40 rounds";
  EXPECT_GE(sizes.size(), 3u) << "cohort sizes should vary under Poisson sampling";
  size_t drawn = 0;
  for (int round = 1; round <= 40; ++round) drawn += SamplePoissonCohort(10, 0.1, 3, round).size();
  EXPECT_EQ(calls, static_cast<int>(drawn));
}

TEST_F(ServerTest, EvaluationCanStartAtRoundOne) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int k = 0; k < 3; ++k) clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
  SumAggregator aggregator;
  auto sink = Sink("first_eval_round");
  ServerConfig config{.rounds = 8, .clients_per_round = 3, .eval_every = 3, .first_eval_round = 1};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  ASSERT_TRUE(server.Run(Zero()).ok());
  // Rounds 1, 4 and 7, then the last.
  ASSERT_EQ(sink->rows().size(), 4);
  EXPECT_EQ(sink->rows()[0].round, 1);
  EXPECT_EQ(sink->rows()[1].round, 4);
  EXPECT_EQ(sink->rows()[2].round, 7);
  EXPECT_EQ(sink->rows()[3].round, 8);
}

// Regression: rejected updates of rounds that were not evaluated were lost.
TEST_F(ServerTest, RejectionsInRoundsNotEvaluatedAreCounted) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int k = 0; k < 3; ++k) clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
  static_cast<FakeClient*>(clients[1].get())->fail = true;
  SumAggregator aggregator;
  auto sink = Sink("rejected_between_rows");
  ServerConfig config{.rounds = 4, .clients_per_round = 3, .eval_every = 2};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  ASSERT_TRUE(server.Run(Zero()).ok());
  ASSERT_EQ(sink->rows().size(), 2);
  for (const MetricsRow& row : sink->rows()) {
    EXPECT_EQ(row.clients, 4) << "round " << row.round;
    EXPECT_EQ(row.rejected, 2) << "round " << row.round;
  }
}

TEST_F(ServerTest, AggregatorCanEvaluateAModelOtherThanTheIterate) {
  std::vector<std::unique_ptr<Client>> clients;
  clients.push_back(std::make_unique<FakeClient>(0, 1.5f, 10));
  SumAggregator aggregator;
  aggregator.evaluate_doubled = true;
  auto sink = Sink("eval_model");
  Server server(ServerConfig{.rounds = 2}, &aggregator, std::move(clients), ServerContext(),
                Evaluate, sink.get());
  auto final_model = server.Run(Zero());
  // Training continues from the iterate (1.5 per round), evaluation sees twice it.
  EXPECT_FLOAT_EQ(final_model->tensor(0)[0].item<float>(), 3.0f);
  EXPECT_DOUBLE_EQ(sink->rows()[0].test_accuracy, 3.0);
  EXPECT_DOUBLE_EQ(sink->rows()[1].test_accuracy, 6.0);
}

// Secure aggregation: five clients of deltas k + 1 and weights 10 (k + 1), two
// rounds.
class SecureServerTest : public ServerTest {
 protected:
  struct Run {
    ModelState model;
    std::vector<MetricsRow> rows;
    int server_accumulated = 0;
    // Each client's verdicts heard, accepted and rejected.
    std::vector<std::pair<int, int>> acks;
  };

  Run RunFive(std::optional<SecureAggregationConfig> secure, const std::string& name,
              int failing = -1) {
    std::vector<std::unique_ptr<Client>> clients;
    std::vector<FakeClient*> raw;
    Run run;
    for (int k = 0; k < 5; ++k) {
      clients.push_back(std::make_unique<FakeClient>(k, k + 1.0f, 10 * (k + 1)));
      raw.push_back(static_cast<FakeClient*>(clients.back().get()));
    }
    if (failing >= 0) raw[failing]->fail = true;
    MeanSums aggregator;
    auto sink = Sink(name);
    ServerConfig config{.rounds = 2, .clients_per_round = 5, .workers = 2};
    config.secure_aggregation = secure;
    config.new_aggregator = []() -> absl::StatusOr<std::unique_ptr<Aggregator>> {
      return std::make_unique<MeanSums>();
    };
    Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
    auto model = server.Run(Zero());
    EXPECT_TRUE(model.ok()) << model.status();
    run.model = model.ok() ? *std::move(model) : Zero();
    run.rows = sink->rows();
    run.server_accumulated = aggregator.accumulated;
    for (FakeClient* client : raw) run.acks.emplace_back(client->accepted_acks, client->rejected_acks);
    return run;
  }

  static SecureAggregationConfig Secure() {
    SecureAggregationConfig config;
    config.update_norm_bound = 20;  // the largest delta's norm is 5 sqrt(2)
    config.max_weight = 50;
    return config;
  }
  // Range 50 x 20^2 = 20000 over 5 summands: scale 2^14.
  static constexpr double kQuantum = 1.0 / 16384;
};

TEST_F(SecureServerTest, EqualsThePlainRunWithinTheQuantumAndTheServerNeverSeesAnUpdate) {
  const Run plain = RunFive(std::nullopt, "secure_plain");
  const Run secure = RunFive(Secure(), "secure_on");
  EXPECT_EQ(plain.server_accumulated, 10);
  EXPECT_EQ(secure.server_accumulated, 0);
  // Each round moves by sum(n_k (k + 1)) / sum(n_k) = 550 / 150; the unmasked sum is
  // within 5 quanta of the weighted one, the weights exact.
  EXPECT_NEAR(plain.model.tensor(0)[0].item<float>(), 2 * 550.0 / 150, 1e-5);
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(secure.model.tensor(0)[i].item<float>(), plain.model.tensor(0)[i].item<float>(),
                2 * 5 * kQuantum / 150 + 1e-6);
  }
  ASSERT_EQ(secure.rows.size(), 2u);
  const MetricsRow& row = secure.rows[1];
  EXPECT_EQ(row.clients, 5);
  EXPECT_EQ(row.rejected, 0);
  EXPECT_EQ(row.diagnostics.at("secagg_contributions"), 5);
  EXPECT_EQ(row.diagnostics.at("secagg_aborted"), 0);
  EXPECT_EQ(row.diagnostics.at("secagg_clipped"), 0);
  EXPECT_EQ(row.diagnostics.at("secagg_saturated"), 0);
  // Keys, shares and masked vectors of 3 words, not the plain 8-byte updates.
  EXPECT_GT(row.bytes_up, plain.rows[1].bytes_up + 2 * 5 * 64);
  EXPECT_DOUBLE_EQ(row.train_loss, plain.rows[1].train_loss);
  for (const auto& [accepted, rejected] : secure.acks) EXPECT_EQ(accepted, 2);
}

TEST_F(SecureServerTest, AClientFailingAfterTheKeyExchangeIsLeftOutOfTheSum) {
  const Run secure = RunFive(Secure(), "secure_dropout", /*failing=*/2);
  // Each round: (10 + 40 + 160 + 250) / (10 + 20 + 40 + 50) = 460 / 120.
  EXPECT_NEAR(secure.model.tensor(0)[0].item<float>(), 2 * 460.0 / 120,
              2 * 4 * kQuantum / 120 + 1e-5);
  EXPECT_EQ(secure.rows[1].clients, 4);
  EXPECT_THAT(secure.rows[1].rejected_by_reason,
              ::testing::ElementsAre(::testing::Pair("training", 1)));
  EXPECT_EQ(secure.rows[1].diagnostics.at("secagg_contributions"), 4);
  EXPECT_EQ(secure.acks[2], std::make_pair(0, 2));
  EXPECT_EQ(secure.acks[0], std::make_pair(2, 0));
}

TEST_F(SecureServerTest, TooFewContributionsAbortTheRoundAndKeepTheModel) {
  SecureAggregationConfig config = Secure();
  config.threshold = 5;
  const Run secure = RunFive(config, "secure_abort", /*failing=*/2);
  EXPECT_EQ(secure.model.tensor(0)[0].item<float>(), 0.0f);
  ASSERT_EQ(secure.rows.size(), 2u);
  for (const MetricsRow& row : secure.rows) {
    EXPECT_EQ(row.clients, 0);
    EXPECT_EQ(row.diagnostics.at("secagg_aborted"), 1);
    EXPECT_EQ(row.diagnostics.at("secagg_contributions"), 4);
  }
  for (const auto& acks : secure.acks) EXPECT_EQ(acks, std::make_pair(0, 2));
}

TEST_F(SecureServerTest, AnUpdateAboveTheNormBoundIsClippedAndCounted) {
  SecureAggregationConfig config = Secure();
  config.update_norm_bound = 3 * std::sqrt(2.0);  // clients 3 and 4 (4, 5 sqrt 2) clip to 3
  const Run secure = RunFive(config, "secure_clip");
  // Each round: (10 + 40 + 90 + 3 (40 + 50)) / 150.
  EXPECT_NEAR(secure.model.tensor(0)[0].item<float>(), 2 * 410.0 / 150, 1e-4);
  EXPECT_EQ(secure.rows[1].diagnostics.at("secagg_clipped"), 2);
}

TEST_F(ServerTest, OneShotTrainsEveryClientOnce) {
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<FakeClient*> raw;
  for (int k = 0; k < 5; ++k) {
    clients.push_back(std::make_unique<FakeClient>(k, 1.0f, 10));
    raw.push_back(static_cast<FakeClient*>(clients.back().get()));
  }
  SumAggregator aggregator;
  auto sink = Sink("oneshot");
  ServerConfig config{.rounds = 1, .clients_per_round = 1, .one_shot = true};
  Server server(config, &aggregator, std::move(clients), ServerContext(), Evaluate, sink.get());
  ASSERT_TRUE(server.Run(Zero()).ok());
  for (FakeClient* c : raw) EXPECT_EQ(c->calls, 1);
}

}  // namespace
}  // namespace fl

namespace fl {
namespace {

// Client 0 complete, client 1 did 2 of 5 steps, client 2 dropped out; deltas 1, 2, 3.
struct IncompleteRound {
  ModelState next;
  MetricsRow row;
};

IncompleteRound RunIncomplete(ServerConfig::Incomplete convention, const std::string& name) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int k = 0; k < 3; ++k) {
    auto client = std::make_unique<FakeClient>(k, k + 1.0f, 10);
    client->steps = k == 0 ? 5 : (k == 1 ? 2 : 0);
    clients.push_back(std::move(client));
  }
  SumAggregator aggregator;
  auto sink = MetricsSink::Open(std::string(getenv("TEST_TMPDIR")) + "/" + name,
                                fedkit::ExperimentSpec());
  EXPECT_TRUE(sink.ok());
  ServerConfig config{.rounds = 1, .clients_per_round = 3};
  config.incomplete = convention;
  Server server(config, &aggregator, std::move(clients), ServerContext(),
                [](const ModelState& state) -> absl::StatusOr<Evaluation> {
                  return Evaluation{0.5, 0.5, 10};
                },
                sink->get());
  auto next = server.Run(ModelState({{"w", at::zeros({2}), false}}));
  EXPECT_TRUE(next.ok()) << next.status();
  IncompleteRound result;
  result.next = *next;
  result.row = (*sink)->rows().back();
  return result;
}

TEST(ServerIncompleteTest, KeepDropAndScaleAnIncompleteUpdateAndCountTheDropout) {
  // KEEP: 1 + 2; DROP: 1; SCALE: 1 + 2 * 5 / 2. The dropout (client 2) never counts.
  const std::vector<std::tuple<ServerConfig::Incomplete, float, int>> cases = {
      {ServerConfig::Incomplete::kKeep, 3.0f, 2},
      {ServerConfig::Incomplete::kDrop, 1.0f, 1},
      {ServerConfig::Incomplete::kScale, 6.0f, 2}};
  for (const auto& [convention, expected, accepted] : cases) {
    IncompleteRound round = RunIncomplete(convention, absl::StrCat("incomplete_", expected));
    EXPECT_TRUE(round.next.tensor(0).equal(at::full({2}, expected))) << expected;
    EXPECT_EQ(round.row.clients, accepted) << expected;
    EXPECT_EQ(round.row.incomplete, 1) << expected;
    EXPECT_EQ(round.row.dropped, 1) << expected;
    EXPECT_EQ(round.row.rejected, 0) << expected;
  }
}

}  // namespace
}  // namespace fl

namespace fl {
namespace {

// The server's model moves by (1, 0.6) every round; the download sends only the
// larger entry of its message (top-1 of 2). With error feedback the message is
// everything the clients' copy lacks, so the second entry is sent once its debt
// outgrows the first's; without, each round's change alone, and the second entry
// never arrives.
TEST(ServerDownloadTest, ALossyDownloadLeavesTheClientsCopyBehindAsAlgorithmOneSays) {
  struct Case {
    bool feedback;
    std::vector<std::vector<float>> received;  // by round
    std::vector<float> final_copy;
  };
  const std::vector<Case> cases = {
      {true, {{0, 0}, {1, 0}, {1, 1.2f}, {3, 1.2f}}, {3, 2.4f}},
      {false, {{0, 0}, {1, 0}, {2, 0}, {3, 0}}, {4, 0}}};
  for (const Case& c : cases) {
    std::vector<std::unique_ptr<Client>> clients;
    auto owned = std::make_unique<FakeClient>(0, 0.0f, 10);
    FakeClient* client = owned.get();
    clients.push_back(std::move(owned));
    class FixedStep : public Aggregator {
     public:
      absl::Status Accumulate(ClientUpdate, ServerContext&) override { return absl::OkStatus(); }
      absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
        ModelState next = global.Clone();
        next.mutable_tensor(0).add_(at::tensor({1.0f, 0.6f}));
        return next;
      }
    } aggregator;
    auto sink = MetricsSink::Open(absl::StrCat(getenv("TEST_TMPDIR"), "/download_", c.feedback),
                                  fedkit::ExperimentSpec());
    ASSERT_TRUE(sink.ok());
    ServerConfig config{.rounds = 4, .clients_per_round = 1};
    config.download = {CodecConfig::Kind::kTopK, 0.5};
    config.download_error_feedback = c.feedback;
    std::vector<at::Tensor> evaluated;
    Server server(config, &aggregator, std::move(clients), ServerContext(),
                  [&evaluated](const ModelState& state) -> absl::StatusOr<Evaluation> {
                    evaluated.push_back(state.tensor(0).clone());
                    return Evaluation{0.5, 0.5, 10};
                  },
                  sink->get());
    auto final_model = server.Run(ModelState({{"w", at::zeros({2}), false}}));
    ASSERT_TRUE(final_model.ok()) << final_model.status();
    ASSERT_EQ(client->received.size(), 4u);
    for (int r = 0; r < 4; ++r) {
      EXPECT_TRUE(at::allclose(client->received[r], at::tensor(c.received[r])))
          << "feedback " << c.feedback << " round " << r + 1 << ": " << client->received[r];
    }
    // The model evaluated and returned is the clients' copy, not the server's.
    EXPECT_TRUE(at::allclose(evaluated.back(), at::tensor(c.final_copy))) << evaluated.back();
    EXPECT_TRUE(final_model->tensor(0).equal(evaluated.back()));
    // Bytes down: the whole model in round 1 (8), then 1 of 2 entries: a 1-byte mask
    // and a 4-byte value.
    EXPECT_EQ((*sink)->rows().back().bytes_down, 8 + 3 * (1 + 4));
  }
}

}  // namespace
}  // namespace fl

// Spec options the Server never sees, which RunExperiment turns into its setup: the
// runner's whole path on plugins registered here (in-memory data, no files).
namespace fl {
namespace {

// 40 training and 25 test examples of 4 features, labelled by the first one's sign.
class TinyDataset : public Dataset {
 public:
  DatasetInfo info() const override { return {{4}, 2, {}}; }
  absl::Status CheckAvailable() const override { return absl::OkStatus(); }
  absl::StatusOr<DatasetSplits> Load() const override {
    auto examples = [](int64_t n, double phase) {
      const at::Tensor x = at::sin(at::arange(n * 4, at::kFloat).view({n, 4}) * 0.7 + phase);
      return Examples{x, x.select(1, 0).gt(0).to(at::kLong)};
    };
    return DatasetSplits{examples(40, 0.0), examples(25, 1.0), at::Tensor()};
  }
};

// Example i to client i mod num_clients.
class RoundRobin : public Partitioner {
 public:
  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(const PartitionInput& input,
                                                              int num_clients,
                                                              std::mt19937_64&) const override {
    std::vector<std::vector<int64_t>> shares(num_clients);
    for (size_t i = 0; i < input.labels.size(); ++i) shares[i % num_clients].push_back(i);
    return shares;
  }
};

// A linear classifier that records the size of every batch it sees in evaluation
// mode (clients train in training mode).
class EvalProbe : public Model {
 public:
  EvalProbe() {
    w_ = register_parameter("w", at::randn({2, 4}) * 0.1);
    b_ = register_parameter("b", at::zeros({2}));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    if (!is_training()) {
      absl::MutexLock lock(&mutex);
      eval_batches.push_back(x.size(0));
    }
    return at::linear(x, w_, b_);
  }
  static inline absl::Mutex mutex;
  static inline std::vector<int64_t> eval_batches;

 private:
  at::Tensor w_, b_;
};

absl::StatusOr<std::unique_ptr<Dataset>> CreateTinyDataset(const fedkit::ProxySpec&,
                                                           const Dataset::CreateArgs&) {
  return std::make_unique<TinyDataset>();
}
absl::StatusOr<std::unique_ptr<Partitioner>> CreateRoundRobin(const fedkit::ProxySpec&,
                                                              const Partitioner::CreateArgs&) {
  return std::make_unique<RoundRobin>();
}
absl::StatusOr<std::unique_ptr<Model>> CreateEvalProbe(const fedkit::ProxySpec&,
                                                       const Model::CreateArgs&) {
  return std::make_unique<EvalProbe>();
}
absl::StatusOr<std::unique_ptr<Aggregator>> CreateSum(const fedkit::ProxySpec&,
                                                      const Aggregator::CreateArgs&) {
  return std::make_unique<SumAggregator>();
}
FL_REGISTER_PLUGIN(Dataset, "tiny", fedkit::ProxySpec, CreateTinyDataset);
FL_REGISTER_PLUGIN(Partitioner, "round_robin", fedkit::ProxySpec, CreateRoundRobin);
FL_REGISTER_PLUGIN(Model, "eval_probe", fedkit::ProxySpec, CreateEvalProbe);
FL_REGISTER_PLUGIN(Aggregator, "sum", fedkit::ProxySpec, CreateSum);
absl::StatusOr<std::unique_ptr<Aggregator>> CreateMeanSums(const fedkit::ProxySpec&,
                                                           const Aggregator::CreateArgs&) {
  return std::make_unique<MeanSums>();
}
FL_REGISTER_PLUGIN(Aggregator, "mean_sums", fedkit::ProxySpec, CreateMeanSums);

// Four clients of 10 examples, all in each of 2 rounds, evaluated after each.
constexpr char kTinySpec[] = R"pb(
  name: "tiny"
  seed: 3
  device: CPU
  dataset { name: "tiny" }
  partition { name: "round_robin" num_clients: 4 }
  model { name: "eval_probe" }
  client { epochs: 1 batch_size: 5 optimizer { kind: SGD lr: 0.1 } }
  server { rounds: 2 clients_per_round: 4 }
  aggregator { name: "sum" }
  simulation { workers: 1 threads_per_worker: 1 }
)pb";

ExperimentResult RunTiny(const std::string& overrides, const std::string& dir) {
  auto spec = ParseSpec(kTinySpec, "kTinySpec");
  EXPECT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(ApplyOverride(overrides, *spec).ok()) << overrides;
  auto experiment = BuildExperiment(*spec);
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  if (!experiment.ok()) return {};
  auto result = RunExperiment(*experiment, absl::StrCat(getenv("TEST_TMPDIR"), "/", dir));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : ExperimentResult();
}

TEST(RunnerOptionsTest, EvalBatchSizeSplitsEvaluationWithoutChangingItsResult) {
  EvalProbe::eval_batches.clear();
  const ExperimentResult whole = RunTiny("", "eval_default");
  // The default (1000) takes the 25 test examples at once, each round.
  EXPECT_THAT(EvalProbe::eval_batches, ::testing::ElementsAre(25, 25));
  EvalProbe::eval_batches.clear();
  const ExperimentResult split = RunTiny("server { eval_batch_size: 10 }", "eval_10");
  EXPECT_THAT(EvalProbe::eval_batches, ::testing::ElementsAre(10, 10, 5, 10, 10, 5));
  // The same numbers, up to the order of float sums; training is untouched.
  ASSERT_EQ(whole.rows.size(), 2u);
  ASSERT_EQ(split.rows.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(split.rows[r].test_accuracy, whole.rows[r].test_accuracy) << r;
    EXPECT_NEAR(split.rows[r].test_loss, whole.rows[r].test_loss, 1e-6 * whole.rows[r].test_loss)
        << r;
  }
  EXPECT_TRUE(split.final_model.tensor(0).equal(whole.final_model.tensor(0)));
}

double Column(const MetricsRow& row, const std::string& name) {
  auto it = row.client_accuracy.find(name);
  return it == row.client_accuracy.end() ? std::nan("") : it->second;
}

TEST(RunnerOptionsTest, OneClientTestedOnTheWholeTestSplitHasTheTestAccuracy) {
  // One client trains on both classes; asking for more test examples than there
  // are gives it every test example of both: its accuracy is the test accuracy.
  const ExperimentResult run = RunTiny(
      "partition { num_clients: 1 } server { clients_per_round: 1 "
      "client_evaluation { examples_per_client: 1000000 } }",
      "client_eval_whole");
  ASSERT_EQ(run.rows.size(), 2u);
  for (const MetricsRow& row : run.rows) {
    EXPECT_EQ(Column(row, "client_acc_mean"), row.test_accuracy) << row.round;
    EXPECT_EQ(Column(row, "client_acc_worst"), row.test_accuracy) << row.round;
    EXPECT_EQ(Column(row, "client_acc_p10"), row.test_accuracy) << row.round;
    EXPECT_EQ(Column(row, "client_acc_sd"), 0.0) << row.round;
    EXPECT_DOUBLE_EQ(Column(row, "client_acc_pooled"), row.test_accuracy) << row.round;
  }
}

TEST(RunnerOptionsTest, ClientAccuracyColumnsAreWrittenAndCanBeTurnedOff) {
  const ExperimentResult run = RunTiny("", "client_eval_on");
  ASSERT_EQ(run.rows.size(), 2u);
  for (const MetricsRow& row : run.rows) {
    // Four clients: the worst <= the 10th percentile <= the mean, each in [0, 1].
    EXPECT_GE(Column(row, "client_acc_worst"), 0.0);
    EXPECT_LE(Column(row, "client_acc_worst"), Column(row, "client_acc_p10"));
    EXPECT_LE(Column(row, "client_acc_p10"), Column(row, "client_acc_mean"));
    EXPECT_LE(Column(row, "client_acc_mean"), 1.0);
    // Weighted by test-set size, between the worst and the best client.
    EXPECT_GE(Column(row, "client_acc_pooled"), Column(row, "client_acc_worst"));
    EXPECT_LE(Column(row, "client_acc_pooled"), 1.0);
  }
  const std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/client_eval_on");
  std::ifstream metrics(dir + "/metrics.csv");
  std::string header;
  std::getline(metrics, header);
  EXPECT_THAT(header, HasSubstr("client_acc_mean,client_acc_p10,client_acc_pooled,client_acc_sd,client_acc_worst"));
  std::ifstream summary_file(dir + "/summary.json");
  const std::string summary((std::istreambuf_iterator<char>(summary_file)),
                            std::istreambuf_iterator<char>());
  EXPECT_THAT(summary, HasSubstr("\"client_evaluation\": {\"split\": \"label_matched\", "
                                 "\"model\": \"global\", \"fine_tune_steps\": 0, "
                                 "\"clients\": 4"));

  const ExperimentResult off = RunTiny("server { client_evaluation { enabled: false } }",
                                       "client_eval_off");
  ASSERT_EQ(off.rows.size(), 2u);
  EXPECT_TRUE(off.rows[0].client_accuracy.empty());
  EXPECT_EQ(off.rows[1].test_accuracy, run.rows[1].test_accuracy) << "training is untouched";
}

TEST(RunnerOptionsTest, ClientEvaluationOptionsAreCheckedWithTheirPaths) {
  auto spec = ParseSpec(kTinySpec, "kTinySpec");
  ASSERT_TRUE(spec.ok());
  ASSERT_TRUE(ApplyOverride("server { client_evaluation { examples_per_client: -1 "
                            "sample_clients: 5 } }",
                            *spec)
                  .ok());
  const absl::StatusOr<Experiment> experiment = BuildExperiment(*spec);
  ASSERT_FALSE(experiment.ok());
  EXPECT_THAT(experiment.status().message(),
              HasSubstr("server.client_evaluation.examples_per_client: must be >= 0, got -1"));
  EXPECT_THAT(experiment.status().message(),
              HasSubstr("server.client_evaluation.sample_clients: must be in "
                        "[0, partition.num_clients = 4], got 5"));
}

TEST(RunnerOptionsTest, SecureAggregationInTheSpecMatchesThePlainRun) {
  const std::string one_round = "aggregator { name: 'mean_sums' } server { rounds: 1 } ";
  const ExperimentResult plain = RunTiny(one_round, "spec_plain");
  // SecAgg, and SecAgg+ with each client joined to 2 others of the 4.
  for (const std::string graph : {"", "neighbours: 2"}) {
    SCOPED_TRACE(graph);
    const ExperimentResult secure = RunTiny(
        one_round + "server { secure_aggregation { update_norm_bound: 100 " + graph + " } }",
        "spec_secure" + std::to_string(graph.size()));
    ASSERT_EQ(secure.rows.size(), 1u);
    EXPECT_EQ(secure.rows[0].clients, 4);
    EXPECT_EQ(secure.rows[0].diagnostics.at("secagg_aborted"), 0);
    // max_weight defaults to the largest client (10 examples): a range of
    // 10 x 100^2 over 4 summands, scale 2^12; the mean of 40 examples' weights is
    // then within 4 / 2^12 / 40.
    ASSERT_TRUE(plain.final_model.CheckSameLayout(secure.final_model).ok());
    double largest_error = 0;
    for (size_t i = 0; i < plain.final_model.size(); ++i) {
      const double error = (secure.final_model.tensor(i) - plain.final_model.tensor(i))
                               .abs().max().item<double>();
      EXPECT_LE(error, 4.0 / 4096 / 40 + 1e-7) << i;
      largest_error = std::max(largest_error, error);
    }
    EXPECT_GT(largest_error, 0.0) << "quantised, the sums cannot all be exact";
  }
}

TEST(RunnerOptionsTest, SecureAggregationRefusesWhatItCannotRun) {
  auto spec = ParseSpec(kTinySpec, "kTinySpec");
  ASSERT_TRUE(spec.ok());
  auto refused = [&](const std::string& overrides) {
    fedkit::ExperimentSpec copy = *spec;
    EXPECT_TRUE(ApplyOverride(overrides, copy).ok()) << overrides;
    absl::StatusOr<Experiment> experiment = BuildExperiment(copy);
    return experiment.ok() ? std::string("accepted") : std::string(experiment.status().message());
  };
  const std::string on = "server { secure_aggregation { update_norm_bound: 1 } } ";
  // "sum" has no partial sums: it is not sums_only.
  EXPECT_THAT(refused(on), HasSubstr("server.secure_aggregation: aggregator \"sum\""));
  const std::string mean = on + "aggregator { name: 'mean_sums' } ";
  EXPECT_EQ(refused(mean), "accepted");
  EXPECT_THAT(refused(mean + "server { screening { max_norm_to_median: 3 } }"),
              HasSubstr("server.screening.max_norm_to_median: needs every update's norm"));
  EXPECT_THAT(refused(mean + "client { upload { kind: TOP_K fraction: 0.5 } }"),
              HasSubstr("client.upload: a compressed update cannot be masked"));
  EXPECT_THAT(refused(mean + "server { secure_aggregation { threshold: 5 } }"),
              HasSubstr("server.secure_aggregation.threshold: must be 0 (a majority) or in [2, 4]"));
  EXPECT_THAT(refused("aggregator { name: 'mean_sums' } server { secure_aggregation { } }"),
              HasSubstr("server.secure_aggregation.update_norm_bound: must be > 0"));
  EXPECT_THAT(refused(mean + "server { secure_aggregation { max_weight: -1 } }"),
              HasSubstr("server.secure_aggregation.max_weight: must be > 0"));
  EXPECT_THAT(refused(mean + "server { secure_aggregation { value_range: 0 } }"),
              HasSubstr("server.secure_aggregation.value_range: must be > 0"));
}

TEST(RunnerOptionsTest, ScreeningInTheSpecRejectsTheOutlierByNorm) {
  // One client of four sends 100 times its update: far above 3 x the round's median.
  const std::string faulty = "client { faults { kind: SCALE fraction: 0.25 magnitude: 100 } } ";
  const ExperimentResult open = RunTiny(faulty, "unscreened");
  const ExperimentResult screened =
      RunTiny(faulty + "server { screening { max_norm_to_median: 3 } }", "screened");
  ASSERT_EQ(open.rows.size(), 2u);
  ASSERT_EQ(screened.rows.size(), 2u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(open.rows[r].rejected, 0) << r;
    EXPECT_EQ(screened.rows[r].clients, 3) << r;
    EXPECT_THAT(screened.rows[r].rejected_by_reason,
                ::testing::ElementsAre(::testing::Pair("norm", 1)))
        << r;
  }
}

}  // namespace
}  // namespace fl
