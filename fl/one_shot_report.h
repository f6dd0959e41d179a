#ifndef FL_ONE_SHOT_REPORT_H_
#define FL_ONE_SHOT_REPORT_H_

// One-shot federated learning compares aggregates of one set of client models: the
// spec's aggregator and any others (`server.compare`) all aggregate the same
// updates, and each client's own model is evaluated too. OneShotReport is the
// aggregator the server sees in a one-shot run: it plans what every aggregator
// needs (the union of their client hooks and broadcasts), keeps the round's
// updates, and in Finalize gives each comparison a copy of them, then the spec's
// aggregator the originals, timing each aggregation alone (Accumulate and
// Finalize, not the clients' training). It returns the spec's aggregator's result
// and writes the report:
//   stdout        a table, one row per client model and per aggregate
//   one_shot.csv  kind (client | aggregate), label, examples, test_accuracy,
//                 test_loss, aggregation_seconds
//   summary.json  "one_shot": the same rows; "aggregation_seconds": the spec's
//                 aggregator's
// A comparison's diagnostics go to the report only (as columns of its row), so
// that metrics.csv keeps the spec's aggregator's.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/aggregator.h"
#include "fl/client_update.h"
#include "fl/evaluator.h"
#include "fl/metrics_sink.h"
#include "fl/model_state.h"

namespace fl {

struct OneShotComparison {
  std::string label;
  std::unique_ptr<Aggregator> aggregator;
};

class OneShotReport : public Aggregator {
 public:
  using Evaluator = std::function<absl::StatusOr<Evaluation>(const ModelState&)>;
  using PredictorEvaluator = std::function<absl::StatusOr<Evaluation>(const Predictor&)>;

  // `main` (labelled `main_label`) and `sink` must outlive the report. Each
  // aggregate is evaluated as the server would: its predictor, else its
  // evaluation model, else the model Finalize returns.
  OneShotReport(std::string main_label, Aggregator* main,
                std::vector<OneShotComparison> comparisons, Evaluator evaluate,
                PredictorEvaluator evaluate_predictor, MetricsSink* sink);

  // The spec's aggregator's, with client_hooks the union over every aggregator.
  AggregatorProperties properties() const override;
  // Every aggregator's plan merged. A hook two aggregators plan with different
  // options, or a broadcast tensor both send, is an error naming both.
  absl::StatusOr<RoundPlan> Configure(const ModelState& global, ServerContext& context) override;
  absl::Status Accumulate(ClientUpdate update, ServerContext& context) override;
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext& context) override;

  struct Row {
    bool is_client = false;
    std::string label;
    int64_t examples = 0;  // the client's; 0 for an aggregate
    Evaluation evaluation;
    double seconds = 0.0;  // aggregation wall time; 0 for a client
    std::map<std::string, double> diagnostics;
  };
  // The last Finalize's rows: client models in cohort order, the spec's aggregator,
  // then the comparisons in spec order.
  const std::vector<Row>& rows() const { return rows_; }

 private:
  struct Member {
    std::string label;
    Aggregator* aggregator;
    ServerContext context;  // a comparison's own; the spec's aggregator uses the server's
  };
  absl::Status Write() const;
  absl::StatusOr<Evaluation> EvaluateAggregate(const ModelState& result,
                                               const ServerContext& context) const;

  std::vector<std::unique_ptr<Aggregator>> owned_;
  std::vector<Member> members_;  // the spec's aggregator first
  Evaluator evaluate_;
  PredictorEvaluator evaluate_predictor_;
  MetricsSink* sink_;
  std::vector<ClientUpdate> updates_;
  double accumulate_seconds_ = 0.0;  // the spec's aggregator's, this round
  std::vector<Row> rows_;
};

}  // namespace fl

#endif  // FL_ONE_SHOT_REPORT_H_
