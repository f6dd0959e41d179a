#include "fl/one_shot_report.h"

#include <chrono>
#include <cstdio>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fl/json.h"
#include "fl/status_macros.h"

namespace fl {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string Number(double v) { return absl::StrFormat("%.6g", v); }

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

}  // namespace

OneShotReport::OneShotReport(std::string main_label, Aggregator* main,
                             std::vector<OneShotComparison> comparisons, Evaluator evaluate,
                             PredictorEvaluator evaluate_predictor, MetricsSink* sink)
    : evaluate_(std::move(evaluate)),
      evaluate_predictor_(std::move(evaluate_predictor)),
      sink_(sink) {
  members_.push_back({std::move(main_label), main, {}});
  for (OneShotComparison& c : comparisons) {
    members_.push_back({std::move(c.label), c.aggregator.get(), {}});
    owned_.push_back(std::move(c.aggregator));
  }
}

AggregatorProperties OneShotReport::properties() const {
  AggregatorProperties properties = members_.front().aggregator->properties();
  std::set<std::string> hooks(properties.client_hooks.begin(), properties.client_hooks.end());
  for (size_t i = 1; i < members_.size(); ++i) {
    const AggregatorProperties member = members_[i].aggregator->properties();
    properties.step_aware = properties.step_aware || member.step_aware;
    properties.needs_local_sgd = properties.needs_local_sgd || member.needs_local_sgd;
    for (const std::string& hook : member.client_hooks) {
      if (hooks.insert(hook).second) properties.client_hooks.push_back(hook);
    }
  }
  return properties;
}

absl::StatusOr<RoundPlan> OneShotReport::Configure(const ModelState& global,
                                                   ServerContext& context) {
  updates_.clear();
  rows_.clear();
  accumulate_seconds_ = 0.0;
  RoundPlan merged;
  std::map<std::string, std::string> hook_owner, broadcast_owner;  // name -> label
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& member = members_[i];
    if (i > 0) {
      member.context = context;
      member.context.diagnostics.clear();
      member.context.evaluation_model.reset();
      member.context.evaluation_predictor = nullptr;
    }
    FL_ASSIGN_OR_RETURN(RoundPlan plan,
                        member.aggregator->Configure(global, i == 0 ? context : member.context));
    for (HookRequest& hook : plan.hooks) {
      auto owner = hook_owner.find(hook.name);
      if (owner == hook_owner.end()) {
        hook_owner[hook.name] = member.label;
        merged.hooks.push_back(std::move(hook));
        continue;
      }
      for (const HookRequest& planned : merged.hooks) {
        if (planned.name == hook.name &&
            planned.options.SerializeAsString() != hook.options.SerializeAsString()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "\"", owner->second, "\" and \"", member.label, "\" both plan client hook \"",
              hook.name, "\" with different options; a hook runs once per client"));
        }
      }
    }
    for (auto& [name, tensors] : plan.broadcast) {
      auto [owner, inserted] = broadcast_owner.emplace(name, member.label);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("\"", owner->second, "\" and \"",
                                                       member.label, "\" both broadcast \"",
                                                       name, "\""));
      }
      merged.broadcast[name] = std::move(tensors);
    }
  }
  return merged;
}

absl::Status OneShotReport::Accumulate(ClientUpdate update, ServerContext& context) {
  ClientUpdate kept = CloneUpdate(update);
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = members_.front().aggregator->Accumulate(std::move(update), context);
  accumulate_seconds_ += SecondsSince(start);
  if (status.ok()) updates_.push_back(std::move(kept));
  return status;
}

absl::StatusOr<ModelState> OneShotReport::Finalize(const ModelState& global,
                                                   ServerContext& context) {
  for (const ClientUpdate& update : updates_) {
    Row row;
    row.is_client = true;
    row.label = absl::StrCat("client ", update.client_id);
    row.examples = update.num_examples;
    FL_ASSIGN_OR_RETURN(row.evaluation, evaluate_(ModelState::Sum(global, 1.0, 1.0, update.delta)));
    rows_.push_back(std::move(row));
  }

  auto start = std::chrono::steady_clock::now();
  FL_ASSIGN_OR_RETURN(ModelState result, members_.front().aggregator->Finalize(global, context));
  Row main_row;
  main_row.label = members_.front().label;
  main_row.seconds = accumulate_seconds_ + SecondsSince(start);
  FL_ASSIGN_OR_RETURN(main_row.evaluation, EvaluateAggregate(result, context));
  main_row.diagnostics = context.diagnostics;
  rows_.push_back(std::move(main_row));

  for (size_t i = 1; i < members_.size(); ++i) {
    Member& member = members_[i];
    auto failed = [&member](const absl::Status& status) {
      return absl::Status(status.code(), absl::StrCat("one-shot comparison \"", member.label,
                                                      "\": ", status.message()));
    };
    Row row;
    row.label = member.label;
    // Each update is copied outside the timed spans, one at a time, so the peak
    // memory grows by one update only.
    for (const ClientUpdate& update : updates_) {
      ClientUpdate copy = CloneUpdate(update);
      start = std::chrono::steady_clock::now();
      absl::Status accumulated = member.aggregator->Accumulate(std::move(copy), member.context);
      row.seconds += SecondsSince(start);
      if (!accumulated.ok()) return failed(accumulated);
    }
    start = std::chrono::steady_clock::now();
    absl::StatusOr<ModelState> aggregate = member.aggregator->Finalize(global, member.context);
    if (!aggregate.ok()) return failed(aggregate.status());
    row.seconds += SecondsSince(start);
    absl::StatusOr<Evaluation> evaluation = EvaluateAggregate(*aggregate, member.context);
    if (!evaluation.ok()) return failed(evaluation.status());
    row.evaluation = *evaluation;
    row.diagnostics = member.context.diagnostics;
    rows_.push_back(std::move(row));
  }
  updates_.clear();
  FL_RETURN_IF_ERROR(Write());
  return result;
}

absl::StatusOr<Evaluation> OneShotReport::EvaluateAggregate(const ModelState& result,
                                                            const ServerContext& context) const {
  if (context.evaluation_predictor) return evaluate_predictor_(context.evaluation_predictor);
  return evaluate_(context.evaluation_model.has_value() ? *context.evaluation_model : result);
}

absl::Status OneShotReport::Write() const {
  std::set<std::string> diagnostic_names;
  for (const Row& row : rows_) {
    for (const auto& [name, value] : row.diagnostics) diagnostic_names.insert(name);
  }
  std::string csv = "kind,label,examples,test_accuracy,test_loss,aggregation_seconds";
  for (const std::string& name : diagnostic_names) absl::StrAppend(&csv, ",", CsvField(name));
  csv += "\n";
  std::vector<std::string> clients_json, aggregates_json;
  const Row* main_row = &rows_[rows_.size() - members_.size()];
  std::printf("one-shot report: test accuracy of each client's model and of each aggregate\n");
  for (const Row& row : rows_) {
    absl::StrAppend(&csv, row.is_client ? "client" : "aggregate", ",", CsvField(row.label), ",",
                    row.examples, ",", Number(row.evaluation.accuracy), ",",
                    Number(row.evaluation.loss), ",", Number(row.seconds));
    for (const std::string& name : diagnostic_names) {
      auto it = row.diagnostics.find(name);
      absl::StrAppend(&csv, ",", it == row.diagnostics.end() ? "" : Number(it->second));
    }
    csv += "\n";
    if (row.is_client) {
      std::printf("  %-28s %7.2f %%  (%lld examples)\n", row.label.c_str(),
                  100 * row.evaluation.accuracy, static_cast<long long>(row.examples));
      clients_json.push_back(absl::StrCat(
          "{\"label\": ", JsonString(row.label), ", \"examples\": ", row.examples,
          ", \"test_accuracy\": ", Number(row.evaluation.accuracy),
          ", \"test_loss\": ", Number(row.evaluation.loss), "}"));
    } else {
      std::printf("  %-28s %7.2f %%  aggregated in %.3f s%s\n", row.label.c_str(),
                  100 * row.evaluation.accuracy, row.seconds,
                  &row == main_row ? "  (the spec's aggregator)" : "");
      std::vector<std::string> diagnostics;
      for (const auto& [name, value] : row.diagnostics) {
        diagnostics.push_back(absl::StrCat(JsonString(name), ": ", Number(value)));
      }
      aggregates_json.push_back(absl::StrCat(
          "{\"label\": ", JsonString(row.label), ", \"test_accuracy\": ",
          Number(row.evaluation.accuracy), ", \"test_loss\": ", Number(row.evaluation.loss),
          ", \"aggregation_seconds\": ", Number(row.seconds), ", \"diagnostics\": {",
          absl::StrJoin(diagnostics, ", "), "}}"));
    }
  }
  std::fflush(stdout);
  sink_->AddSummaryField("aggregation_seconds", Number(main_row->seconds));
  sink_->AddSummaryField("one_shot", absl::StrCat("{\"clients\": [", absl::StrJoin(clients_json, ", "),
                                                  "], \"aggregates\": [",
                                                  absl::StrJoin(aggregates_json, ", "), "]}"));
  return sink_->WriteOutputFile("one_shot.csv", csv);
}

}  // namespace fl
