#include "fl/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <thread>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "fl/client_sampler.h"
#include "fl/process_stats.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl {
namespace {

// Why an update cannot be averaged in: a reason (a metrics.csv column suffix) and
// the message; an empty reason when it can.
struct Verdict {
  std::string reason;
  absl::Status status;
};

Verdict CheckUpdate(const ModelState& global, const ClientUpdate& update) {
  if (absl::Status layout = global.CheckSameLayout(update.delta); !layout.ok()) {
    return {"shape", absl::InvalidArgumentError(absl::StrCat("delta: ", layout.message()))};
  }
  if (!update.delta.AllFinite()) {
    return {"non_finite", absl::InvalidArgumentError("delta is not finite")};
  }
  for (const auto& [name, extra] : update.extras) {
    if (!extra.AllFinite()) {
      return {"non_finite",
              absl::InvalidArgumentError(absl::StrCat("extra \"", name, "\" is not finite"))};
    }
  }
  if (update.num_examples <= 0) {
    return {"num_examples",
            absl::InvalidArgumentError(absl::StrCat("num_examples is ", update.num_examples))};
  }
  return {};
}

// Why an update is rejected, as metrics.csv names it ("rejected_<reason>").
constexpr const char* kRejectionReasons[] = {"training",     "shape", "non_finite",
                                             "num_examples", "norm",  "aggregator"};

double Median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2 == 1) return values[mid];
  const double upper = values[mid];
  return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2;
}

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
      sink_(sink) {}

void Server::EnterPhase(RoundPhase phase) const {
  if (config_.on_phase) config_.on_phase(phase);
}

void Server::SetStage(int round, const char* stage) const {
  if (config_.collective != nullptr) {
    config_.collective->SetStage(absl::StrCat("round ", round, ": ", stage));
  }
}

std::vector<int> Server::DrawCohort(int num_clients, int round) const {
  if (config_.one_shot) return SampleCohort(num_clients, num_clients, config_.seed, round);
  if (config_.poisson_sampling) {
    const double rate = std::min(1.0, static_cast<double>(config_.clients_per_round) / num_clients);
    return SamplePoissonCohort(num_clients, rate, config_.seed, round);
  }
  return SampleCohort(num_clients, config_.clients_per_round, config_.seed, round);
}

absl::StatusOr<Server::RoundOutcome> Server::RunRound(int round, ModelState& global) {
  const int num_clients = static_cast<int>(clients_.size());
  const std::vector<int> cohort = DrawCohort(num_clients, round);
  Collective* const group = config_.collective;
  const int rank = group != nullptr ? group->rank() : 0;

  context_.round = round;
  context_.round_seed = DeriveSeed(config_.seed, SeedStream::kServerRound, {static_cast<uint64_t>(round)});
  context_.diagnostics.clear();
  context_.evaluation_model.reset();
  context_.evaluation_predictor = nullptr;
  SetStage(round, "configuring");
  EnterPhase(RoundPhase::kServer);
  FL_ASSIGN_OR_RETURN(RoundPlan plan, aggregator_->Configure(global, context_));

  // With norm screening, the updates that pass the other checks wait (in cohort
  // order) until the round's median norm is known: a distributed run then
  // screens them all on rank 0.
  const bool screen_norms = config_.max_norm_to_median > 0;
  // Distributed: each rank accumulates its own updates and the sums are
  // all-reduced, or every update goes to rank 0.
  const bool reduce = group != nullptr && !config_.gather_updates && !screen_norms &&
                      aggregator_->PartialSums().has_value();
  const bool gather = group != nullptr && !reduce;
  if (group != nullptr) {
    LOG_FIRST_N(INFO, 1) << (reduce ? "c10d: the aggregator's partial sums all-reduced each round"
                                    : "c10d: every update gathered to rank 0 each round");
  }
  // The cohort positions this process trains.
  std::vector<size_t> own;
  for (size_t i = 0; i < cohort.size(); ++i) {
    if (group == nullptr || config_.client_ranks[cohort[i]] == rank) own.push_back(i);
  }

  SetStage(round, "training");
  EnterPhase(RoundPhase::kClients);
  // What the clients start from: the server's model, or their copy of it.
  const ModelState& start = lossy_download() ? *progress_.clients_copy : global;
  // With several workers, they fill the slots in any order and this thread consumes
  // them in cohort order. With one, this thread trains each client itself: no
  // thread (and no OpenMP team for a new thread) is created per round.
  const int num_workers = std::max(1, std::min<int>(config_.workers, own.size()));
  std::vector<std::optional<absl::StatusOr<ClientUpdate>>> slots(cohort.size());
  absl::Mutex mutex;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t j = next++; j < own.size(); j = next++) {
      absl::StatusOr<ClientUpdate> update = clients_[cohort[own[j]]]->Train(start, plan, round);
      absl::MutexLock lock(&mutex);
      slots[own[j]] = std::move(update);
    }
  };
  std::vector<std::thread> workers;
  if (num_workers > 1) {
    for (int w = 0; w < num_workers; ++w) workers.emplace_back(work);
  }
  // Cohort position i's outcome, in cohort order of the calls.
  auto take = [&](size_t i) -> absl::StatusOr<ClientUpdate> {
    if (num_workers == 1 && !slots[i].has_value()) return clients_[cohort[i]]->Train(start, plan, round);
    absl::MutexLock lock(&mutex);
    mutex.Await(absl::Condition(
        +[](std::optional<absl::StatusOr<ClientUpdate>>* slot) { return slot->has_value(); },
        &slots[i]));
    absl::StatusOr<ClientUpdate> update = std::move(*slots[i]);
    slots[i].reset();
    return update;
  };

  // Which positions this process screens and accumulates: all of them on rank 0
  // when gathering (none on the others), else its own.
  std::vector<size_t> consumed = own;
  if (gather) {
    std::vector<IndexedUpdate> mine;
    for (size_t i : own) mine.push_back({static_cast<int>(i), take(i)});
    SetStage(round, "sending updates to rank 0");
    FL_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                        group->Gather(rank == 0 ? std::string() : SerializeUpdates(mine)));
    consumed.clear();
    if (rank == 0) {
      for (IndexedUpdate& update : mine) slots[update.cohort_index] = std::move(update.update);
      for (int r = 1; r < group->world_size(); ++r) {
        const std::string source = absl::StrCat("round ", round, ": updates from rank ", r);
        FL_ASSIGN_OR_RETURN(std::vector<IndexedUpdate> theirs,
                            ParseUpdates(messages[r], context_.device, source));
        for (IndexedUpdate& update : theirs) {
          const size_t i = update.cohort_index;
          if (i >= cohort.size() || config_.client_ranks[cohort[i]] != r || slots[i].has_value()) {
            return absl::DataLossError(absl::StrCat(source, ": cohort position ", i,
                                                    " is not one of rank ", r, "'s this round"));
          }
          slots[i] = std::move(update.update);
        }
      }
      for (size_t i = 0; i < cohort.size(); ++i) {
        if (!slots[i].has_value()) {
          return absl::DataLossError(absl::StrCat("round ", round, ": no outcome for client ",
                                                  cohort[i], " from rank ",
                                                  config_.client_ranks[cohort[i]]));
        }
        consumed.push_back(i);
      }
    }
  }

  RoundOutcome outcome;
  const int64_t bytes_down_each =
      (lossy_download() ? progress_.download_bytes : global.NumBytes()) + NumBytes(plan.broadcast);
  double loss_weighted = 0.0;
  int64_t examples = 0;
  absl::Status first_error;
  // The server's verdict per cohort position; a client owned here hears it at once.
  std::vector<uint8_t> accepted(cohort.size(), 0);
  auto acknowledge = [&](size_t i, bool verdict) {
    accepted[i] = verdict;
    if (group == nullptr || config_.client_ranks[cohort[i]] == rank) {
      clients_[cohort[i]]->Acknowledge(verdict);
    }
  };
  auto reject = [&](size_t i, const std::string& reason, const absl::Status& status) {
    acknowledge(i, false);
    ++outcome.rejected;
    ++outcome.rejected_by_reason[reason];
    LOG(WARNING) << "round " << round << ": update of client " << clients_[cohort[i]]->id()
                 << " rejected (" << reason << "): " << status;
    if (first_error.ok()) first_error = status;
  };
  auto accumulate = [&](size_t i, ClientUpdate update) {
    const double loss = update.metrics.count("train_loss") ? update.metrics["train_loss"] : 0.0;
    const int64_t n = update.num_examples;
    const int64_t steps = update.local_steps;
    absl::Status status = aggregator_->Accumulate(std::move(update), context_);
    if (!status.ok()) {
      reject(i, "aggregator", status);
      return;
    }
    acknowledge(i, true);
    outcome.local_steps += steps;
    loss_weighted += loss * n;
    examples += n;
    ++outcome.accepted;
  };
  std::vector<std::pair<size_t, ClientUpdate>> held;
  if (!consumed.empty()) SetStage(round, "accumulating");
  for (size_t i : consumed) {
    absl::StatusOr<ClientUpdate> update = take(i);
    outcome.bytes_down += bytes_down_each;
    if (!update.ok()) {
      reject(i, "training", update.status());
      continue;
    }
    if (update->planned_steps > 0 && update->local_steps == 0) {
      ++outcome.dropped;
      acknowledge(i, false);
      continue;
    }
    outcome.bytes_up += update->bytes_sent;
    if (Verdict verdict = CheckUpdate(global, *update); !verdict.status.ok()) {
      reject(i, verdict.reason, verdict.status);
      continue;
    }
    if (update->local_steps < update->planned_steps) {
      ++outcome.incomplete;
      if (config_.incomplete == ServerConfig::Incomplete::kDrop) {
        acknowledge(i, false);
        continue;
      }
      if (config_.incomplete == ServerConfig::Incomplete::kScale) {
        // EFL's p_k = E p^k / s_k, for any aggregator: the parameters' step scaled.
        const double scale = static_cast<double>(update->planned_steps) / update->local_steps;
        // Parameters times scale (in place: + (scale - 1) x itself); buffers as they are.
        update->delta.Axpy(scale - 1.0, 0.0, ModelState(update->delta));
      }
    }
    if (screen_norms) {
      held.emplace_back(i, *std::move(update));
    } else {
      accumulate(i, *std::move(update));
    }
  }
  for (std::thread& t : workers) t.join();
  if (!held.empty()) {
    std::vector<double> norms;
    for (const auto& [i, update] : held) norms.push_back(std::sqrt(update.delta.SquaredNorm()));
    const double median = Median(norms);
    const double limit = config_.max_norm_to_median * median;
    for (size_t k = 0; k < held.size(); ++k) {
      if (norms[k] > limit) {
        reject(held[k].first, "norm",
               absl::InvalidArgumentError(absl::StrFormat(
                   "update norm %g exceeds %g x the round's median norm %g",
                   norms[k], config_.max_norm_to_median, median)));
      } else {
        accumulate(held[k].first, std::move(held[k].second));
      }
    }
  }
  outcome.train_loss = examples > 0 ? loss_weighted / examples : 0.0;
  if (gather) {
    // The verdicts to the clients' owners, with the round's count.
    SetStage(round, "receiving verdicts from rank 0");
    std::vector<at::Tensor> verdicts{at::from_blob(accepted.data(), {static_cast<int64_t>(accepted.size())}, at::kByte).clone(),
                                     at::tensor({static_cast<int64_t>(outcome.accepted)}, at::kLong)};
    FL_RETURN_IF_ERROR(group->Broadcast(verdicts));
    if (rank != 0) {
      for (size_t i : own) clients_[cohort[i]]->Acknowledge(verdicts[0][i].item<uint8_t>() != 0);
      outcome.accepted = static_cast<int>(verdicts[1].item<int64_t>());
      if (outcome.accepted == 0 && first_error.ok()) {
        first_error = absl::InternalError("rank 0 has the details");
      }
    }
  }
  if (reduce) {
    SetStage(round, "summing the partial accumulations");
    std::map<std::string, at::Tensor> sums = *aggregator_->PartialSums();
    std::vector<at::Tensor> tensors;
    for (const auto& [name, tensor] : sums) tensors.push_back(tensor);
    std::vector<double> counters = {loss_weighted,
                                    static_cast<double>(examples),
                                    static_cast<double>(outcome.accepted),
                                    static_cast<double>(outcome.rejected),
                                    static_cast<double>(outcome.incomplete),
                                    static_cast<double>(outcome.dropped),
                                    static_cast<double>(outcome.bytes_up),
                                    static_cast<double>(outcome.bytes_down),
                                    static_cast<double>(outcome.local_steps),
                                    first_error.ok() ? 0.0 : 1.0};
    for (const char* reason : kRejectionReasons) {
      counters.push_back(outcome.rejected_by_reason.count(reason) ? outcome.rejected_by_reason[reason] : 0);
    }
    tensors.push_back(at::tensor(counters, at::kDouble));
    FL_RETURN_IF_ERROR(group->AllReduceSum(tensors));
    const at::Tensor total = tensors.back();
    tensors.pop_back();
    size_t k = 0;
    for (auto& [name, tensor] : sums) tensor = tensors[k++];
    auto count = [&](int index) { return static_cast<int64_t>(total[index].item<double>()); };
    outcome.train_loss = count(1) > 0 ? total[0].item<double>() / total[1].item<double>() : 0.0;
    outcome.accepted = static_cast<int>(count(2));
    outcome.rejected = static_cast<int>(count(3));
    outcome.incomplete = static_cast<int>(count(4));
    outcome.dropped = static_cast<int>(count(5));
    outcome.bytes_up = count(6);
    outcome.bytes_down = count(7);
    outcome.local_steps = count(8);
    if (count(9) > 0 && first_error.ok()) {
      first_error = absl::InternalError("the ranks that rejected them have the details");
    }
    outcome.rejected_by_reason.clear();
    for (size_t r = 0; r < std::size(kRejectionReasons); ++r) {
      if (count(10 + r) > 0) outcome.rejected_by_reason[kRejectionReasons[r]] = count(10 + r);
    }
    if (rank == 0 && outcome.accepted > 0) {
      FL_RETURN_IF_ERROR(aggregator_->MergePartialSums(std::move(sums)));
    }
  }
  EnterPhase(RoundPhase::kServer);

  if (outcome.accepted == 0) {
    if (first_error.ok()) {
      if (cohort.empty()) {
        LOG(WARNING) << "round " << round << ": Poisson sampling drew no client; the model is kept";
      } else {
        // Every client dropped out or was left out as incomplete: the model stays.
        LOG(WARNING) << "round " << round << ": no update to aggregate (" << outcome.dropped
                     << " dropped out, " << outcome.incomplete << " incomplete); the model is kept";
      }
      outcome.train_loss = 0.0;
      return outcome;
    }
    return absl::Status(first_error.code(),
                        absl::StrCat("round ", round, ": every update was rejected; first: ",
                                     first_error.message()));
  }
  if (rank == 0) {
    SetStage(round, "finalizing");
    FL_ASSIGN_OR_RETURN(ModelState aggregated, aggregator_->Finalize(global, context_));
    if (lossy_download()) Broadcast(global, aggregated);
    global = std::move(aggregated);
    if (!global.AllFinite()) {
      return absl::InternalError(absl::StrCat("round ", round, ": the aggregated model is not finite"));
    }
  }
  if (group != nullptr) {
    SetStage(round, "receiving the model from rank 0");
    FL_RETURN_IF_ERROR(SyncFromRankZero(global));
  }
  return outcome;
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

absl::StatusOr<ModelState> Server::RunFrom() {
  const auto start = std::chrono::steady_clock::now();
  const double seconds_before = progress_.seconds;
  auto elapsed = [&] {
    return seconds_before +
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  ModelState& global = progress_.global;
  MetricsRow& row = progress_.pending;
  auto checkpoint = [&](int round) -> absl::Status {
    progress_.rounds_done = round;
    progress_.seconds = elapsed();
    return config_.checkpoint ? config_.checkpoint(progress_) : absl::OkStatus();
  };
  for (int round = progress_.rounds_done + 1; round <= config_.rounds; ++round) {
    FL_ASSIGN_OR_RETURN(RoundOutcome outcome, RunRound(round, global));
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
    if (is_rank_zero()) {
      SetStage(round, "evaluating");
      FL_RETURN_IF_ERROR(sink_->AddDiagnostics(round, context_.diagnostics));
      if (scheduled || round == config_.rounds) {
        FL_RETURN_IF_ERROR(Evaluate(round, outcome, elapsed()));
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
    if (stop || due) FL_RETURN_IF_ERROR(checkpoint(round));
    if (stop && round < config_.rounds) {
      return absl::CancelledError(absl::StrCat("stopped on request after round ", round, " of ",
                                               config_.rounds));
    }
  }
  progress_.seconds = elapsed();
  if (config_.collective != nullptr) FL_RETURN_IF_ERROR(ReportRanks());
  if (is_rank_zero()) FL_RETURN_IF_ERROR(sink_->WriteSummary(progress_.seconds, config_.rounds));
  return lossy_download() ? *progress_.clients_copy : global;
}

absl::Status Server::Evaluate(int round, const RoundOutcome& outcome, double seconds) {
  // With a lossy download the model in use is the clients' copy.
  const ModelState& in_use = lossy_download() ? *progress_.clients_copy : progress_.global;
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
