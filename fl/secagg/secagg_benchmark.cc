// The cost of secure aggregation per round (fl/secagg/protocol.h): one client's
// compute (key generation, sharing, masking, unmasking) and the server's (routing,
// summing, rebuilding secrets, removing masks), and the bytes each client sends and
// receives, against the cohort size n, the neighbours k (0: everyone, SecAgg;
// k > 0: SecAgg+) and the vector length P (32-bit words). 5 % of the clients drop
// after sharing their keys, so the server also recovers masks. Wall times are the
// phases' own, summed over clients and averaged per client; counters:
//   client_ms / server_ms   compute per client (mean) and on the server (total)
//   up_kb / down_kb         bytes per client (mean) sent and received
//
//   bazel run -c opt //fl/secagg:secagg_benchmark -- --benchmark_counters_tabular=true
//
// The complete graph at n = 1000 is left out: each client expands n - 1 pairwise
// masks of P words (about 4 TB of keystream per round at P = 10^6), which is why
// SecAgg+ exists.

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "benchmark/benchmark.h"
#include "fl/secagg/protocol.h"
#include "glog/logging.h"

namespace fl::secagg {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

void BM_SecAggRound(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int neighbours = static_cast<int>(state.range(1));
  const size_t words = static_cast<size_t>(state.range(2));
  const int neighbourhood = neighbours == 0 ? n : std::min(n, 2 * ((neighbours + 1) / 2) + 1);
  const SecAggParams params{std::max(2, neighbourhood / 2 + 1), neighbours};
  std::vector<uint32_t> input(words, 7);
  double client_seconds = 0, server_seconds = 0, up = 0, down = 0;
  uint64_t seed = 1;
  for (auto _ : state) {
    SecAggServer server(params, seed);
    std::map<int64_t, std::unique_ptr<SecAggClient>> clients;
    std::map<int64_t, PublicKeys> keys;
    std::set<int64_t> dropped;
    auto start = Clock::now();
    for (int64_t id = 0; id < n; ++id) {
      clients[id] = std::make_unique<SecAggClient>(id, SeedFrom(seed, static_cast<uint64_t>(id)));
      keys[id] = clients[id]->AdvertiseKeys();
      if (id % 20 == 7) dropped.insert(id);
    }
    client_seconds += Seconds(start);
    up += 64.0 * n;
    start = Clock::now();
    CHECK(server.CollectKeys(keys).ok());
    server_seconds += Seconds(start);
    for (auto& [id, client] : clients) {
      down += 64.0 * server.Neighbours(id).size();
      start = Clock::now();
      auto messages = client->ShareKeys(server.keys(), server.Neighbours(id), params.threshold);
      client_seconds += Seconds(start);
      CHECK(messages.ok()) << messages.status();
      for (const auto& [to, message] : *messages) up += message.size();
      start = Clock::now();
      CHECK(server.CollectShares(id, *std::move(messages)).ok());
      server_seconds += Seconds(start);
    }
    for (auto& [id, client] : clients) {
      if (dropped.count(id)) continue;
      auto inbox = server.Inbox(id);
      for (const auto& [from, message] : inbox) down += message.size();
      start = Clock::now();
      auto masked = client->MaskedInput(input, inbox);
      client_seconds += Seconds(start);
      CHECK(masked.ok()) << masked.status();
      up += 4.0 * masked->size();
      start = Clock::now();
      CHECK(server.CollectMaskedInput(id, *std::move(masked)).ok());
      server_seconds += Seconds(start);
    }
    const std::set<int64_t> survivors = server.Survivors();
    for (auto& [id, client] : clients) {
      if (!survivors.count(id)) continue;
      down += 8.0 * survivors.size();
      start = Clock::now();
      auto shares = client->Unmask(survivors);
      client_seconds += Seconds(start);
      CHECK(shares.ok()) << shares.status();
      for (const auto& [owner, share] : *shares) up += 16.0 + 8.0 * share.y.size();
      start = Clock::now();
      CHECK(server.CollectUnmaskShares(id, *std::move(shares)).ok());
      server_seconds += Seconds(start);
    }
    start = Clock::now();
    auto sum = server.Sum();
    server_seconds += Seconds(start);
    CHECK(sum.ok()) << sum.status();
    CHECK_EQ((*sum)[0], static_cast<uint32_t>(7 * survivors.size()));
    ++seed;
  }
  const double rounds = static_cast<double>(state.iterations());
  state.counters["client_ms"] = 1e3 * client_seconds / rounds / n;
  state.counters["server_ms"] = 1e3 * server_seconds / rounds;
  state.counters["up_kb"] = up / rounds / n / 1024;
  state.counters["down_kb"] = down / rounds / n / 1024;
  state.counters["threshold"] = params.threshold;
}

BENCHMARK(BM_SecAggRound)
    ->ArgNames({"n", "k", "P"})
    ->Args({100, 0, 100000})
    ->Args({100, 14, 100000})
    ->Args({1000, 20, 100000})
    ->Args({100, 0, 10000})
    ->Args({1000, 20, 10000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace fl::secagg

BENCHMARK_MAIN();
