#ifndef FL_SERVER_H_
#define FL_SERVER_H_

// The round loop (docs/architecture.md, section 1):
//   sample the cohort -> Aggregator::Configure -> clients train (a pool of
//   workers) -> reject non-finite or misshapen updates (and, with norm screening,
//   those far above the round's median norm) -> Aggregator::Accumulate in
//   cohort order, telling each client whether its update was accepted (it keeps
//   its hooks' new state only then) -> Finalize -> evaluate -> one metrics row.
// Updates are accumulated in cohort order whatever the number of workers, so the
// result does not depend on it.
//
// Distributed (ServerConfig::collective): every process runs this loop on the same
// spec. Each trains the cohort's clients it owns; then either every outcome goes
// to rank 0, which screens and accumulates them in cohort order as one process
// would (the same result bit for bit), or, for an aggregator whose accumulation
// is a sum (Aggregator::PartialSums), each rank accumulates its own and the
// partial sums are all-reduced (the same up to summation order). Rank 0
// finalises and evaluates; the new model, the clients' copy of it and the
// aggregator's state go from rank 0 to the others, and each client's verdict to
// its owner.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client.h"
#include "fl/client_trace.h"
#include "fl/codec.h"
#include "fl/collective.h"
#include "fl/evaluator.h"
#include "fl/event_queue.h"
#include "fl/metrics_sink.h"
#include "fl/model_state.h"
#include "fl/secure_aggregation.h"
#include "fl/staleness.h"
#include "fl/update_triage.h"

namespace fl {

// Asynchronous mode, at the end of a step: the clients in flight (their updates
// are trained again on resume, from the same inputs), how many clients have been
// dispatched, and the model versions (with their plans and download sizes) those
// in flight train from.
struct AsyncProgress {
  struct Version {
    ModelState model;
    RoundPlan plan;
    int64_t bytes_down = 0;
  };
  std::vector<ClientEvent> in_flight;
  int64_t dispatches = 0;
  std::map<int64_t, Version> versions;
};

// Everything about a run between two rounds that the spec and the round number do
// not already fix (every random stream is derived from them): what a checkpoint
// keeps of the server, and where a resumed run starts.
struct ServerProgress {
  int rounds_done = 0;
  ModelState global;
  // Under a lossy download: the model the clients hold, and the size of the next
  // broadcast.
  std::optional<ModelState> clients_copy;
  int64_t download_bytes = 0;
  // The metrics row being built: counters of the rounds since the last row, and
  // the cumulative bytes and local steps.
  MetricsRow pending;
  // Wall time spent so far.
  double seconds = 0.0;
  // With ServerConfig::keep_best: the model evaluated in the best round so far.
  std::optional<ModelState> best_model;
  int best_round = 0;
  double best_accuracy = 0.0;
  // Asynchronous mode only.
  std::optional<AsyncProgress> async;
};

// Who computes: the clients (on the workers, while this thread accumulates their
// updates) or the server alone (configuring, finalising, evaluating).
enum class RoundPhase { kClients, kServer };

// Asynchronous mode (fl/async_loop.cc): clients train and report on the virtual
// clock (ServerConfig::task_seconds required), and the server steps every
// buffer_size accepted updates; ServerConfig::rounds counts those steps and
// clients_per_round is unused. In-process runs with an aggregator whose
// accumulation is a sum, without norm screening, secure aggregation, a lossy
// download or one-shot mode (the runner checks the spec; Run refuses the rest).
struct AsyncConfig {
  // Clients in flight at any time.
  int concurrency = 1;
  int buffer_size = 1;
  // FedAsync's mixing rate; unset: FedBuff.
  std::optional<double> mixing_rate;
  Staleness staleness;
};

struct ServerConfig {
  int rounds = 1;
  // Ignored (everyone takes part) when one_shot. Under Poisson sampling, the
  // expected cohort size.
  int clients_per_round = 1;
  bool poisson_sampling = false;
  int eval_every = 1;
  // The first round evaluated (then every eval_every); 0: eval_every.
  int first_eval_round = 0;
  bool one_shot = false;
  // A round with fewer accepted updates fails the run (0: none).
  int min_accepted_updates = 0;
  // What happens to an update with fewer local steps than planned.
  using Incomplete = IncompleteUpdates;
  Incomplete incomplete = Incomplete::kKeep;
  // Rejects updates whose norm exceeds this multiple of the round's median update
  // norm (ServerSpec.screening); 0: off.
  double max_norm_to_median = 0.0;
  // How the model is sent to the clients (see ServerSpec.download).
  CodecConfig download;
  bool download_error_feedback = false;
  int workers = 1;
  uint64_t seed = 0;
  // Called as each phase starts, so that the server can have the cores the idle
  // workers leave. Optional.
  std::function<void(RoundPhase)> on_phase;
  // Keeps the best evaluated model (by test accuracy, the first of equals), in
  // ServerProgress::best_model.
  bool keep_best = false;
  // Called after every checkpoint_every-th round and the last one (none when 0),
  // and after the round in which stop_requested() became true: the run then ends
  // with kCancelled. Optional.
  std::function<absl::Status(const ServerProgress&)> checkpoint;
  int checkpoint_every = 0;
  std::function<bool()> stop_requested;
  // Called on rank 0 after each evaluated round with its metrics row and the
  // global model in use; returning false ends the run after that round as if it
  // were the last (summary written for the rounds run, the model returned), the
  // way a caller stops a run it watches. Single-process runs only (refused with a
  // collective). Optional.
  std::function<bool(const MetricsRow&, const ModelState&)> on_evaluated;
  // A distributed run: the process group (nullptr: this process is the whole run)
  // and each client's owning rank (see fl/rank_assignment.h). Only rank 0 uses
  // the sink and the evaluator.
  Collective* collective = nullptr;
  std::vector<int> client_ranks;
  // Called (on every rank of a distributed run) before round `round` is
  // evaluated: to bring rank 0 what the evaluation needs from the other ranks
  // (the clients' personal tensors), or to tell a deployment's evaluation which
  // round it is. Optional.
  std::function<absl::Status(int round)> before_evaluation;
  // Sends every update to rank 0 even when the aggregator has partial sums, so the
  // result equals the in-process run's bit for bit.
  bool gather_updates = false;
  // Runs each round's sum under secure aggregation (fl/secure_aggregation.h):
  // the aggregator (sums_only) then receives only the unmasked total of the
  // clients' partial sums, each computed on a client by an instance from
  // new_aggregator. In-process runs without norm screening only.
  std::optional<SecureAggregationConfig> secure_aggregation;
  std::function<absl::StatusOr<std::unique_ptr<Aggregator>>()> new_aggregator;
  // The virtual clock: client `client`'s seconds for its task in `round` when it
  // receives `bytes_down` (fl/system_model.h). A round lasts until its last
  // accepted client; metrics rows carry the sum. Unset: the clock stands still.
  std::function<double(int64_t client, int round, int64_t bytes_down)> task_seconds;
  // When client `client` is online: its first window that ends after virtual second
  // `at` (fl/client_trace.h). A synchronous round samples among the clients online
  // when it starts, waiting for one when none is; a client whose window closes
  // before its task ends drops out untrained. The asynchronous loop starts online
  // clients only. Unset: every client is always online.
  std::function<OnlineWindow(int64_t client, double at)> next_window;
  // Asynchronous mode (fl/async_loop.cc; see AsyncConfig). Unset: rounds.
  using Async = AsyncConfig;
  std::optional<Async> async;
  // The tensors the server does not share (fl/personalization.h): those the
  // clients keep for themselves and those nobody trains. The aggregator sees the
  // model without them, and every update lacks them; the global model's values
  // of them stay as they are (where a client that has not trained yet starts).
  // Synchronous rounds without a lossy download only.
  std::set<std::string> unshared_tensors;
};

class Server {
 public:
  using Evaluator = std::function<absl::StatusOr<Evaluation>(const ModelState&)>;

  // `context` carries what the server lends the aggregator (device, model factory,
  // proxy set); its round fields are filled in each round. Pointers must outlive Run.
  Server(ServerConfig config, Aggregator* aggregator, std::vector<std::unique_ptr<Client>> clients,
         ServerContext context, Evaluator evaluate, MetricsSink* sink);

  // Runs every round from `initial` and returns the final global model. Fails if a
  // whole cohort fails to train, or on an aggregator error.
  // The evaluation uses ServerContext::evaluation_predictor or evaluation_model
  // when the aggregator sets one.
  absl::StatusOr<ModelState> Run(ModelState initial);
  // Continues a run from the end of round start.rounds_done. The aggregator, the
  // clients' persistent state and the metrics sink must already hold what they
  // held then.
  absl::StatusOr<ModelState> Resume(ServerProgress start);

  // After Run or Resume: the best evaluated model (with ServerConfig::keep_best),
  // and its round.
  const std::optional<ModelState>& best_model() const { return progress_.best_model; }
  int best_round() const { return progress_.best_round; }

  // How to evaluate a predictor an aggregator returns through
  // ServerContext::evaluation_predictor; without it such a round fails.
  using PredictorEvaluator =
      std::function<absl::StatusOr<Evaluation>(const std::function<at::Tensor(const at::Tensor&)>&)>;
  void set_predictor_evaluator(PredictorEvaluator evaluate) {
    evaluate_predictor_ = std::move(evaluate);
  }

 private:
  struct RoundOutcome {
    double train_loss = 0.0;
    int accepted = 0;
    int rejected = 0;
    // "training" (the client failed), "shape", "non_finite", "num_examples",
    // "norm" (screening), "aggregator" (Accumulate refused it; under secure
    // aggregation, the client's own instance did and it sent nothing).
    std::map<std::string, int> rejected_by_reason;
    int incomplete = 0;  // accepted or not
    int dropped = 0;     // completed no step: nothing sent
    int64_t bytes_up = 0;
    int64_t bytes_down = 0;
    int64_t local_steps = 0;
    // The round's length on the virtual clock: its slowest accepted client's time.
    double virtual_seconds = 0.0;
    // The first rejection's reason: a round that accepts nothing fails with it.
    absl::Status first_error;

    // Counts and logs a rejection under `reason`; `where` names the round or step.
    void CountRejection(const std::string& where, int64_t client, const std::string& reason,
                        const absl::Status& status);
    // Counts what TriageUpdate decided for client `client`'s answer: true when it
    // goes on to the aggregator, false when it goes no further. The same in both
    // loops; the caller acknowledges.
    bool Settle(const Triage& triage, const std::string& where, int64_t client);
  };

  // One round's state and steps (fl/server.cc).
  class Round;
  // The asynchronous loop (fl/async_loop.cc), and running it: the steps after
  // progress_.rounds_done; returns the steps run.
  class AsyncLoop;
  absl::StatusOr<int> RunAsync();

  // The round's cohort positions, sorted (ServerConfig says how they are drawn).
  std::vector<int> DrawCohort(int num_clients, int round) const;
  // The same among the clients online at virtual second `at` (with next_window;
  // else all). When none is, `at` moves on to the first time one is; an error
  // when none ever is again.
  absl::StatusOr<std::vector<int>> DrawOnlineCohort(int round, double& at) const;
  // Samples, trains, screens and accumulates the cohort's updates, and finalises
  // the new global model: Round's steps in order.
  absl::StatusOr<RoundOutcome> RunRound(int round, ModelState& global);
  // The rounds (or asynchronous steps) after progress_.rounds_done.
  absl::StatusOr<ModelState> RunFrom();
  // After round (or asynchronous step) `round`: its counts into the pending row,
  // its diagnostics, evaluation when scheduled, the stop vote and a checkpoint
  // when due. True when on_evaluated ends the run here; kCancelled when a stop
  // was requested before the last round.
  absl::StatusOr<bool> CloseRound(int round, const RoundOutcome& outcome);
  // Wall seconds of the run, those before a resume included.
  double Elapsed() const;
  // Evaluates round `round`'s model and writes its metrics row.
  absl::Status Evaluate(int round, const RoundOutcome& outcome, double seconds);
  // Rank 0's model, clients' copy, download size and aggregator state, copied to
  // the other ranks.
  absl::Status SyncFromRankZero(ModelState& global);
  // Every rank's peak memory and collective payload, into rank 0's summary.json.
  absl::Status ReportRanks();
  bool is_rank_zero() const { return config_.collective == nullptr || config_.collective->rank() == 0; }
  void SetStage(int round, const char* stage) const;
  // The context's fields for round (or asynchronous step) `round`, with what an
  // aggregator reports per round cleared.
  void StartContext(int round);
  bool lossy_download() const { return config_.download.kind != CodecConfig::Kind::kIdentity; }
  // The global model as the clients use it: with a lossy download, their copy.
  const ModelState& ModelInUse() const;
  // Sends the change of the server's model to the clients' copy (lossy downloads).
  void Broadcast(const ModelState& previous, const ModelState& next);
  // What the aggregator sees of `model`: all of it, or without the unshared
  // tensors (config_.unshared_tensors; the tensors are shared, not copied).
  ModelState Lent(const ModelState& model) const;
  // With unshared tensors: the aggregate (and the evaluation model the aggregator
  // set), the shared part of the model, completed with `global`'s unshared
  // tensors. Internal error, prefixed with `when` ("round 3"), when it is not that
  // part.
  absl::Status CompleteWithUnshared(absl::string_view when, const ModelState& global,
                                    ModelState& aggregated);
  void EnterPhase(RoundPhase phase) const;

  ServerConfig config_;
  Aggregator* aggregator_;
  std::vector<std::unique_ptr<Client>> clients_;
  ServerContext context_;
  Evaluator evaluate_;
  PredictorEvaluator evaluate_predictor_;
  MetricsSink* sink_;
  // Under secure aggregation: the clients' instance of the aggregator, given the
  // server's state at the start of each round.
  std::unique_ptr<Aggregator> client_side_;
  // The run so far. With a lossy download, clients_copy is the model every client
  // holds (what the server's model minus it still owes them is the error-feedback
  // residual).
  ServerProgress progress_;
  std::chrono::steady_clock::time_point started_;
  double seconds_before_ = 0.0;
  // Set while the asynchronous loop runs: records what is in flight in
  // progress_.async just before a checkpoint.
  std::function<void()> before_checkpoint_;
};

}  // namespace fl

#endif  // FL_SERVER_H_
