// What one aggregation costs, for every registered aggregator, next to the
// physical bounds of the machine:
//   aggregate/<name>/K:<k>/P:<p>/<device>   Configure + K Accumulates + Finalize
//   bound/read/K:<k>/P:<p>/<device>         one read of every update (at::sum)
//   bound/stream/K:<k>/P:<p>/<device>       read every update once, add it into one
//                                           P-sized sum: the least an aggregator that
//                                           must read each update can do
//   bound/matmul/N:<n>/<device>             square float32 matmul (compute roofline)
// K in {10, 100}, P in {0.1M, 1.6M (pfl-research's CIFAR-10 CNN), 11M (ResNet-18)};
// CUDA rows where a CUDA device is usable. Aggregators are created through the
// registry and fed updates that carry whatever extras their RoundPlan's client hooks
// produce, so a newly linked aggregator is measured without code here.
//
//   bazel run -c opt //aggregators:aggregation_cost_benchmark -- --benchmark_format=json
//   bazel run -c opt //aggregators:aggregation_cost_benchmark -- \
//       --benchmark_filter='fedavg|bound' --max_params=1600000

#include <malloc.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_state_store.h"
#include "fl/model.h"
#include "fl/registry.h"

namespace {

constexpr int64_t kInputs = 1000;
// glibc's documented defaults (mallopt(3)).
constexpr int kDefaultMmapThreshold = 128 * 1024;
constexpr int kDefaultTrimThreshold = 128 * 1024;
constexpr int64_t kClasses = 10;

// P float32 parameters shaped like a small network (most in one matrix), plus a
// float buffer, so hooks that need a model have one.
class SyntheticModel : public fl::Model {
 public:
  explicit SyntheticModel(int64_t p) {
    const int64_t hidden = std::max<int64_t>(1, p * 9 / 10 / (kInputs + 1 + kClasses));
    w1_ = register_parameter("layer1_weight", at::randn({hidden, kInputs}).mul_(0.03));
    b1_ = register_parameter("layer1_bias", at::zeros({hidden}));
    w2_ = register_parameter("layer2_weight", at::randn({kClasses, hidden}).mul_(0.03));
    const int64_t used = hidden * (kInputs + 1 + kClasses);
    pad_ = register_parameter("embedding", at::randn({std::max<int64_t>(1, p - used)}).mul_(0.03));
    register_buffer("norm_running_mean", at::zeros({hidden}));
  }
  at::Tensor Forward(const at::Tensor& x) override {
    return at::linear(at::relu(at::linear(x.flatten(1), w1_, b1_)), w2_) + pad_.sum() * 0;
  }

 private:
  at::Tensor w1_, b1_, w2_, pad_;
};

void Sync(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// Peak resident memory since the last ResetPeak(), in bytes (VmHWM). It sees
// every page the process touched (torch's CPU allocator included), not GPU
// memory. MeasurePeakExtra makes glibc serve every allocation over 64 KiB with
// its own mmap meanwhile, so memory freed by earlier rounds cannot hide one.
int64_t PeakRss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}
int64_t CurrentRss() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}
bool ResetPeak() { return static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5"); }

struct Fixture {
  std::unique_ptr<SyntheticModel> model;
  fl::ModelState global;
  std::vector<fl::ClientUpdate> updates;
};

// K updates as fl::LocalTrainer would produce them (random deltas instead of
// training), with the extras of the hooks `planner`'s RoundPlan names.
absl::StatusOr<Fixture> MakeFixture(fl::Aggregator& planner, int k, int64_t p,
                                    const c10::Device& device) {
  Fixture f;
  at::manual_seed(1);
  f.model = std::make_unique<SyntheticModel>(p);
  f.model->to(device);
  f.global = fl::ModelState::FromModule(*f.model);
  fl::ServerContext context;
  context.round = 1;
  context.device = device;
  context.num_clients = k;
  auto plan = planner.Configure(f.global, context);
  if (!plan.ok()) return plan.status();
  fl::ClientStateStore store;
  fl::Examples examples{at::randn({4, kInputs}, device), at::zeros({4}, at::TensorOptions(device).dtype(at::kLong))};
  for (int c = 0; c < k; ++c) {
    std::vector<int64_t> indices = {0, 1, 2, 3};
    std::vector<std::pair<std::string, std::unique_ptr<fl::ClientHook>>> hooks;
    std::vector<fl::HookContext> contexts;
    for (const fl::HookRequest& request : plan->hooks) {
      auto hook = fl::Registry<fl::ClientHook>::Global().Create(request.name, request.options);
      if (!hook.ok()) return hook.status();
      fl::HookContext hc;
      hc.client_id = c;
      hc.round = 1;
      hc.model = f.model.get();
      hc.global = &f.global;
      hc.broadcast = &plan->broadcast;
      hc.state = &store.Get(c, request.name);
      hc.examples = &examples;
      hc.train_indices = &indices;
      hc.learning_rate = 0.1;
      hooks.emplace_back(request.name, *std::move(hook));
      contexts.push_back(hc);
    }
    for (size_t h = 0; h < hooks.size(); ++h) {
      if (auto s = hooks[h].second->BeforeTraining(contexts[h]); !s.ok()) return s;
    }
    fl::ClientUpdate update;
    update.client_id = c;
    update.num_examples = 50 + c;
    update.local_steps = 10;
    update.delta = f.global.ZerosLike();
    for (auto& e : update.delta.mutable_entries()) e.tensor.uniform_(-0.01, 0.01);
    for (size_t h = 0; h < hooks.size(); ++h) {
      if (auto s = hooks[h].second->AfterTraining(contexts[h], update); !s.ok()) return s;
    }
    update.bytes_sent = update.delta.NumBytes() + fl::NumBytes(update.extras);
    f.updates.push_back(std::move(update));
  }
  return f;
}

absl::Status Aggregate(fl::Aggregator& aggregator, const Fixture& f, fl::ServerContext& context) {
  auto plan = aggregator.Configure(f.global, context);
  if (!plan.ok()) return plan.status();
  for (const fl::ClientUpdate& u : f.updates) {
    // A copy shares the tensors: nothing is duplicated.
    if (auto s = aggregator.Accumulate(u, context); !s.ok()) return s;
  }
  auto next = aggregator.Finalize(f.global, context);
  return next.status();
}

int64_t Iterations(int k, int64_t p) {
  const double bytes = 4.0 * k * p;
  return std::clamp<int64_t>(static_cast<int64_t>(4e9 / bytes), 2, 200);
}

void SetCounters(benchmark::State& state, int k, int64_t p) {
  state.SetBytesProcessed(state.iterations() * int64_t{k} * p * 4);
  state.SetItemsProcessed(state.iterations() * int64_t{k} * p);
  // (K P / 1e9) per iteration, as an inverted rate: elapsed ns / (iterations K P).
  state.counters["ns_per_client_param"] = benchmark::Counter(
      double(k) * p / 1e9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BenchAggregate(benchmark::State& state, std::string name, int k, int64_t p, c10::Device device) {
  auto created = fl::Registry<fl::Aggregator>::Global().Create(name, google::protobuf::Any());
  auto planner = fl::Registry<fl::Aggregator>::Global().Create(name, google::protobuf::Any());
  if (!created.ok() || !planner.ok()) {
    state.SkipWithError(std::string(created.status().message()).c_str());
    return;
  }
  auto fixture = MakeFixture(**planner, k, p, device);
  if (!fixture.ok()) {
    state.SkipWithError(absl::StrCat(name, ": ", fixture.status().message()).c_str());
    return;
  }
  fl::Aggregator& aggregator = **created;
  fl::ServerContext context;
  context.device = device;
  context.num_clients = k;
  context.new_model = [p, device]() -> absl::StatusOr<std::unique_ptr<fl::Model>> {
    auto m = std::make_unique<SyntheticModel>(p);
    m->to(device);
    return std::unique_ptr<fl::Model>(std::move(m));
  };
  int round = 0;
  for (auto _ : state) {
    context.round = ++round;
    if (auto s = Aggregate(aggregator, *fixture, context); !s.ok()) {
      state.SkipWithError(absl::StrCat(name, ": ", s.message()).c_str());
      return;
    }
    Sync(device);
  }
  SetCounters(state, k, p);
  // One more, untimed, for the memory it needs beyond the updates it reads.
  mallopt(M_MMAP_THRESHOLD, 1 << 16);
  mallopt(M_TRIM_THRESHOLD, 0);
  malloc_trim(0);
  const int64_t before = CurrentRss();
  if (ResetPeak()) {
    context.round = ++round;
    (void)Aggregate(aggregator, *fixture, context);
    state.counters["peak_extra_mb"] = (PeakRss() - before) / 1048576.0;
  }
  mallopt(M_MMAP_THRESHOLD, kDefaultMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kDefaultTrimThreshold);
}

void BenchRead(benchmark::State& state, int k, int64_t p, c10::Device device) {
  std::vector<at::Tensor> updates;
  for (int c = 0; c < k; ++c) updates.push_back(at::empty({p}, device).uniform_(-0.01, 0.01));
  for (auto _ : state) {
    at::Tensor total = at::zeros({}, device);
    for (const at::Tensor& u : updates) total.add_(u.sum());
    benchmark::DoNotOptimize(total.item<float>());
  }
  SetCounters(state, k, p);
}

void BenchStream(benchmark::State& state, int k, int64_t p, c10::Device device) {
  std::vector<at::Tensor> updates;
  for (int c = 0; c < k; ++c) updates.push_back(at::empty({p}, device).uniform_(-0.01, 0.01));
  at::Tensor sum = at::zeros({p}, device);
  for (auto _ : state) {
    sum.zero_();
    for (int c = 0; c < k; ++c) sum.add_(updates[c], 50.0 + c);
    Sync(device);
    benchmark::DoNotOptimize(sum.data_ptr());
  }
  SetCounters(state, k, p);
}

void BenchMatmul(benchmark::State& state, int64_t n, c10::Device device) {
  const at::Tensor a = at::randn({n, n}, device);
  const at::Tensor b = at::randn({n, n}, device);
  for (auto _ : state) {
    at::Tensor c = a.matmul(b);
    Sync(device);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_params = int64_t{1} << 62;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max_params=", 13) == 0) {
      max_params = std::stoll(argv[i] + 13);
    } else {
      args.push_back(argv[i]);
    }
  }
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());

  std::vector<c10::Device> devices = {c10::Device(c10::kCPU)};
  if (torch::cuda::is_available()) devices.emplace_back(c10::kCUDA);
  for (const c10::Device& device : devices) {
    const std::string dev = device.is_cuda() ? "cuda" : "cpu";
    for (int64_t p : {int64_t{100'000}, int64_t{1'600'000}, int64_t{11'000'000}}) {
      if (p > max_params) continue;
      for (int k : {10, 100}) {
        const std::string shape = absl::StrCat("K:", k, "/P:", p, "/", dev);
        for (const std::string& name : fl::Registry<fl::Aggregator>::Global().Names()) {
          benchmark::RegisterBenchmark(absl::StrCat("aggregate/", name, "/", shape).c_str(),
                                       BenchAggregate, name, k, p, device)
              ->UseRealTime()
              ->Iterations(Iterations(k, p))
              ->Unit(benchmark::kMillisecond);
        }
        benchmark::RegisterBenchmark(absl::StrCat("bound/read/", shape).c_str(), BenchRead, k, p, device)
            ->UseRealTime()
            ->Iterations(Iterations(k, p))
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(absl::StrCat("bound/stream/", shape).c_str(), BenchStream, k, p, device)
            ->UseRealTime()
            ->Iterations(Iterations(k, p))
            ->Unit(benchmark::kMillisecond);
      }
    }
    benchmark::RegisterBenchmark(absl::StrCat("bound/matmul/N:1024/", dev).c_str(), BenchMatmul, 1024, device)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
