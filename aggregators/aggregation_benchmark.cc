// What one aggregation round costs, for every registered aggregator, next to the
// machine's physical bounds, in one Google Benchmark binary:
//
//   aggregate/<name>/K:<k>/P:<p>/<device>  Configure + K x Accumulate + Finalize
//   aggregate_proxy/<name>/K:<k>/P:<p>/proxy:<n>/<device>
//                                          the same round of a method that trains on
//                                          a server proxy set of n examples
//   bound/read/K:<k>/P:<p>/<device>        at::sum of every update: read each once
//   bound/stream/K:<k>/P:<p>/<device>      sum_k n_k u_k into one buffer, then
//                                          global + sum / sum_k n_k: the least a
//                                          streaming weighted mean can do
//   bound/matmul/N:<n>/<device>            square float32 matmul (compute roofline)
//
// for K in {10, 100} clients and P in {0.1M, 1.6M, 11M} float32 parameters, on the
// CPU and, where torch::cuda::is_available(), on CUDA. The aggregators come from
// fl::Registry<fl::Aggregator> at start-up, so a newly linked one is measured with no
// code here, with its default options. Every aggregate row reads the same K x P
// floats, so compare bytes_per_second (or ns_per_client_param) of an aggregate row
// with the bound rows of the same shape: ratios within one run are meaningful;
// absolute numbers depend on the machine and its load (Debian's libbenchmark is a
// debug build and says so; that does not touch the code being timed).
//
// An aggregator whose properties() declare uses_proxy (FedLAW, Server-FT, FedDF, or
// Elastic over one of them) spends its round in forward/backward passes of the model
// over the proxy set, not in a pass over the updates: it gets the aggregate_proxy
// family instead, timed end to end (for about a second, not a byte budget) on a grid
// that shows its scaling in P and proxy size at K = 10 and in K at P = 0.1M
// (kProxyGrid), with a proxy of random inputs of the synthetic model's shape and
// random labels. The family is chosen by the declared property rather than by
// watching what a round touches, so the choice is made before anything runs and
// names no plugin. The element-wise rows lend no proxy, so an aggregator that needs
// one but does not say so fails its row (and the conformance suite).
//
// Counters: bytes_per_second (K P 4 bytes of client deltas per round), items_per_second
// (client parameters per second), ns_per_client_param (wall ns / (K P); the console
// prints it with SI prefixes, "250m" = 0.25 ns), peak_extra_mb (the peak resident
// memory one round adds on top of its inputs, CPU rows only, see MeasurePeakExtra)
// state_mb (what SaveState holds between rounds) and input_mb (what the K clients
// send per round: deltas plus the extras the aggregator's hooks add, such as
// SCAFFOLD's control variates or Elastic's sensitivities, so an aggregator reading
// more than K P floats shows it). matmul rows report FLOPS.
// aggregate_proxy rows count the forward passes of the server models the round
// builds through ServerContext::new_model: server_steps (passes with gradients, i.e.
// training steps, per round), ns_per_server_step (round time / server_steps),
// ns_per_proxy_example (round time / examples those steps saw: the time per proxy
// example-epoch) and eval_examples (examples forwarded without gradients per round:
// proxy losses, FedDF's K teachers).
//
//   bazel run -c opt //aggregators:aggregation_benchmark -- --benchmark_format=json --benchmark_out=/tmp/agg.json
//   bazel run -c opt //aggregators:aggregation_benchmark -- --benchmark_filter='fedavg|bound' --max_params=1600000
//
// //fl/python:python_aggregation_benchmark is this benchmark with the Python
// example aggregators registered too (python_fedavg, ...).
//
// --max_params=N leaves out shapes with P > N (a quick run: --max_params=100000).
// Every Google Benchmark flag works as usual; the output on stdout is Google
// Benchmark's alone, so --benchmark_format=json stays parseable. Each row times about
// 2 GB of updates (at least 2 rounds); a full CPU run (62 rows) took 70 s on the 2-core
// development machine, half of it on the K = 100, P = 11M shape, whose inputs are
// 4.4 GB (8.8 GB with SCAFFOLD's control variates: the run peaks at about 9 GB RSS).
// The 18 aggregate_proxy rows took about 1.5 minutes more on that machine while
// it was busy with other runs; FedLAW's default 20 epochs over a 1000-example proxy
// of the 1.6M model, its costliest row, is about 6 s per round there.

#include "aggregators/aggregation_benchmark.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/client_update.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace {

constexpr int kClientCounts[] = {10, 100};
constexpr int64_t kParameterCounts[] = {100'000, 1'600'000, 11'000'000};
// What fl::LocalTrainer would have run on each client, as its hooks see it.
constexpr double kLocalLearningRate = 0.1;
constexpr int64_t kLocalSteps = 10;
// Clients in the federation (SCAFFOLD scales its control-variate step by K / N).
constexpr int kFederationSize = 1000;
// A tiny example set, for hooks that look at a client's data (SCAFFOLD's option I,
// Elastic's sensitivity).
constexpr int64_t kDummyExamples = 8;
// The aggregate_proxy shapes: K, P and proxy size (200 is FedLAW's default proxy:
// 200 class-balanced test images). Scaling in P and proxy size at K = 10, in K at
// P = 0.1M; few points, since each round is Es epochs of the model over the proxy.
struct ProxyShape {
  int k = 0;
  int64_t p = 0;
  int64_t proxy = 0;
};
constexpr ProxyShape kProxyGrid[] = {
    {10, 100'000, 200},   {10, 100'000, 1000},  {10, 1'600'000, 200},
    {10, 1'600'000, 1000}, {20, 100'000, 200},  {100, 100'000, 200},
};
// An aggregate_proxy row times rounds until they add up to this many seconds (at
// least one round), as Google Benchmark does by default: its rounds take from tens
// of milliseconds to seconds.
constexpr double kProxyMinSeconds = 1.0;
// Bytes of client deltas each aggregate/stream/read row reads in its timed rounds;
// at least kMinRounds rounds. 2 GB is 2 rounds of the largest shape (4.4 GB each).
constexpr double kTimedBytes = 2e9;
constexpr int64_t kMinRounds = 2;
constexpr int64_t kMaxRounds = 1000;

// ---------------------------------------------------------------------------
// The synthetic model: an MLP inputs -> hidden -> hidden -> classes with exactly P
// float32 parameters (two square-ish matrices hold almost all of them, as in a real
// network) and a small float buffer, a centring of the first layer like BatchNorm's
// running mean.

struct Shape {
  int64_t inputs = 0;
  int64_t hidden = 0;
  int64_t classes = 0;
};

// P = hidden (inputs + 1) + hidden (hidden + 1) + classes (hidden + 1)
//   = hidden (inputs + hidden + classes + 2) + classes.
// Picks hidden ~ sqrt(P / 3) dividing P - 10, for a 10-class head; where no such
// divisor is near, the head takes the remainder (P mod hidden classes).
Shape ShapeFor(int64_t p) {
  const auto target = static_cast<int64_t>(std::lround(std::sqrt(p / 3.0)));
  for (int64_t offset = 0; offset <= target / 3; ++offset) {
    for (int64_t hidden : {target + offset, target - offset}) {
      constexpr int64_t kClasses = 10;
      if (hidden < 1 || (p - kClasses) % hidden != 0) continue;
      const int64_t inputs = (p - kClasses) / hidden - hidden - kClasses - 2;
      if (inputs >= 1) return {inputs, hidden, kClasses};
    }
  }
  Shape shape;
  shape.hidden = std::max<int64_t>(1, target);
  shape.classes = p % shape.hidden;
  if (shape.classes < 2) shape.classes += shape.hidden;
  shape.inputs = (p - shape.classes) / shape.hidden - shape.hidden - shape.classes - 2;
  return shape;
}

// Forward passes of the server models a round builds: those with gradients are
// training steps, the others evaluations.
struct ForwardCounts {
  int64_t train_calls = 0;
  int64_t train_examples = 0;
  int64_t eval_examples = 0;
};

class SyntheticModel : public fl::Model {
 public:
  // `counts` (may be null) must outlive the model.
  explicit SyntheticModel(const Shape& s, ForwardCounts* counts = nullptr) : counts_(counts) {
    CHECK_GE(s.inputs, 1) << "model too small for its shape";
    w1_ = register_parameter("fc1_weight", at::empty({s.hidden, s.inputs}).normal_(0, 0.02));
    b1_ = register_parameter("fc1_bias", at::zeros({s.hidden}));
    w2_ = register_parameter("fc2_weight", at::empty({s.hidden, s.hidden}).normal_(0, 0.02));
    b2_ = register_parameter("fc2_bias", at::zeros({s.hidden}));
    w3_ = register_parameter("head_weight", at::empty({s.classes, s.hidden}).normal_(0, 0.02));
    b3_ = register_parameter("head_bias", at::zeros({s.classes}));
    mean_ = register_buffer("fc1_running_mean", at::zeros({s.hidden}));
  }

  at::Tensor Forward(const at::Tensor& x) override {
    if (counts_ != nullptr) {
      if (at::GradMode::is_enabled()) {
        ++counts_->train_calls;
        counts_->train_examples += x.size(0);
      } else {
        counts_->eval_examples += x.size(0);
      }
    }
    at::Tensor h = at::relu(at::linear(x.flatten(1), w1_, b1_) - mean_);
    h = at::relu(at::linear(h, w2_, b2_));
    return at::linear(h, w3_, b3_);
  }

  absl::StatusOr<std::vector<LayerInput>> LayerInputs(const at::Tensor& x) override {
    const at::Tensor in = x.flatten(1);
    const at::Tensor h1 = at::relu(at::linear(in, w1_, b1_) - mean_);
    const at::Tensor h2 = at::relu(at::linear(h1, w2_, b2_));
    return std::vector<LayerInput>{{"fc1_weight", "fc1_bias", in, {}},
                                   {"fc2_weight", "fc2_bias", h1, {}},
                                   {"head_weight", "head_bias", h2, {}}};
  }

 private:
  at::Tensor w1_, b1_, w2_, b2_, w3_, b3_, mean_;
  ForwardCounts* counts_;
};

std::string DeviceName(const at::Device& device) { return device.is_cuda() ? "cuda" : "cpu"; }

void Sync(const at::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

// LibTorch throws (out of memory, shape errors); the benchmark reports, never dies.
absl::Status Guard(const std::function<absl::Status()>& f) {
  try {
    return f();
  } catch (const c10::Error& e) {
    return absl::InternalError(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return absl::InternalError(e.what());
  }
}

// ---------------------------------------------------------------------------
// Inputs shared by every row of one (K, P, device): the global model and K random
// client deltas. Building them is the slow part of the binary (K P normal samples),
// so the last shape's inputs are kept and reused by the next row of the same shape;
// rows are registered shape by shape.

struct Inputs {
  int k = 0;
  int64_t p = 0;
  at::Device device = at::kCPU;
  Shape shape;
  std::unique_ptr<SyntheticModel> model;  // the local replica hooks see
  fl::ModelState global;
  std::vector<fl::ModelState> deltas;
  std::vector<int64_t> num_examples;
  fl::Examples examples;  // kDummyExamples, on `device`
};

std::unique_ptr<Inputs>& CachedInputs() {
  static auto* const inputs = new std::unique_ptr<Inputs>;
  return *inputs;
}

absl::StatusOr<Inputs*> GetInputs(int k, int64_t p, const at::Device& device) {
  std::unique_ptr<Inputs>& cached = CachedInputs();
  if (cached != nullptr && cached->k == k && cached->p == p && cached->device == device) {
    return cached.get();
  }
  cached.reset();  // free the last shape's inputs before making the next
  auto inputs = std::make_unique<Inputs>();
  absl::Status status = Guard([&]() -> absl::Status {
    at::NoGradGuard no_grad;
    at::manual_seed(static_cast<uint64_t>(k) * 1'000'003 + static_cast<uint64_t>(p));
    inputs->k = k;
    inputs->p = p;
    inputs->device = device;
    inputs->shape = ShapeFor(p);
    inputs->model = std::make_unique<SyntheticModel>(inputs->shape);
    inputs->model->to(device);
    inputs->global = fl::ModelState::FromModule(*inputs->model);
    if (inputs->global.NumParameters() != p) {
      return absl::InternalError(absl::StrCat("synthetic model has ",
                                              inputs->global.NumParameters(),
                                              " parameters, wanted ", p));
    }
    // Data sizes vary per client, so size-weighted means have unequal weights.
    std::mt19937_64 rng(static_cast<uint64_t>(k) * 7919 + static_cast<uint64_t>(p));
    std::uniform_int_distribution<int64_t> num_examples(20, 600);
    for (int c = 0; c < k; ++c) {
      std::vector<fl::ModelState::Entry> entries;
      for (const fl::ModelState::Entry& e : inputs->global.entries()) {
        entries.push_back({e.name, at::empty_like(e.tensor).normal_(0, 1e-3), e.is_buffer});
      }
      inputs->deltas.emplace_back(std::move(entries));
      inputs->num_examples.push_back(num_examples(rng));
    }
    const at::TensorOptions on_device = at::TensorOptions().device(device);
    inputs->examples = {at::randn({kDummyExamples, inputs->shape.inputs}, on_device),
                        at::randint(0, inputs->shape.classes, {kDummyExamples},
                                    on_device.dtype(at::kLong))};
    Sync(device);
    return absl::OkStatus();
  });
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("making K = ", k, " random updates of P = ",
                                                    p, ": ", status.message()));
  }
  cached = std::move(inputs);
  return cached.get();
}

// A server proxy set of n examples shaped like the synthetic model's inputs, with
// random labels: the proxy methods' cost depends on its size, not its content.
absl::StatusOr<fl::Examples> MakeProxy(const Shape& shape, int64_t n, const at::Device& device) {
  fl::Examples proxy;
  absl::Status status = Guard([&] {
    at::manual_seed(static_cast<uint64_t>(n));
    const at::TensorOptions on_device = at::TensorOptions().device(device);
    proxy = {at::randn({n, shape.inputs}, on_device),
             at::randint(0, shape.classes, {n}, on_device.dtype(at::kLong))};
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return proxy;
}

// ---------------------------------------------------------------------------
// Client updates for one aggregator: the shared deltas plus whatever the hooks its
// RoundPlan names add, each hook run as fl::LocalTrainer runs it (replica loaded
// with the global weights, BeforeTraining, then AfterTraining on an update with
// local_steps = kLocalSteps), minus the training itself.

absl::StatusOr<std::vector<fl::ClientUpdate>> MakeUpdates(const std::string& name,
                                                          Inputs& inputs,
                                                          fl::ServerContext context) {
  std::vector<fl::ClientUpdate> updates;
  absl::Status status = Guard([&]() -> absl::Status {
    // A planner of its own, so the measured instance starts its round 1 untouched.
    FL_ASSIGN_OR_RETURN(std::unique_ptr<fl::Aggregator> planner,
                        fl::Registry<fl::Aggregator>::Global().Create(name, {}));
    context.round = 1;
    FL_ASSIGN_OR_RETURN(const fl::RoundPlan plan, planner->Configure(inputs.global, context));
    for (int c = 0; c < inputs.k; ++c) {
      fl::ClientUpdate update;
      update.client_id = c;
      update.delta = inputs.deltas[c];  // shares the tensors
      update.num_examples = inputs.num_examples[c];
      update.local_steps = kLocalSteps;
      if (!plan.hooks.empty()) {
        FL_RETURN_IF_ERROR(inputs.global.LoadInto(*inputs.model));
        // Round 1 is every client's first, so each starts with empty hook state;
        // states per client let it (SCAFFOLD's c_i, P floats) go once the client is
        // done instead of piling up K P floats the rows never read.
        std::vector<fl::TensorMap> states(plan.hooks.size());
        std::vector<int64_t> indices(kDummyExamples);
        std::iota(indices.begin(), indices.end(), 0);
        const std::vector<int64_t> share = indices;
        std::vector<std::pair<std::string, std::unique_ptr<fl::ClientHook>>> hooks;
        std::vector<fl::HookContext> contexts;
        for (const fl::HookRequest& request : plan.hooks) {
          FL_ASSIGN_OR_RETURN(std::unique_ptr<fl::ClientHook> hook,
                              fl::Registry<fl::ClientHook>::Global().Create(request.name,
                                                                            request.options));
          fl::HookContext hc;
          hc.client_id = c;
          hc.round = 1;
          hc.model = inputs.model.get();
          hc.global = &inputs.global;
          hc.broadcast = &plan.broadcast;
          hc.state = &states[hooks.size()];
          hc.examples = &inputs.examples;
          hc.client_indices = &share;
          hc.train_indices = &indices;
          hc.seed = fl::DeriveSeed(static_cast<uint64_t>(c), fl::SeedStream::kHook,
                                   {hooks.size()});
          hc.learning_rate = kLocalLearningRate;
          hc.batch_size = kDummyExamples;
          hooks.emplace_back(request.name, std::move(hook));
          contexts.push_back(hc);
        }
        for (size_t h = 0; h < hooks.size(); ++h) {
          absl::Status s = hooks[h].second->BeforeTraining(contexts[h]);
          if (!s.ok()) {
            return absl::Status(s.code(), absl::StrCat("client ", c, ": client hook \"",
                                                       hooks[h].first,
                                                       "\" before training: ", s.message()));
          }
        }
        for (size_t h = 0; h < hooks.size(); ++h) {
          absl::Status s = hooks[h].second->AfterTraining(contexts[h], update);
          if (!s.ok()) {
            return absl::Status(s.code(), absl::StrCat("client ", c, ": client hook \"",
                                                       hooks[h].first,
                                                       "\" after training: ", s.message()));
          }
        }
      }
      update.bytes_sent = update.delta.NumBytes() + fl::NumBytes(update.extras);
      updates.push_back(std::move(update));
    }
    Sync(inputs.device);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return updates;
}

std::vector<fl::ClientUpdate> DeepCopy(const std::vector<fl::ClientUpdate>& updates) {
  std::vector<fl::ClientUpdate> copies;
  copies.reserve(updates.size());
  for (const fl::ClientUpdate& u : updates) copies.push_back(fl::CloneUpdate(u));
  return copies;
}

// The version counters of every input tensor: an in-place write bumps them. Rows
// pass the same tensors to every round (copies of a ClientUpdate share storage), so
// an aggregator that writes into an update it was handed (legal: Accumulate owns
// it) would change the next round's inputs; such a row clones its inputs instead.
std::vector<int64_t> Versions(const fl::ModelState& global,
                              const std::vector<fl::ClientUpdate>& updates) {
  std::vector<int64_t> versions;
  for (const auto& e : global.entries()) versions.push_back(e.tensor._version());
  for (const fl::ClientUpdate& u : updates) {
    for (const auto& e : u.delta.entries()) versions.push_back(e.tensor._version());
    for (const auto& [name, extra] : u.extras) {
      for (const auto& e : extra.entries()) versions.push_back(e.tensor._version());
    }
  }
  return versions;
}

// One full round, as fl::Server runs it once the updates are in.
absl::Status RunRound(fl::Aggregator& aggregator, const fl::ModelState& global,
                      const std::vector<fl::ClientUpdate>& updates, fl::ServerContext& context) {
  return Guard([&]() -> absl::Status {
    context.diagnostics.clear();
    context.evaluation_model.reset();
    FL_RETURN_IF_ERROR(aggregator.Configure(global, context).status());
    for (const fl::ClientUpdate& update : updates) {
      absl::Status s = aggregator.Accumulate(update, context);  // a copy: shares the tensors
      if (!s.ok()) {
        return absl::Status(s.code(), absl::StrCat("client ", update.client_id, ": ", s.message()));
      }
    }
    return aggregator.Finalize(global, context).status();
  });
}

// ---------------------------------------------------------------------------
// Peak memory.
//
// The resident-set high-water mark (VmHWM in /proc/self/status), reset by writing
// "5" to /proc/self/clear_refs just before one untimed round, rather than glibc's
// mallinfo2(): mallinfo2 reports what is allocated *now*, so a peak would need
// sampling between calls and would miss what lives and dies inside one Accumulate or
// Finalize (a Clone() before scaling, a flattened copy of every update), which is
// where an aggregator's extra memory hides. VmHWM is a true peak over the whole call
// with no instrumentation.
//
// What it sees: every page the process touches, from glibc's heaps and mmap'ed chunks
// alike, LibTorch's CPU allocator (which allocates through glibc), OpenBLAS and
// OpenMP buffers and thread stacks; what glibc's fragmentation adds; whole pages.
// What it cannot see: GPU memory (CUDA rows leave the counter out: the CUDA caching
// allocator's statistics need c10_cuda, which the CPU LibTorch lacks); memory that is
// allocated but never written (not resident, and free); and memory glibc already holds
// free from earlier rounds and hands out again, since reusing it does not raise the
// RSS, which is why malloc_trim(0) first returns every free page in every arena to
// the kernel (glibc madvises the free chunks), so that reusing them faults pages in
// and counts. It also counts anything else the process does meanwhile (nothing here).
// The baseline is the RSS after the trim, which holds the inputs and the aggregator's
// persistent state; what the round returns (the new global model) counts as extra.
//
// Returns bytes, or nullopt where /proc does not let us reset the mark (Linux < 4.0).
// A "Vm...:  123 kB" field of /proc/self/status, in kB; -1 if absent.
int64_t ProcStatusKb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, field.size(), field) != 0) continue;
    int64_t kb = -1;
    std::istringstream(line.substr(field.size())) >> kb;
    return kb;
  }
  return -1;
}

std::optional<int64_t> MeasurePeakExtra(const std::function<void()>& round) {
  malloc_trim(0);
  const int64_t before_kb = ProcStatusKb("VmRSS:");
  {
    std::ofstream clear_refs("/proc/self/clear_refs");
    if (!(clear_refs << "5" << std::flush)) return std::nullopt;
  }
  round();
  const int64_t peak_kb = ProcStatusKb("VmHWM:");
  if (before_kb < 0 || peak_kb < 0) return std::nullopt;
  return std::max<int64_t>(0, peak_kb - before_kb) * 1024;
}

// ---------------------------------------------------------------------------
// The rows.

int64_t RoundsFor(int k, int64_t p) {
  const double bytes = 4.0 * k * static_cast<double>(p);
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(kTimedBytes / bytes)), kMinRounds,
                             kMaxRounds);
}

void SetThroughput(benchmark::State& state, int k, int64_t p, double elapsed_ns) {
  const int64_t client_params = state.iterations() * k * p;
  state.SetBytesProcessed(client_params * 4);
  state.SetItemsProcessed(client_params);
  state.counters["ns_per_client_param"] = elapsed_ns / static_cast<double>(client_params);
}

void Skip(benchmark::State& state, const std::string& row, const absl::Status& status) {
  state.SkipWithError(absl::StrCat(row, ": ", status.message()).c_str());
}

// One row of the aggregate family (proxy_size == 0: no proxy lent) or of the
// aggregate_proxy family (a proxy of proxy_size random examples).
void BenchAggregate(benchmark::State& state, const std::string& name, int k, int64_t p,
                    int64_t proxy_size, const at::Device& device) {
  const std::string row = absl::StrCat("aggregator \"", name, "\"");
  absl::StatusOr<Inputs*> inputs = GetInputs(k, p, device);
  if (!inputs.ok()) return Skip(state, row, inputs.status());
  // Outlive the aggregator, whose server models point at them.
  ForwardCounts counts;
  fl::Examples proxy;
  auto created = fl::Registry<fl::Aggregator>::Global().Create(name, {});
  if (!created.ok()) return Skip(state, row, created.status());
  fl::Aggregator& aggregator = **created;

  fl::ServerContext context;
  context.device = device;
  context.num_clients = kFederationSize;
  const Shape shape = (*inputs)->shape;
  context.new_model = [shape, device,
                       &counts]() -> absl::StatusOr<std::unique_ptr<fl::Model>> {
    auto model = std::make_unique<SyntheticModel>(shape, &counts);
    model->to(device);
    return std::unique_ptr<fl::Model>(std::move(model));
  };
  if (proxy_size > 0) {
    absl::StatusOr<fl::Examples> made = MakeProxy(shape, proxy_size, device);
    if (!made.ok()) return Skip(state, row, made.status());
    proxy = *std::move(made);
    context.proxy = &proxy;
  }

  absl::StatusOr<std::vector<fl::ClientUpdate>> updates = MakeUpdates(name, **inputs, context);
  if (!updates.ok()) return Skip(state, row, updates.status());

  // Round 1, untimed: allocates the aggregator's persistent state (moments, control
  // variates, server models) and wakes LibTorch's thread pool, as in any round after
  // the first.
  int round = 0;
  auto next_round = [&] {
    context.round = ++round;
    context.round_seed = fl::DeriveSeed(1, fl::SeedStream::kServerRound, {uint64_t(round)});
  };
  const std::vector<int64_t> versions = Versions((*inputs)->global, *updates);
  next_round();
  absl::Status status = RunRound(aggregator, (*inputs)->global, *updates, context);
  if (!status.ok()) return Skip(state, row, status);
  const bool clone_inputs = Versions((*inputs)->global, *updates) != versions;
  if (clone_inputs) {
    // Round 1 changed the shared inputs: make them afresh for this and later rows.
    updates->clear();
    CachedInputs().reset();
    inputs = GetInputs(k, p, device);
    if (!inputs.ok()) return Skip(state, row, inputs.status());
    updates = MakeUpdates(name, **inputs, context);
    if (!updates.ok()) return Skip(state, row, updates.status());
    state.SetLabel("writes into its inputs: each round gets fresh copies, made untimed");
  }
  const fl::ModelState& global = (*inputs)->global;

  std::vector<fl::ClientUpdate> copies;
  auto round_inputs = [&]() -> const std::vector<fl::ClientUpdate>& {
    return clone_inputs ? copies : *updates;
  };
  counts = {};
  double elapsed_ns = 0;
  for (auto _ : state) {
    if (clone_inputs) {
      state.PauseTiming();
      copies.clear();  // last round's copies go here, not in the timed region
      copies = DeepCopy(*updates);
      state.ResumeTiming();
    }
    const auto start = std::chrono::steady_clock::now();
    next_round();
    status = RunRound(aggregator, global, round_inputs(), context);
    Sync(device);
    elapsed_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                      .count();
    if (!status.ok()) {
      Skip(state, row, status);
      break;
    }
  }
  if (!status.ok()) return;
  if (proxy_size == 0) {
    SetThroughput(state, k, p, elapsed_ns);
  } else {
    const auto rounds = static_cast<double>(state.iterations());
    state.counters["server_steps"] = counts.train_calls / rounds;
    state.counters["eval_examples"] = counts.eval_examples / rounds;
    if (counts.train_calls > 0) {
      state.counters["ns_per_server_step"] = elapsed_ns / static_cast<double>(counts.train_calls);
      state.counters["ns_per_proxy_example"] =
          elapsed_ns / static_cast<double>(counts.train_examples);
    }
  }

  if (!device.is_cuda()) {
    if (clone_inputs) {
      copies.clear();
      copies = DeepCopy(*updates);
    }
    std::optional<int64_t> peak = MeasurePeakExtra([&] {
      next_round();
      status = RunRound(aggregator, global, round_inputs(), context);
    });
    if (!status.ok()) return Skip(state, row, status);
    if (peak.has_value()) state.counters["peak_extra_mb"] = *peak / 1048576.0;
  }
  int64_t state_bytes = 0;
  for (const auto& [key, tensor] : aggregator.SaveState()) state_bytes += tensor.nbytes();
  state.counters["state_mb"] = state_bytes / 1048576.0;
  int64_t input_bytes = 0;
  for (const fl::ClientUpdate& u : *updates) input_bytes += u.bytes_sent;
  state.counters["input_mb"] = input_bytes / 1048576.0;
}

// Runs `pass` once untimed, then once per iteration, timing each; `keep` keeps its
// result alive. Sets the throughput counters unless a pass fails.
template <typename Pass, typename Keep>
void TimePasses(benchmark::State& state, const char* name, int k, int64_t p, Pass pass, Keep keep) {
  absl::Status status = pass();  // warm-up
  if (!status.ok()) return Skip(state, name, status);
  double elapsed_ns = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    status = pass();
    elapsed_ns += std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                      .count();
    if (!status.ok()) {
      Skip(state, name, status);
      break;
    }
    keep();
  }
  if (status.ok()) SetThroughput(state, k, p, elapsed_ns);
}

// Reads every element of every update once: the floor for any method that looks at
// all of them.
void BenchRead(benchmark::State& state, int k, int64_t p, const at::Device& device) {
  absl::StatusOr<Inputs*> inputs = GetInputs(k, p, device);
  if (!inputs.ok()) return Skip(state, "bound/read", inputs.status());
  float total = 0;
  auto pass = [&]() -> absl::Status {
    return Guard([&] {
      at::Tensor sum = at::scalar_tensor(0.0, at::TensorOptions().device(device));
      for (const fl::ModelState& delta : (*inputs)->deltas) {
        for (const auto& e : delta.entries()) sum.add_(e.tensor.sum());
      }
      total = sum.item<float>();
      return absl::OkStatus();
    });
  };
  TimePasses(state, "bound/read", k, p, pass, [&] { benchmark::DoNotOptimize(total); });
}

// A size-weighted mean of updates that arrive one at a time, done as cheaply as
// ATen can: sum = n_1 u_1 (one fused pass), sum += n_k u_k (one fused axpy each),
// next = global + sum / sum_k n_k (one fused pass), into buffers allocated once.
// Per round that reads K P update floats once, plus the running sum's read and write
// per update (unavoidable when updates stream in and P floats outgrow the cache), and
// writes the result: what FedAvg's Accumulate/Finalize could at best cost.
void BenchStream(benchmark::State& state, int k, int64_t p, const at::Device& device) {
  absl::StatusOr<Inputs*> inputs = GetInputs(k, p, device);
  if (!inputs.ok()) return Skip(state, "bound/stream", inputs.status());
  const fl::ModelState& global = (*inputs)->global;
  const std::vector<fl::ModelState>& deltas = (*inputs)->deltas;
  const std::vector<int64_t>& n = (*inputs)->num_examples;
  const double total = std::accumulate(n.begin(), n.end(), 0.0);
  fl::ModelState sum = global.ZerosLike();
  fl::ModelState next = global.ZerosLike();
  auto pass = [&]() -> absl::Status {
    return Guard([&] {
      for (size_t e = 0; e < global.size(); ++e) {
        at::mul_out(sum.mutable_tensor(e), deltas[0].tensor(e), static_cast<double>(n[0]));
      }
      for (size_t c = 1; c < deltas.size(); ++c) {
        for (size_t e = 0; e < global.size(); ++e) {
          sum.mutable_tensor(e).add_(deltas[c].tensor(e), static_cast<double>(n[c]));
        }
      }
      for (size_t e = 0; e < global.size(); ++e) {
        at::add_out(next.mutable_tensor(e), global.tensor(e), sum.tensor(e), 1.0 / total);
      }
      Sync(device);
      return absl::OkStatus();
    });
  };
  TimePasses(state, "bound/stream", k, p, pass,
             [&] { benchmark::DoNotOptimize(next.tensor(0).data_ptr()); });
}

// C = A B for n x n float32 matrices: the compute roofline for aggregators that do
// dense linear algebra (projections, Gram matrices) rather than streaming.
void BenchMatmul(benchmark::State& state, int64_t n, const at::Device& device) {
  at::Tensor a, b, c;
  absl::Status status = Guard([&] {
    const at::TensorOptions options = at::TensorOptions().device(device);
    a = at::randn({n, n}, options);
    b = at::randn({n, n}, options);
    c = at::empty({n, n}, options);
    at::mm_out(c, a, b);  // warm-up
    Sync(device);
    return absl::OkStatus();
  });
  if (!status.ok()) return Skip(state, "bound/matmul", status);
  for (auto _ : state) {
    at::mm_out(c, a, b);
    Sync(device);
    benchmark::DoNotOptimize(c.data_ptr());
  }
  state.counters["FLOPS"] = benchmark::Counter(2.0 * n * n * n,
                                               benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

namespace aggregators {

int AggregationBenchmarkMain(int argc, char** argv) {
  // Our one flag; everything else goes to Google Benchmark.
  int64_t max_params = INT64_MAX;
  std::vector<char*> args;
  constexpr char kMaxParams[] = "--max_params=";
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], kMaxParams, sizeof(kMaxParams) - 1) == 0) {
      if (!absl::SimpleAtoi(argv[i] + sizeof(kMaxParams) - 1, &max_params) || max_params < 1) {
        std::fprintf(stderr, "--max_params: must be a positive integer, got \"%s\"\n",
                     argv[i] + sizeof(kMaxParams) - 1);
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  int args_count = static_cast<int>(args.size());
  benchmark::Initialize(&args_count, args.data());
  if (benchmark::ReportUnrecognizedArguments(args_count, args.data())) return 2;

  benchmark::AddCustomContext("torch_version", TORCH_VERSION);
  benchmark::AddCustomContext("torch_threads", std::to_string(at::get_num_threads()));
  benchmark::AddCustomContext("max_params", std::to_string(max_params));

  std::vector<at::Device> devices = {at::Device(at::kCPU)};
  if (torch::cuda::is_available()) devices.emplace_back(at::kCUDA);
  // The family each aggregator's rows belong to, by its declared properties; one that
  // fails to create gets element-wise rows, which report why.
  std::vector<std::string> names;
  std::vector<std::string> proxy_names;
  for (const std::string& name : fl::Registry<fl::Aggregator>::Global().Names()) {
    auto created = fl::Registry<fl::Aggregator>::Global().Create(name, {});
    (created.ok() && (*created)->properties().uses_proxy ? proxy_names : names).push_back(name);
  }
  for (const at::Device& device : devices) {
    const std::string dev = DeviceName(device);
    for (int64_t p : kParameterCounts) {
      if (p > max_params) continue;
      for (int k : kClientCounts) {
        // Shape by shape, so that every row of a shape reuses its inputs.
        const std::string shape = absl::StrCat("K:", k, "/P:", p, "/", dev);
        const int64_t rounds = RoundsFor(k, p);
        for (const std::string& name : names) {
          benchmark::RegisterBenchmark(
              absl::StrCat("aggregate/", name, "/", shape).c_str(),
              [name, k, p, device](benchmark::State& state) {
                BenchAggregate(state, name, k, p, /*proxy_size=*/0, device);
              })
              ->UseRealTime()
              ->Iterations(rounds)
              ->Unit(benchmark::kMillisecond);
        }
        benchmark::RegisterBenchmark(
            absl::StrCat("bound/read/", shape).c_str(),
            [k, p, device](benchmark::State& state) { BenchRead(state, k, p, device); })
            ->UseRealTime()
            ->Iterations(rounds)
            ->Unit(benchmark::kMillisecond);
        benchmark::RegisterBenchmark(
            absl::StrCat("bound/stream/", shape).c_str(),
            [k, p, device](benchmark::State& state) { BenchStream(state, k, p, device); })
            ->UseRealTime()
            ->Iterations(rounds)
            ->Unit(benchmark::kMillisecond);
      }
    }
    for (const ProxyShape& ps : kProxyGrid) {
      if (ps.p > max_params) continue;
      for (const std::string& name : proxy_names) {
        const int k = ps.k;
        const int64_t p = ps.p;
        const int64_t proxy = ps.proxy;
        benchmark::RegisterBenchmark(
            absl::StrCat("aggregate_proxy/", name, "/K:", k, "/P:", p, "/proxy:", proxy, "/", dev)
                .c_str(),
            [name, k, p, proxy, device](benchmark::State& state) {
              BenchAggregate(state, name, k, p, proxy, device);
            })
            ->UseRealTime()
            ->MinTime(kProxyMinSeconds)
            ->Unit(benchmark::kMillisecond);
      }
    }
    const std::vector<int64_t> sizes =
        device.is_cuda() ? std::vector<int64_t>{2048, 8192} : std::vector<int64_t>{1024, 2048};
    for (int64_t n : sizes) {
      benchmark::RegisterBenchmark(
          absl::StrCat("bound/matmul/N:", n, "/", dev).c_str(),
          [n, device](benchmark::State& state) { BenchMatmul(state, n, device); })
          ->UseRealTime()
          ->MinTime(0.5)
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  CachedInputs().reset();
  return 0;
}

}  // namespace aggregators
