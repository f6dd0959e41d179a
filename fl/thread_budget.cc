#include "fl/thread_budget.h"

#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/nn/module.h>
#include <c10/util/Exception.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fl/json.h"

namespace fl {
namespace {

// Bytes one worker's replica costs per trainable parameter: weights, gradients and
// two optimiser moments in float32, and as much again for activations and copies.
constexpr int64_t kBytesPerParameterPerWorker = 32;

absl::StatusOr<std::optional<int>> ParseCount(const std::optional<std::string>& text,
                                              const char* variable) {
  if (!text.has_value()) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", variable, "=\"", *text, "\": expected a positive integer"));
  }
  return std::optional<int>(value);
}

// `threads` in the one pool that parallelises the model's heavy operations.
PoolThreads InOnePool(int threads, bool convolutional) {
  return convolutional ? PoolThreads{threads, 1} : PoolThreads{1, threads};
}

std::string Describe(const PoolThreads& threads) {
  return absl::StrCat("intra-op ", threads.intra_op, ", OpenBLAS ", threads.blas);
}

using BlasSetThreads = void (*)(int);
using BlasGetThreads = int (*)();

BlasSetThreads OpenBlasSetter() {
  return reinterpret_cast<BlasSetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
}
BlasGetThreads OpenBlasGetter() {
  return reinterpret_cast<BlasGetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
}

}  // namespace

void DescribeModel(const torch::nn::Module& model, ThreadBudgetRequest& request) {
  request.model_parameters = 0;
  request.convolutional = false;
  for (const at::Tensor& p : model.parameters()) {
    if (!p.requires_grad()) continue;
    request.model_parameters += p.numel();
    request.convolutional |= p.dim() >= 3;
  }
}

std::string ThreadBudget::ToJson() const {
  std::vector<std::string> quoted;
  for (const std::string& w : warnings) quoted.push_back(JsonString(w));
  return absl::StrCat(
      "{\"cores\": ", cores, ", \"workers\": ", workers,
      ", \"threads_per_worker\": ", threads_per_worker,
      ", \"worker_intra_op_threads\": ", worker.intra_op,
      ", \"worker_blas_threads\": ", worker.blas,
      ", \"server_intra_op_threads\": ", server.intra_op,
      ", \"server_blas_threads\": ", server.blas, ", \"reason\": ", JsonString(reason),
      ", \"warnings\": [", absl::StrJoin(quoted, ", "), "]}");
}

absl::StatusOr<ThreadBudget> ChooseThreadBudget(const ThreadBudgetRequest& request) {
  if (request.workers.has_value() && *request.workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulation.workers: must be >= 1, got ", *request.workers));
  }
  if (request.threads_per_worker.has_value() && *request.threads_per_worker < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "simulation.threads_per_worker: must be >= 1, got ", *request.threads_per_worker));
  }
  auto omp = ParseCount(request.omp_threads_env, kOmpThreadsVariable);
  if (!omp.ok()) return omp.status();
  auto openblas = ParseCount(request.openblas_threads_env, kOpenBlasThreadsVariable);
  if (!openblas.ok()) return openblas.status();

  ThreadBudget budget;
  budget.cores = std::max(1, request.cores);
  const char* pool = request.convolutional ? "LibTorch's pool (the model convolves)"
                                           : "OpenBLAS's pool (the model multiplies matrices)";
  std::vector<std::string> why;
  std::optional<PoolThreads> from_environment;
  if (request.threads_per_worker.has_value()) {
    budget.threads_per_worker = *request.threads_per_worker;
    why.push_back(absl::StrCat("simulation.threads_per_worker: ", budget.threads_per_worker,
                               ", in ", pool));
    for (const auto& [name, value] : {std::make_pair(kOmpThreadsVariable, *omp),
                                      std::make_pair(kOpenBlasThreadsVariable, *openblas)}) {
      if (value.has_value()) {
        budget.warnings.push_back(
            absl::StrCat("simulation.threads_per_worker overrides ", name, "=", *value));
      }
    }
  } else if (omp->has_value() || openblas->has_value()) {
    // Each library falls back on the other's variable, as OpenBLAS itself does.
    const int omp_threads = omp->has_value() ? **omp : **openblas;
    from_environment = PoolThreads{omp_threads, openblas->value_or(omp_threads)};
    budget.threads_per_worker = from_environment->max();
    std::vector<std::string> set;
    if (omp->has_value()) set.push_back(absl::StrCat(kOmpThreadsVariable, "=", **omp));
    if (openblas->has_value()) {
      set.push_back(absl::StrCat(kOpenBlasThreadsVariable, "=", **openblas));
    }
    why.push_back(absl::StrCat(absl::StrJoin(set, " and "), " from the environment, kept"));
    if (from_environment->intra_op > 1 && from_environment->blas > 1) {
      budget.warnings.push_back(absl::StrCat(
          "LibTorch's and OpenBLAS's pools both have more than one thread (",
          Describe(*from_environment), "): each pool's idle threads spin on the cores the"
          " other needs, which can make a run several times slower; unset both variables to"
          " let the runner choose"));
    }
  }
  const bool threads_given = request.threads_per_worker.has_value() || from_environment;

  const int64_t clients = std::max<int64_t>(1, request.clients_per_round);
  int64_t memory_cap = budget.cores;
  if (request.memory_bytes > 0 && request.model_parameters > 0) {
    memory_cap = std::max<int64_t>(
        1, request.memory_bytes / (request.model_parameters * kBytesPerParameterPerWorker));
  }
  if (request.workers.has_value()) {
    budget.workers = *request.workers;
    why.push_back(absl::StrCat("simulation.workers: ", budget.workers));
  } else {
    const int64_t fit = std::max(1, budget.cores / (threads_given ? budget.threads_per_worker : 1));
    budget.workers = static_cast<int>(std::min({fit, clients, memory_cap}));
    if (budget.workers == fit) {
      why.push_back(absl::StrCat(budget.workers, " worker(s), one per ",
                                 threads_given ? "group of threads" : "core",
                                 ": whole clients in parallel need no synchronisation"));
    } else if (budget.workers == clients) {
      why.push_back(absl::StrCat(budget.workers, " worker(s), one per client trained per round"));
    } else {
      why.push_back(absl::StrCat(budget.workers, " worker(s): as many replicas of ",
                                 request.model_parameters, " parameters as memory holds"));
    }
  }
  if (!threads_given) {
    budget.threads_per_worker = std::max(1, budget.cores / budget.workers);
    why.push_back(absl::StrCat(budget.threads_per_worker, " thread(s) each (the cores left),"
                               " in ", pool));
  }
  budget.worker = from_environment.value_or(
      InOnePool(budget.threads_per_worker, request.convolutional));
  // The server works while the workers wait: a model that convolves gets their
  // cores in LibTorch's pool for evaluation and aggregation. Other models gain
  // nothing there, and extra OpenBLAS threads keep spinning after each use,
  // stealing more from the next round's workers than evaluation gains: measured,
  // the quickstart ran 12% slower with them.
  budget.server = budget.worker;
  if (!from_environment && request.convolutional && budget.worker.blas == 1 &&
      budget.cores > budget.worker.intra_op) {
    budget.server = PoolThreads{budget.cores, 1};
    why.push_back(absl::StrCat("server: ", budget.cores, " intra-op threads while the workers wait"));
  }

  const int64_t demand = int64_t{budget.workers} * budget.worker.max();
  if (demand > budget.cores) {
    budget.warnings.push_back(absl::StrCat(
        budget.workers, " workers x ", budget.worker.max(), " threads = ", demand,
        " threads on ", budget.cores,
        " cores: oversubscribed, expect a slower run (leave simulation.workers and"
        " simulation.threads_per_worker unset, and ",
        kOmpThreadsVariable, "/", kOpenBlasThreadsVariable, ", to let the runner choose)"));
  }
  budget.reason = absl::StrJoin(why, "; ");
  return budget;
}

int UsableCores() {
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  // cgroup v2: "max 100000" or "<quota> <period>" in microseconds.
  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::string quota, period;
  if (cpu_max >> quota >> period && quota != "max") {
    double q = 0, p = 0;
    if (absl::SimpleAtod(quota, &q) && absl::SimpleAtod(period, &p) && q > 0 && p > 0) {
      cores = std::min(cores, std::max(1, static_cast<int>(std::ceil(q / p))));
    }
  }
  return std::max(1, cores);
}

int64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (fields.size() >= 2 && fields[0] == "MemAvailable:" && absl::SimpleAtoi(fields[1], &kib)) {
      return kib * 1024;
    }
  }
  return 0;
}

AppliedThreads ApplyThreads(int intra_op, int blas) {
  at::set_num_threads(std::max(1, intra_op));
  static std::once_flag inter_op_once;
  std::call_once(inter_op_once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // The host program already set or used the pool: its choice stands.
    }
  });
  if (BlasSetThreads set = OpenBlasSetter(); set != nullptr) set(std::max(1, blas));
  return CurrentThreads();
}

AppliedThreads CurrentThreads() {
  AppliedThreads applied;
  applied.intra_op = at::get_num_threads();
  applied.inter_op = at::get_num_interop_threads();
  if (BlasGetThreads get = OpenBlasGetter(); get != nullptr) {
    applied.blas = get();
    applied.blas_controllable = true;
  }
  return applied;
}

}  // namespace fl
