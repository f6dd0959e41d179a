#ifndef FL_SERVER_H_
#define FL_SERVER_H_

// The round loop (docs/architecture.md, section 1):
//   sample the cohort -> Aggregator::Configure -> clients train (a pool of
//   workers) -> reject non-finite or misshapen updates -> Aggregator::Accumulate in
//   cohort order, telling each client whether its update was accepted (it keeps
//   its hooks' new state only then) -> Finalize -> evaluate -> one metrics row.
// Updates are accumulated in cohort order whatever the number of workers, so the
// result does not depend on it.

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client.h"
#include "fl/codec.h"
#include "fl/evaluator.h"
#include "fl/metrics_sink.h"
#include "fl/model_state.h"

namespace fl {

// Who computes: the clients (on the workers, while this thread accumulates their
// updates) or the server alone (configuring, finalising, evaluating).
enum class RoundPhase { kClients, kServer };

struct ServerConfig {
  int rounds = 1;
  // Ignored (everyone takes part) when one_shot.
  int clients_per_round = 1;
  int eval_every = 1;
  // The first round evaluated (then every eval_every); 0: eval_every.
  int first_eval_round = 0;
  bool one_shot = false;
  // What happens to an update with fewer local steps than planned.
  enum class Incomplete { kKeep, kDrop, kScale };
  Incomplete incomplete = Incomplete::kKeep;
  // How the model is sent to the clients (see ServerSpec.download).
  CodecConfig download;
  bool download_error_feedback = false;
  int workers = 1;
  uint64_t seed = 0;
  // Called as each phase starts, so that the server can have the cores the idle
  // workers leave. Optional.
  std::function<void(RoundPhase)> on_phase;
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
    int incomplete = 0;  // accepted or not
    int dropped = 0;     // completed no step: nothing sent
    int64_t bytes_up = 0;
    int64_t bytes_down = 0;
    int64_t local_steps = 0;
  };

  absl::StatusOr<RoundOutcome> RunRound(int round, ModelState& global);
  bool lossy_download() const { return config_.download.kind != CodecConfig::Kind::kIdentity; }
  // Sends the change of the server's model to the clients' copy (lossy downloads).
  void Broadcast(const ModelState& previous, const ModelState& next);
  void EnterPhase(RoundPhase phase) const;

  ServerConfig config_;
  Aggregator* aggregator_;
  std::vector<std::unique_ptr<Client>> clients_;
  ServerContext context_;
  Evaluator evaluate_;
  PredictorEvaluator evaluate_predictor_;
  MetricsSink* sink_;
  // With a lossy download: the model every client holds (what the server's model
  // minus it still owes them is the error-feedback residual), and the size of the
  // broadcast the next round sends.
  std::optional<ModelState> clients_copy_;
  int64_t download_bytes_ = 0;
};

}  // namespace fl

#endif  // FL_SERVER_H_
