#ifndef FL_THREAD_BUDGET_H_
#define FL_THREAD_BUDGET_H_

// How a simulation spends the machine's cores: `workers` clients train at once, each
// with `threads_per_worker` threads for LibTorch's intra-op (OpenMP) pool and for
// OpenBLAS's pool. LibTorch and OpenBLAS each default to one thread per core, so
// without a budget W workers start W x (OpenMP + OpenBLAS) threads on the same cores
// and a small model trains several times slower than it can.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace fl {

// The environment variables that size LibTorch's and OpenBLAS's pools.
inline constexpr char kOmpThreadsVariable[] = "OMP_NUM_THREADS";
inline constexpr char kOpenBlasThreadsVariable[] = "OPENBLAS_NUM_THREADS";

struct ThreadBudgetRequest {
  // Cores this process may use (UsableCores()).
  int cores = 1;
  // simulation.workers and simulation.threads_per_worker, when the spec sets them.
  std::optional<int> workers;
  std::optional<int> threads_per_worker;
  // Clients trained per round: more workers than this would idle.
  int64_t clients_per_round = 1;
  // Trainable parameters of the model; each worker holds a replica, its gradients
  // and its optimiser's state.
  int64_t model_parameters = 0;
  // Whether the model convolves (has a parameter of three or more dimensions).
  bool convolutional = false;
  // Memory the replicas may take, in bytes; 0: no limit.
  int64_t memory_bytes = 0;
  // OMP_NUM_THREADS and OPENBLAS_NUM_THREADS as the user set them (unset: nullopt).
  std::optional<std::string> omp_threads_env;
  std::optional<std::string> openblas_threads_env;
};

// Fills `request`'s model_parameters (trainable) and convolutional (a parameter of
// three or more dimensions: a convolution's kernel) from `model`.
void DescribeModel(const torch::nn::Module& model, ThreadBudgetRequest& request);

// Threads of LibTorch's intra-op (OpenMP) pool and of OpenBLAS's pool.
struct PoolThreads {
  int intra_op = 1;
  int blas = 1;
  int max() const { return intra_op > blas ? intra_op : blas; }
  bool operator==(const PoolThreads& other) const {
    return intra_op == other.intra_op && blas == other.blas;
  }
};

struct ThreadBudget {
  int cores = 1;
  int workers = 1;
  int threads_per_worker = 1;
  // How each worker spends its threads while clients train.
  PoolThreads worker;
  // How the server thread spends the cores while the workers idle (aggregation and
  // evaluation).
  PoolThreads server;
  // Which inputs decided the numbers, in one line.
  std::string reason;
  // Lines worth a warning (an oversubscribed explicit choice, say).
  std::vector<std::string> warnings;

  // {"cores": .., "workers": .., ...} for summary.json.
  std::string ToJson() const;
};

// Picks the budget. Explicit spec values win, then the environment variables the
// user set, then the automatic choice: as many workers as cores (no more than the
// clients per round, nor than the memory holds), each with the cores left over.
// A worker's threads go to one pool only, never both: LibTorch's for a model that
// convolves (its convolutions split the batch over threads), OpenBLAS's otherwise
// (matrix products), since idle threads of either pool spin on the cores the
// other needs. Errors name the field or variable (a non-positive count, an
// unparsable variable).
absl::StatusOr<ThreadBudget> ChooseThreadBudget(const ThreadBudgetRequest& request);

// Cores this process may run on: its CPU affinity, further limited by a cgroup
// (v2) CPU quota when there is one.
int UsableCores();

// Bytes of memory available to new allocations (MemAvailable), 0 when unknown.
int64_t AvailableMemoryBytes();

// The thread settings in force, read back from the libraries themselves.
struct AppliedThreads {
  int intra_op = 0;  // at::get_num_threads()
  int inter_op = 0;  // at::get_num_interop_threads()
  // openblas_get_num_threads(); meaningful only when the BLAS in use is OpenBLAS.
  int blas = 0;
  bool blas_controllable = false;
};

// Sets LibTorch's intra-op pool to `intra_op` threads and OpenBLAS's pool (through
// its API, when the loaded BLAS is OpenBLAS) to `blas` threads, and LibTorch's
// inter-op pool to one thread the first time (it can be set only once per process,
// and serves only TorchScript's fork and at::launch, which fedkit does not use).
// The intra-op count takes effect in the calling thread and in threads started
// after the call.
AppliedThreads ApplyThreads(int intra_op, int blas);
inline AppliedThreads ApplyThreads(const PoolThreads& threads) {
  return ApplyThreads(threads.intra_op, threads.blas);
}

AppliedThreads CurrentThreads();

}  // namespace fl

#endif  // FL_THREAD_BUDGET_H_
