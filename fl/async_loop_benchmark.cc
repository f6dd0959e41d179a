// The asynchronous loop's own cost per update (ServerConfig::async), with clients
// and an aggregator that do next to nothing: popping the arrival, triage,
// staleness, accumulation bookkeeping, the replacement's draw and its clock time,
// and a server step every buffer_size updates.
//
//   bazel run -c opt //fl:async_loop_benchmark -- --benchmark_counters_tabular=true
//
// us_per_update is wall time over the updates applied, one worker. The fake
// client hands back a one-float delta it made once (no tensor work per update)
// and the aggregator counts it: what remains is the loop. With polynomial = 1
// each update is a fresh one-float copy scaled by (1 + tau)^-1/2, the tensor work
// a staleness weight adds.

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "fl/server.h"
#include "glog/logging.h"

namespace fl {
namespace {

class InstantClient : public Client {
 public:
  InstantClient(int64_t id, const ModelState* delta, bool copy)
      : id_(id), delta_(delta), copy_(copy) {}
  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return 1; }
  absl::StatusOr<ClientUpdate> Train(const ModelState&, const RoundPlan&, int) override {
    ClientUpdate update;
    update.client_id = id_;
    // Shares the tensor (nothing computed) unless staleness will scale it in place.
    update.delta = copy_ ? delta_->Clone() : *delta_;
    update.num_examples = 1;
    update.local_steps = update.planned_steps = 1;
    return update;
  }

 private:
  int64_t id_;
  const ModelState* delta_;
  bool copy_;
};

class CountingAggregator : public Aggregator {
 public:
  AggregatorProperties properties() const override {
    AggregatorProperties properties;
    properties.sums_only = true;
    return properties;
  }
  absl::Status Accumulate(ClientUpdate, ServerContext&) override {
    ++accumulated;
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
    return global;
  }
  int64_t accumulated = 0;
};

void BM_AsyncLoop(benchmark::State& state) {
  const int num_clients = static_cast<int>(state.range(0));
  const int concurrency = static_cast<int>(state.range(1));
  const int buffer_size = static_cast<int>(state.range(2));
  const bool weighted = state.range(3) != 0;
  const bool windows = state.range(4) != 0;
  const int steps = 20000 / buffer_size;
  const ModelState delta({{"w", at::ones({1}), false}});
  const std::string dir = absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp",
                                       "/async_loop_benchmark");
  int64_t updates = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::unique_ptr<Client>> clients;
    clients.reserve(num_clients);
    for (int k = 0; k < num_clients; ++k) {
      clients.push_back(std::make_unique<InstantClient>(k, &delta, weighted));
    }
    CountingAggregator aggregator;
    auto sink = MetricsSink::Open(dir, fedkit::ExperimentSpec());
    CHECK(sink.ok()) << sink.status();
    ServerConfig config{.rounds = steps, .eval_every = steps, .workers = 1, .seed = 1};
    config.async = ServerConfig::Async{.concurrency = concurrency, .buffer_size = buffer_size};
    if (weighted) config.async->staleness = {Staleness::Kind::kPolynomial, 0.5};
    // Log-normal-like spread of task times from a hash of the client and round.
    config.task_seconds = [](int64_t client, int round, int64_t) {
      const uint64_t h = (static_cast<uint64_t>(client) * 0x9e3779b97f4a7c15ULL) ^
                         (static_cast<uint64_t>(round) * 0xbf58476d1ce4e5b9ULL);
      return 1.0 + static_cast<double>(h % 1000) / 100.0;
    };
    if (windows) {
      // Online half of every 1000 s, at a phase per client: each dispatch scans
      // every client for the online ones.
      config.next_window = [](int64_t client, double at) {
        const double phase = static_cast<double>((static_cast<uint64_t>(client) * 2654435761ULL) % 1000);
        double start = phase + 1000.0 * std::floor((at - phase) / 1000.0);
        if (at >= start + 500.0) start += 1000.0;
        return OnlineWindow{start, start + 500.0};
      };
    }
    Server server(config, &aggregator, std::move(clients), ServerContext(),
                  [](const ModelState&) -> absl::StatusOr<Evaluation> { return Evaluation{}; },
                  sink->get());
    const ModelState global({{"w", at::zeros({1}), false}});
    state.ResumeTiming();
    CHECK(server.Run(global).ok());
    state.PauseTiming();
    updates += aggregator.accumulated;
    state.ResumeTiming();
  }
  state.counters["us_per_update"] = benchmark::Counter(
      static_cast<double>(updates) * 1e-6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["updates"] = static_cast<double>(updates) / state.iterations();
}

BENCHMARK(BM_AsyncLoop)
    ->ArgNames({"clients", "concurrency", "buffer", "polynomial", "windows"})
    ->Args({1000, 100, 10, 0, 0})
    ->Args({100000, 1000, 10, 0, 0})
    ->Args({100000, 1000, 1, 0, 0})
    ->Args({100000, 1000, 10, 1, 0})
    ->Args({1000, 100, 10, 0, 1})
    ->Args({100000, 1000, 10, 0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace fl

BENCHMARK_MAIN();
