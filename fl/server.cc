#include "fl/server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <optional>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "fl/client_sampler.h"
#include "fl/process_stats.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl {
namespace {

std::string FormatDuration(double seconds) {
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

}  // namespace

Server::Server(ServerConfig config, Aggregator* aggregator,
               std::vector<std::unique_ptr<Client>> clients, ServerContext context,
               Evaluator evaluate, MetricsSink* sink)
    : config_(config),
      aggregator_(aggregator),
      clients_(std::move(clients)),
      context_(std::move(context)),
      evaluate_(std::move(evaluate)),
      sink_(sink) {
  CHECK(!(config_.on_evaluated && config_.collective != nullptr))
      << "on_evaluated watches a single-process run";
  CHECK(!config_.next_window || config_.task_seconds) << "online windows need the virtual clock";
}

void Server::EnterPhase(RoundPhase phase) const {
  if (config_.on_phase) config_.on_phase(phase);
}

void Server::SetStage(int round, const char* stage) const {
  if (config_.collective != nullptr) {
    config_.collective->SetStage(absl::StrCat("round ", round, ": ", stage));
  }
}

absl::StatusOr<std::vector<int>> Server::DrawOnlineCohort(int round, double& at) const {
  const int num_clients = static_cast<int>(clients_.size());
  if (!config_.next_window) return DrawCohort(num_clients, round);
  std::vector<int> online;
  for (;;) {
    double next = std::numeric_limits<double>::infinity();
    for (int k = 0; k < num_clients; ++k) {
      const OnlineWindow window = config_.next_window(clients_[k]->id(), at);
      if (window.start <= at) {
        online.push_back(k);
      } else {
        next = std::min(next, window.start);
      }
    }
    if (!online.empty()) break;
    if (std::isinf(next)) {
      return absl::FailedPreconditionError(
          absl::StrCat("round ", round, ": no client is online at or after virtual second ", at,
                       " (client.system.trace_path)"));
    }
    at = next;
  }
  const int size = static_cast<int>(online.size());
  if (config_.clients_per_round >= size) return online;  // fewer online than a cohort
  std::vector<int> cohort = DrawCohort(size, round);
  for (int& position : cohort) position = online[position];
  return cohort;
}

std::vector<int> Server::DrawCohort(int num_clients, int round) const {
  if (config_.one_shot) return SampleCohort(num_clients, num_clients, config_.seed, round);
  if (config_.poisson_sampling) {
    const double rate = std::min(1.0, static_cast<double>(config_.clients_per_round) / num_clients);
    return SamplePoissonCohort(num_clients, rate, config_.seed, round);
  }
  return SampleCohort(num_clients, config_.clients_per_round, config_.seed, round);
}


void Server::StartContext(int round) {
  context_.round = round;
  context_.round_seed =
      DeriveSeed(config_.seed, SeedStream::kServerRound, {static_cast<uint64_t>(round)});
  context_.diagnostics.clear();
  context_.evaluation_model.reset();
  context_.evaluation_predictor = nullptr;
  SetStage(round, "configuring");
}

ModelState Server::Lent(const ModelState& model) const {
  return config_.unshared_tensors.empty() ? model : model.Without(config_.unshared_tensors);
}

absl::Status Server::CompleteWithUnshared(absl::string_view when, const ModelState& global,
                                          ModelState& aggregated) {
  const ModelState shared = Lent(global);
  auto complete = [&](ModelState& part, const char* what) -> absl::Status {
    if (absl::Status layout = shared.CheckSameLayout(part); !layout.ok()) {
      return absl::InternalError(absl::StrCat(when, ": the aggregator's ", what,
                                              " is not the shared part of the model: ",
                                              layout.message()));
    }
    FL_ASSIGN_OR_RETURN(part, global.WithReplaced(part.TensorsByName()));
    return absl::OkStatus();
  };
  FL_RETURN_IF_ERROR(complete(aggregated, "model"));
  if (std::optional<ModelState>& evaluated = context_.evaluation_model; evaluated.has_value()) {
    FL_RETURN_IF_ERROR(complete(*evaluated, "evaluation model"));
  }
  return absl::OkStatus();
}

absl::Status Server::ReportRanks() {
  Collective& group = *config_.collective;
  group.SetStage("the end: reporting memory and traffic");
  const int world = group.world_size();
  // Each rank fills its own column; the sums are everyone's.
  at::Tensor report = at::zeros({2, world}, at::kDouble);
  report[0][group.rank()] = static_cast<double>(PeakRssBytes()) / 1048576.0;
  report[1][group.rank()] = static_cast<double>(group.payload_bytes());
  std::vector<at::Tensor> tensors{report};
  FL_RETURN_IF_ERROR(group.AllReduceSum(tensors));
  if (group.rank() != 0) return absl::OkStatus();
  std::vector<std::string> memory, bytes;
  for (int r = 0; r < world; ++r) {
    memory.push_back(absl::StrFormat("%.1f", tensors[0][0][r].item<double>()));
    bytes.push_back(absl::StrCat(static_cast<int64_t>(tensors[0][1][r].item<double>())));
  }
  sink_->AddSummaryField(
      "c10d", absl::StrCat("{\"world_size\": ", world, ", \"peak_rss_mb_by_rank\": [",
                           absl::StrJoin(memory, ", "), "], \"payload_bytes_by_rank\": [",
                           absl::StrJoin(bytes, ", "), "]}"));
  return absl::OkStatus();
}

absl::Status Server::SyncFromRankZero(ModelState& global) {
  Collective& group = *config_.collective;
  std::vector<ModelState*> states{&global};
  if (lossy_download()) states.push_back(&*progress_.clients_copy);
  std::vector<at::Tensor> tensors;
  for (ModelState* state : states) {
    for (const ModelState::Entry& entry : state->entries()) tensors.push_back(entry.tensor);
  }
  tensors.push_back(at::tensor({progress_.download_bytes}, at::kLong));
  FL_RETURN_IF_ERROR(group.Broadcast(tensors));
  size_t k = 0;
  for (ModelState* state : states) {
    for (size_t i = 0; i < state->size(); ++i) state->mutable_tensor(i) = tensors[k++];
  }
  progress_.download_bytes = tensors[k].item<int64_t>();
  // State an aggregator keeps across rounds can change shape (lazily allocated
  // moments), so it travels as a message rather than into tensors in place.
  FL_ASSIGN_OR_RETURN(std::string state,
                      group.BroadcastMessage(group.rank() == 0
                                                 ? SerializeTensors(aggregator_->SaveState())
                                                 : std::string()));
  if (group.rank() == 0) return absl::OkStatus();
  FL_ASSIGN_OR_RETURN(TensorMap restored,
                      ParseTensors(state, context_.device, "the aggregator's state from rank 0"));
  return aggregator_->RestoreState(restored);
}

void Server::Broadcast(const ModelState& previous, const ModelState& next) {
  // With error feedback, everything the copy lacks; without, this round's change
  // only (what encoding drops is lost).
  const ModelState message = ModelState::Difference(
      next, config_.download_error_feedback ? *progress_.clients_copy : previous);
  EncodedState encoded = Encode(message, config_.download);
  progress_.clients_copy = ModelState::Sum(*progress_.clients_copy, 1.0, 1.0, encoded.decoded);
  progress_.download_bytes = encoded.bytes;
}

absl::StatusOr<ModelState> Server::Run(ModelState initial) {
  ServerProgress start;
  if (lossy_download()) {
    // Every client starts from the initial model, sent whole in round 1.
    start.clients_copy = initial.Clone();
    start.download_bytes = initial.NumBytes();
  }
  start.global = std::move(initial);
  return Resume(std::move(start));
}

absl::StatusOr<ModelState> Server::Resume(ServerProgress start) {
  progress_ = std::move(start);
  if (lossy_download() && !progress_.clients_copy.has_value()) {
    return absl::InvalidArgumentError(
        "resuming with a lossy server.download needs the clients' copy of the model");
  }
  return RunFrom();
}

double Server::Elapsed() const {
  return seconds_before_ +
         std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

absl::StatusOr<bool> Server::CloseRound(int round, const RoundOutcome& outcome) {
  MetricsRow& row = progress_.pending;
  row.virtual_seconds += outcome.virtual_seconds;
  row.bytes_up += outcome.bytes_up;
  row.bytes_down += outcome.bytes_down;
  row.local_steps += outcome.local_steps;
  // Counted every round, reported (and reset) with the next row.
  row.clients += outcome.accepted;
  row.rejected += outcome.rejected;
  for (const auto& [reason, count] : outcome.rejected_by_reason) {
    row.rejected_by_reason[reason] += count;
  }
  row.incomplete += outcome.incomplete;
  row.dropped += outcome.dropped;
  const int first = config_.first_eval_round > 0 ? config_.first_eval_round : config_.eval_every;
  const bool scheduled = round >= first && (round - first) % config_.eval_every == 0;
  const bool evaluated = scheduled || round == config_.rounds;
  if (evaluated && config_.before_evaluation) {
    SetStage(round, "bringing rank 0 what the evaluation needs");
    FL_RETURN_IF_ERROR(config_.before_evaluation(round));
  }
  if (is_rank_zero()) {
    SetStage(round, "evaluating");
    FL_RETURN_IF_ERROR(sink_->AddDiagnostics(round, context_.diagnostics));
    if (evaluated) {
      FL_RETURN_IF_ERROR(Evaluate(round, outcome, Elapsed()));
      if (config_.on_evaluated && !config_.on_evaluated(sink_->rows().back(), ModelInUse())) {
        return true;
      }
    }
  }
  bool stop = config_.stop_requested && config_.stop_requested();
  if (config_.collective != nullptr) {
    // A signal may reach some processes only: one stops, all stop.
    SetStage(round, "agreeing whether to stop");
    std::vector<at::Tensor> votes{at::tensor({stop ? 1 : 0}, at::kLong)};
    FL_RETURN_IF_ERROR(config_.collective->AllReduceSum(votes));
    stop = votes[0].item<int64_t>() > 0;
  }
  const bool due = config_.checkpoint_every > 0 &&
                   (round % config_.checkpoint_every == 0 || round == config_.rounds);
  if (stop || due) {
    progress_.rounds_done = round;
    progress_.seconds = Elapsed();
    if (before_checkpoint_) before_checkpoint_();
    if (config_.checkpoint) FL_RETURN_IF_ERROR(config_.checkpoint(progress_));
  }
  if (stop && round < config_.rounds) {
    return absl::CancelledError(
        absl::StrCat("stopped on request after round ", round, " of ", config_.rounds));
  }
  return false;
}

absl::StatusOr<ModelState> Server::RunFrom() {
  started_ = std::chrono::steady_clock::now();
  seconds_before_ = progress_.seconds;
  int rounds_run = config_.rounds;  // fewer when on_evaluated ends the run
  if (config_.async.has_value()) {
    FL_ASSIGN_OR_RETURN(rounds_run, RunAsync());
  } else {
    for (int round = progress_.rounds_done + 1; round <= config_.rounds; ++round) {
      FL_ASSIGN_OR_RETURN(RoundOutcome outcome, RunRound(round, progress_.global));
      FL_ASSIGN_OR_RETURN(const bool ended, CloseRound(round, outcome));
      if (ended) {
        rounds_run = round;
        break;
      }
    }
  }
  progress_.seconds = Elapsed();
  if (config_.collective != nullptr) FL_RETURN_IF_ERROR(ReportRanks());
  if (is_rank_zero()) {
    for (const auto& [name, json] : context_.summary) sink_->AddSummaryField(name, json);
    FL_RETURN_IF_ERROR(sink_->WriteSummary(progress_.seconds, rounds_run));
  }
  return ModelInUse();
}

const ModelState& Server::ModelInUse() const {
  // With a lossy download the model in use is the clients' copy.
  return lossy_download() ? *progress_.clients_copy : progress_.global;
}

absl::Status Server::Evaluate(int round, const RoundOutcome& outcome, double seconds) {
  const ModelState& in_use = ModelInUse();
  const ModelState* evaluated_model = nullptr;
  absl::StatusOr<Evaluation> evaluated;
  if (context_.evaluation_predictor) {
    if (!evaluate_predictor_) {
      return absl::FailedPreconditionError(
          "the aggregator returned a predictor, and this server cannot evaluate one");
    }
    evaluated = evaluate_predictor_(context_.evaluation_predictor);
  } else {
    evaluated_model =
        context_.evaluation_model.has_value() ? &*context_.evaluation_model : &in_use;
    evaluated = evaluate_(*evaluated_model);
  }
  FL_ASSIGN_OR_RETURN(Evaluation eval, std::move(evaluated));
  MetricsRow& row = progress_.pending;
  row.round = round;
  row.test_accuracy = eval.accuracy;
  row.test_loss = eval.loss;
  row.train_loss = outcome.train_loss;
  row.seconds = seconds;
  row.diagnostics = context_.diagnostics;
  row.client_accuracy = eval.client_accuracy;
  FL_RETURN_IF_ERROR(sink_->AddRow(row));
  row.clients = 0;
  row.rejected = 0;
  row.rejected_by_reason.clear();
  row.incomplete = 0;
  row.dropped = 0;
  if (config_.keep_best && (progress_.best_round == 0 || eval.accuracy > progress_.best_accuracy)) {
    progress_.best_round = round;
    progress_.best_accuracy = eval.accuracy;
    if (evaluated_model != nullptr) {
      progress_.best_model = evaluated_model->Clone();
    } else {
      // A predictor has no weights to keep.
      progress_.best_model.reset();
      LOG(WARNING) << "round " << round << ": the best model so far is a predictor, not weights;"
                   << " no best model is kept for it";
    }
  }
  const double eta = seconds / round * (config_.rounds - round);
  std::printf("round %d/%d  test_acc %.4f  test_loss %.4f  train_loss %.4f  elapsed %s  eta %s\n",
              round, config_.rounds, eval.accuracy, eval.loss, outcome.train_loss,
              FormatDuration(seconds).c_str(), FormatDuration(eta).c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace fl
