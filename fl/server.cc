#include "fl/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>
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
#include "fl/update_triage.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl {
namespace {

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

// One round's state and its steps, in the order RunRound calls them. Worker threads
// (several workers) train clients into `slots_` while this thread consumes them in
// cohort order; the destructor joins any still running, so an error returned from
// a step never leaves a thread behind.
class Server::Round {
 public:
  Round(Server& server, int round, ModelState& global)
      : server_(server),
        round_(round),
        global_(global),
        group_(server.config_.collective),
        rank_(group_ != nullptr ? group_->rank() : 0) {}
  ~Round() { JoinWorkers(); }
  Round(const Round&) = delete;
  Round& operator=(const Round&) = delete;

  // Draws the cohort, fills the round's fields of the context, asks the aggregator
  // for its plan and decides how a distributed run moves updates: each rank
  // accumulates its own and the partial sums are all-reduced, or every update goes
  // to rank 0.
  absl::Status Configure();
  // Starts the clients this process owns: on worker threads, or (one worker) one by
  // one on this thread as Take asks for them.
  void StartTraining();
  // Rank 0 receives every rank's outcomes and consumes all cohort positions; the
  // others consume none.
  absl::Status GatherToRankZero();
  // Checks each consumed outcome, counts it, and accumulates it (or, with norm
  // screening, holds it); then waits for the workers.
  void ConsumeUpdates();
  // With norm screening: rejects the held updates above the limit, accumulates the rest.
  void ScreenHeldUpdates();
  // Gathering: rank 0's verdicts back to the clients' owners, with the round's count.
  absl::Status SendVerdicts();
  // Reducing: sums the aggregators' partial sums and the round's counters over the
  // ranks; rank 0 merges the sums.
  absl::Status ReducePartialSums();
  // Under secure aggregation: the server unmasks the contributions' total and
  // merges it into the aggregator, or the round aborts (the model is kept); then
  // each contributor hears its verdict.
  absl::Status UnmaskSecureSum();
  // The new global model (rank 0's, then every rank's), or the model kept when no
  // update was accepted without error.
  absl::StatusOr<RoundOutcome> Finish();

  bool gathering() const { return gather_; }
  bool reducing() const { return reduce_; }
  bool secure() const { return server_.config_.secure_aggregation.has_value(); }

 private:
  absl::StatusOr<ClientUpdate> Take(size_t i);
  // Cohort position i's update; with online windows, nothing from a client whose
  // window closes before its task ends.
  absl::StatusOr<ClientUpdate> Train(size_t i);
  // With online windows: the round starts when a client is online, and notes who
  // goes offline before finishing.
  absl::Status DrawCohort();
  void Acknowledge(size_t i, bool verdict);
  void Reject(size_t i, const std::string& reason, const absl::Status& status);
  void Accumulate(size_t i, ClientUpdate update);
  // The secure round's key exchange, before the clients train.
  absl::Status StartSecureRound();
  // The client's half of secure aggregation: masks its partial sums.
  void Contribute(size_t i, ClientUpdate update);
  void JoinWorkers();
  bool owned(size_t i) const {
    return group_ == nullptr || server_.config_.client_ranks[cohort_[i]] == rank_;
  }

  // What the aggregator sees of the model: all of it, or the part the clients share.
  const ModelState& lent() const {
    return server_.config_.unshared_tensors.empty() ? global_ : shared_;
  }

  Server& server_;
  const int round_;
  ModelState& global_;
  // With unshared tensors: global_ without them (its tensors shared).
  ModelState shared_;
  Collective* const group_;
  const int rank_;
  std::vector<int> cohort_;
  // With online windows: virtual seconds from the previous round's end to this
  // one's start, and which cohort positions go offline mid-task (the round lasts
  // at least until they do).
  double wait_ = 0.0;
  std::vector<uint8_t> departs_;
  RoundPlan plan_;
  // What each client receives: the model (or its encoded change) and the plan's tensors.
  int64_t bytes_down_each_ = 0;
  bool screen_norms_ = false;
  bool reduce_ = false;
  bool gather_ = false;
  // The cohort positions this process trains, and those it screens and accumulates.
  std::vector<size_t> own_;
  std::vector<size_t> consumed_;
  // What the clients start from: the server's model, or their copy of it.
  const ModelState* start_ = nullptr;
  int num_workers_ = 1;
  std::vector<std::optional<absl::StatusOr<ClientUpdate>>> slots_;
  absl::Mutex mutex_;
  std::atomic<size_t> next_{0};
  std::vector<std::thread> workers_;

  RoundOutcome outcome_;
  double loss_weighted_ = 0.0;
  int64_t examples_ = 0;
  // The server's verdict per cohort position.
  std::vector<uint8_t> accepted_;
  std::vector<std::pair<size_t, ClientUpdate>> held_;
  // Secure aggregation: the round (none when it aborted at the key exchange or the
  // cohort is empty), and each contributor's position, loss, examples and steps,
  // counted once the sum is unmasked.
  std::unique_ptr<SecureAggregationRound> secure_round_;
  absl::Status secure_start_;
  bool secure_aborted_ = false;
  struct Contribution {
    size_t position;
    double loss;
    int64_t examples;
    int64_t steps;
  };
  std::vector<Contribution> contributions_;
};

void Server::StartContext(int round) {
  context_.round = round;
  context_.round_seed =
      DeriveSeed(config_.seed, SeedStream::kServerRound, {static_cast<uint64_t>(round)});
  context_.diagnostics.clear();
  context_.evaluation_model.reset();
  context_.evaluation_predictor = nullptr;
  SetStage(round, "configuring");
}

absl::Status Server::Round::Configure() {
  server_.StartContext(round_);
  server_.EnterPhase(RoundPhase::kServer);
  if (!server_.config_.unshared_tensors.empty()) {
    shared_ = global_.Without(server_.config_.unshared_tensors);
  }
  FL_ASSIGN_OR_RETURN(plan_, server_.aggregator_->Configure(lent(), server_.context_));
  bytes_down_each_ =
      (server_.lossy_download() ? server_.progress_.download_bytes : lent().NumBytes()) +
      NumBytes(plan_.broadcast);
  FL_RETURN_IF_ERROR(DrawCohort());

  // With norm screening, the updates that pass the other checks wait (in cohort
  // order) until the round's median norm is known: a distributed run then
  // screens them all on rank 0.
  screen_norms_ = server_.config_.max_norm_to_median > 0;
  reduce_ = group_ != nullptr && !server_.config_.gather_updates && !screen_norms_ &&
            server_.aggregator_->PartialSums().has_value();
  gather_ = group_ != nullptr && !reduce_;
  if (group_ != nullptr) {
    LOG_FIRST_N(INFO, 1) << (reduce_ ? "c10d: the aggregator's partial sums all-reduced each round"
                                     : "c10d: every update gathered to rank 0 each round");
  }
  for (size_t i = 0; i < cohort_.size(); ++i) {
    if (owned(i)) own_.push_back(i);
  }
  consumed_ = own_;
  slots_.resize(cohort_.size());
  accepted_.assign(cohort_.size(), 0);
  if (secure() && !cohort_.empty()) FL_RETURN_IF_ERROR(StartSecureRound());
  return absl::OkStatus();
}

absl::Status Server::Round::DrawCohort() {
  const ServerConfig& config = server_.config_;
  const double ended = server_.progress_.pending.virtual_seconds;
  double starts = ended;
  FL_ASSIGN_OR_RETURN(cohort_, server_.DrawOnlineCohort(round_, starts));
  if (!config.next_window) return absl::OkStatus();
  wait_ = starts - ended;
  outcome_.virtual_seconds = wait_;
  departs_.resize(cohort_.size());
  for (size_t i = 0; i < cohort_.size(); ++i) {
    const int64_t id = server_.clients_[cohort_[i]]->id();
    const double offline = config.next_window(id, starts).end;
    departs_[i] = starts + config.task_seconds(id, round_, bytes_down_each_) >= offline;
    // The server waits for a client until it goes offline.
    if (departs_[i]) outcome_.virtual_seconds = std::max(outcome_.virtual_seconds, offline - ended);
  }
  return absl::OkStatus();
}

absl::Status Server::Round::StartSecureRound() {
  if (server_.client_side_ == nullptr) {
    FL_ASSIGN_OR_RETURN(server_.client_side_, server_.config_.new_aggregator());
  }
  // The clients' instance holds what the server's does between rounds (an adapted
  // clip norm, say), so that its partial sums are the ones the server would take.
  FL_RETURN_IF_ERROR(server_.client_side_->RestoreState(server_.aggregator_->SaveState()));
  std::optional<std::map<std::string, at::Tensor>> layout = server_.aggregator_->PartialSums();
  if (!layout.has_value()) {
    return absl::FailedPreconditionError(
        "secure aggregation: the aggregator has no partial sums to aggregate securely");
  }
  std::vector<int64_t> ids;
  for (int position : cohort_) ids.push_back(server_.clients_[position]->id());
  absl::StatusOr<std::unique_ptr<SecureAggregationRound>> started = SecureAggregationRound::Start(
      *server_.config_.secure_aggregation, ids, *layout,
      DeriveSeed(server_.config_.seed, SeedStream::kSecureAggregation,
                 {static_cast<uint64_t>(round_)}));
  if (started.status().code() == absl::StatusCode::kFailedPrecondition) {
    secure_start_ = started.status();  // the round aborts; UnmaskSecureSum says so
    return absl::OkStatus();
  }
  FL_RETURN_IF_ERROR(started.status());
  secure_round_ = *std::move(started);
  return absl::OkStatus();
}

void Server::Round::StartTraining() {
  server_.SetStage(round_, "training");
  server_.EnterPhase(RoundPhase::kClients);
  start_ = server_.lossy_download() ? &*server_.progress_.clients_copy : &global_;
  // With one worker this thread trains each client itself (in Take): no thread, and
  // no OpenMP team for a new thread, is created per round.
  num_workers_ = std::max(1, std::min<int>(server_.config_.workers, own_.size()));
  if (num_workers_ == 1) return;
  for (int w = 0; w < num_workers_; ++w) {
    workers_.emplace_back([this] {
      for (size_t j = next_++; j < own_.size(); j = next_++) {
        const size_t i = own_[j];
        absl::StatusOr<ClientUpdate> update = Train(i);
        absl::MutexLock lock(&mutex_);
        slots_[i] = std::move(update);
      }
    });
  }
}

absl::StatusOr<ClientUpdate> Server::Round::Train(size_t i) {
  if (!departs_.empty() && departs_[i]) {
    ClientUpdate departed;  // no step: triaged as dropped out
    departed.client_id = server_.clients_[cohort_[i]]->id();
    departed.planned_steps = 1;
    return departed;
  }
  return server_.clients_[cohort_[i]]->Train(*start_, plan_, round_);
}

absl::StatusOr<ClientUpdate> Server::Round::Take(size_t i) {
  if (num_workers_ == 1 && !slots_[i].has_value()) return Train(i);
  absl::MutexLock lock(&mutex_);
  mutex_.Await(absl::Condition(
      +[](std::optional<absl::StatusOr<ClientUpdate>>* slot) { return slot->has_value(); },
      &slots_[i]));
  absl::StatusOr<ClientUpdate> update = std::move(*slots_[i]);
  slots_[i].reset();
  return update;
}

void Server::Round::JoinWorkers() {
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

absl::Status Server::Round::GatherToRankZero() {
  std::vector<IndexedUpdate> mine;
  for (size_t i : own_) mine.push_back({static_cast<int>(i), Take(i)});
  server_.SetStage(round_, "gathering updates on rank 0");
  FL_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                      group_->Gather(rank_ == 0 ? std::string() : SerializeUpdates(mine)));
  consumed_.clear();
  if (rank_ != 0) return absl::OkStatus();
  for (IndexedUpdate& update : mine) slots_[update.cohort_index] = std::move(update.update);
  const std::vector<int>& ranks = server_.config_.client_ranks;
  for (int r = 1; r < group_->world_size(); ++r) {
    const std::string source = absl::StrCat("round ", round_, ": updates from rank ", r);
    FL_ASSIGN_OR_RETURN(std::vector<IndexedUpdate> theirs,
                        ParseUpdates(messages[r], server_.context_.device, source));
    for (IndexedUpdate& update : theirs) {
      const size_t i = update.cohort_index;
      if (i >= cohort_.size() || ranks[cohort_[i]] != r || slots_[i].has_value()) {
        return absl::DataLossError(absl::StrCat(source, ": cohort position ", i,
                                                " is not one of rank ", r, "'s this round"));
      }
      slots_[i] = std::move(update.update);
    }
  }
  for (size_t i = 0; i < cohort_.size(); ++i) {
    if (!slots_[i].has_value()) {
      return absl::DataLossError(absl::StrCat("round ", round_, ": no outcome for client ",
                                              cohort_[i], " from rank ", ranks[cohort_[i]]));
    }
    consumed_.push_back(i);
  }
  return absl::OkStatus();
}

void Server::Round::Acknowledge(size_t i, bool verdict) {
  accepted_[i] = verdict;
  // A client owned here hears the verdict at once; the others through SendVerdicts.
  if (owned(i)) server_.clients_[cohort_[i]]->Acknowledge(verdict);
  if (verdict && server_.config_.task_seconds) {
    outcome_.virtual_seconds =
        std::max(outcome_.virtual_seconds,
                 wait_ + server_.config_.task_seconds(server_.clients_[cohort_[i]]->id(), round_,
                                                      bytes_down_each_));
  }
}

void Server::RoundOutcome::CountRejection(const std::string& where, int64_t client,
                                          const std::string& reason, const absl::Status& status) {
  ++rejected;
  ++rejected_by_reason[reason];
  LOG(WARNING) << where << ": update of client " << client << " rejected (" << reason
               << "): " << status;
  if (first_error.ok()) first_error = status;
}

bool Server::RoundOutcome::Settle(const Triage& triage, const std::string& where,
                                  int64_t client) {
  incomplete += triage.incomplete;
  switch (triage.kind) {
    case Triage::Kind::kRejected:
      CountRejection(where, client, triage.reason, triage.status);
      return false;
    case Triage::Kind::kDropped:
      ++dropped;
      return false;
    case Triage::Kind::kLeftOut:
      return false;
    case Triage::Kind::kAccept:
      return true;
  }
  return false;
}

void Server::Round::Reject(size_t i, const std::string& reason, const absl::Status& status) {
  Acknowledge(i, false);
  outcome_.CountRejection(absl::StrCat("round ", round_), server_.clients_[cohort_[i]]->id(),
                          reason, status);
}

void Server::Round::Accumulate(size_t i, ClientUpdate update) {
  const double loss = update.metrics.count("train_loss") ? update.metrics["train_loss"] : 0.0;
  const int64_t n = update.num_examples;
  const int64_t steps = update.local_steps;
  absl::Status status = server_.aggregator_->Accumulate(std::move(update), server_.context_);
  if (!status.ok()) {
    Reject(i, "aggregator", status);
    return;
  }
  Acknowledge(i, true);
  outcome_.local_steps += steps;
  loss_weighted_ += loss * n;
  examples_ += n;
  ++outcome_.accepted;
}

void Server::Round::ConsumeUpdates() {
  const ServerConfig& config = server_.config_;
  if (!consumed_.empty()) server_.SetStage(round_, "accumulating");
  for (size_t i : consumed_) {
    absl::StatusOr<ClientUpdate> update = Take(i);
    outcome_.bytes_down += bytes_down_each_;
    // Under secure aggregation the protocol's bytes are counted instead.
    if (update.ok() && !secure()) outcome_.bytes_up += update->bytes_sent;
    const Triage triage = TriageUpdate(lent(), config.incomplete, update);
    if (!outcome_.Settle(triage, absl::StrCat("round ", round_),
                         server_.clients_[cohort_[i]]->id())) {
      Acknowledge(i, false);
      continue;
    }
    if (screen_norms_) {
      held_.emplace_back(i, *std::move(update));
    } else if (secure()) {
      Contribute(i, *std::move(update));
    } else {
      Accumulate(i, *std::move(update));
    }
  }
  JoinWorkers();
}

// The checks above are, under secure aggregation, the client's own before it masks
// anything: the server learns that a client sent nothing, not what it would have.
void Server::Round::Contribute(size_t i, ClientUpdate update) {
  if (secure_round_ == nullptr) {  // aborted at the key exchange
    Acknowledge(i, false);
    return;
  }
  const double loss = update.metrics.count("train_loss") ? update.metrics["train_loss"] : 0.0;
  const Contribution contribution{i, loss, update.num_examples, update.local_steps};
  absl::Status status = secure_round_->Contribute(update, *server_.client_side_, lent(),
                                                  server_.context_);
  if (!status.ok()) {
    Reject(i, "aggregator", status);
    return;
  }
  contributions_.push_back(contribution);
}

absl::Status Server::Round::UnmaskSecureSum() {
  std::map<std::string, double>& diagnostics = server_.context_.diagnostics;
  diagnostics["secagg_contributions"] = contributions_.size();
  if (cohort_.empty()) {  // Poisson sampling drew nobody: nothing to abort
    diagnostics["secagg_aborted"] = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<std::map<std::string, at::Tensor>> sums =
      secure_round_ != nullptr ? secure_round_->Unmask() : secure_start_;
  diagnostics["secagg_clipped"] = 0;
  diagnostics["secagg_saturated"] = 0;
  if (secure_round_ != nullptr) {
    outcome_.bytes_up += secure_round_->bytes_up();
    outcome_.bytes_down += secure_round_->bytes_down();
    diagnostics["secagg_clipped"] = secure_round_->clipped_updates();
    diagnostics["secagg_saturated"] = static_cast<double>(secure_round_->saturated_values());
    if (secure_round_->saturated_values() > 0) {
      LOG_FIRST_N(WARNING, 1) << "round " << round_ << ": " << secure_round_->saturated_values()
                              << " values of the clients' partial sums lay beyond secure "
                                 "aggregation's range and were clipped (secagg_saturated): the "
                                 "sum is not the plain one; raise value_range";
    }
  }
  if (!sums.ok() && sums.status().code() != absl::StatusCode::kFailedPrecondition) {
    return sums.status();
  }
  secure_aborted_ = !sums.ok();
  diagnostics["secagg_aborted"] = secure_aborted_ ? 1 : 0;
  if (secure_aborted_) {
    LOG(WARNING) << "round " << round_ << ": " << sums.status().message()
                 << "; the round aborts and the model is kept";
    for (const Contribution& c : contributions_) Acknowledge(c.position, false);
    return absl::OkStatus();
  }
  FL_RETURN_IF_ERROR(server_.aggregator_->MergePartialSums(*std::move(sums)));
  for (const Contribution& c : contributions_) {
    Acknowledge(c.position, true);
    outcome_.local_steps += c.steps;
    loss_weighted_ += c.loss * c.examples;
    examples_ += c.examples;
    ++outcome_.accepted;
  }
  return absl::OkStatus();
}

void Server::Round::ScreenHeldUpdates() {
  if (held_.empty()) return;
  std::vector<double> norms;
  for (const auto& [i, update] : held_) norms.push_back(std::sqrt(update.delta.SquaredNorm()));
  const double median = Median(norms);
  const double multiple = server_.config_.max_norm_to_median;
  for (size_t k = 0; k < held_.size(); ++k) {
    if (norms[k] > multiple * median) {
      Reject(held_[k].first, "norm",
             absl::InvalidArgumentError(
                 absl::StrFormat("update norm %g exceeds %g x the round's median norm %g",
                                 norms[k], multiple, median)));
    } else {
      Accumulate(held_[k].first, std::move(held_[k].second));
    }
  }
  held_.clear();
}

absl::Status Server::Round::SendVerdicts() {
  server_.SetStage(round_, "broadcasting verdicts from rank 0");
  std::vector<at::Tensor> verdicts{
      at::from_blob(accepted_.data(), {static_cast<int64_t>(accepted_.size())}, at::kByte).clone(),
      at::tensor({static_cast<int64_t>(outcome_.accepted)}, at::kLong),
      at::tensor({outcome_.virtual_seconds}, at::kDouble)};
  FL_RETURN_IF_ERROR(group_->Broadcast(verdicts));
  if (rank_ == 0) return absl::OkStatus();
  for (size_t i : own_) {
    server_.clients_[cohort_[i]]->Acknowledge(verdicts[0][i].item<uint8_t>() != 0);
  }
  outcome_.accepted = static_cast<int>(verdicts[1].item<int64_t>());
  outcome_.virtual_seconds = verdicts[2].item<double>();
  if (outcome_.accepted == 0 && outcome_.first_error.ok()) {
    outcome_.first_error = absl::InternalError("rank 0 has the details");
  }
  return absl::OkStatus();
}

absl::Status Server::Round::ReducePartialSums() {
  server_.SetStage(round_, "summing the partial accumulations");
  std::map<std::string, at::Tensor> sums = *server_.aggregator_->PartialSums();
  std::vector<at::Tensor> tensors;
  for (const auto& [name, tensor] : sums) tensors.push_back(tensor);
  RoundOutcome& o = outcome_;
  std::vector<double> counters = {loss_weighted_,
                                  static_cast<double>(examples_),
                                  static_cast<double>(o.accepted),
                                  static_cast<double>(o.rejected),
                                  static_cast<double>(o.incomplete),
                                  static_cast<double>(o.dropped),
                                  static_cast<double>(o.bytes_up),
                                  static_cast<double>(o.bytes_down),
                                  static_cast<double>(o.local_steps),
                                  outcome_.first_error.ok() ? 0.0 : 1.0};
  for (const char* reason : kRejectionReasons) {
    counters.push_back(o.rejected_by_reason.count(reason) ? o.rejected_by_reason[reason] : 0);
  }
  // The slowest accepted client of each rank, in that rank's slot (a sum of maxima).
  const size_t clock_slots = counters.size();
  counters.resize(clock_slots + group_->world_size(), 0.0);
  counters[clock_slots + rank_] = o.virtual_seconds;
  tensors.push_back(at::tensor(counters, at::kDouble));
  FL_RETURN_IF_ERROR(group_->AllReduceSum(tensors));
  const at::Tensor total = tensors.back();
  tensors.pop_back();
  size_t k = 0;
  for (auto& [name, tensor] : sums) tensor = tensors[k++];
  auto count = [&](int index) { return static_cast<int64_t>(total[index].item<double>()); };
  o.train_loss = count(1) > 0 ? total[0].item<double>() / total[1].item<double>() : 0.0;
  o.accepted = static_cast<int>(count(2));
  o.rejected = static_cast<int>(count(3));
  o.incomplete = static_cast<int>(count(4));
  o.dropped = static_cast<int>(count(5));
  o.bytes_up = count(6);
  o.bytes_down = count(7);
  o.local_steps = count(8);
  if (count(9) > 0 && outcome_.first_error.ok()) {
    outcome_.first_error = absl::InternalError("the ranks that rejected them have the details");
  }
  o.rejected_by_reason.clear();
  for (size_t r = 0; r < std::size(kRejectionReasons); ++r) {
    if (count(10 + r) > 0) o.rejected_by_reason[kRejectionReasons[r]] = count(10 + r);
  }
  o.virtual_seconds =
      total.slice(0, static_cast<int64_t>(clock_slots)).max().item<double>();
  if (rank_ == 0 && o.accepted > 0) {
    FL_RETURN_IF_ERROR(server_.aggregator_->MergePartialSums(std::move(sums)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Server::RoundOutcome> Server::Round::Finish() {
  server_.EnterPhase(RoundPhase::kServer);
  // Reduced, it is every rank's already; else this process's clients' (none off rank 0
  // when gathering), weighted by their examples.
  if (!reduce_) outcome_.train_loss = examples_ > 0 ? loss_weighted_ / examples_ : 0.0;
  if (secure_aborted_) {
    outcome_.train_loss = 0.0;
    return outcome_;
  }
  if (const int quorum = server_.config_.min_accepted_updates; outcome_.accepted < quorum) {
    const std::string first =
        outcome_.first_error.ok()
            ? ""
            : absl::StrCat("; first rejection: ", outcome_.first_error.message());
    return absl::UnavailableError(absl::StrCat(
        "round ", round_, ": ", outcome_.accepted, " updates accepted, fewer than ",
        "server.min_accepted_updates = ", quorum, " (", outcome_.rejected, " rejected, ",
        outcome_.dropped, " dropped out)", first));
  }
  if (outcome_.accepted == 0) {
    if (!outcome_.first_error.ok()) {
      return absl::Status(outcome_.first_error.code(),
                          absl::StrCat("round ", round_, ": every update was rejected; first: ",
                                       outcome_.first_error.message()));
    }
    if (cohort_.empty()) {
      LOG(WARNING) << "round " << round_ << ": Poisson sampling drew no client; the model is kept";
    } else {
      // Every client dropped out or was left out as incomplete: the model stays.
      LOG(WARNING) << "round " << round_ << ": no update to aggregate (" << outcome_.dropped
                   << " dropped out, " << outcome_.incomplete << " incomplete); the model is kept";
    }
    outcome_.train_loss = 0.0;
    return outcome_;
  }
  if (rank_ == 0) {
    server_.SetStage(round_, "finalizing");
    FL_ASSIGN_OR_RETURN(ModelState aggregated,
                        server_.aggregator_->Finalize(lent(), server_.context_));
    if (!server_.config_.unshared_tensors.empty()) {
      FL_RETURN_IF_ERROR(
          server_.CompleteWithUnshared(absl::StrCat("round ", round_), global_, aggregated));
    }
    if (server_.lossy_download()) server_.Broadcast(global_, aggregated);
    global_ = std::move(aggregated);
    if (!global_.AllFinite()) {
      return absl::InternalError(
          absl::StrCat("round ", round_, ": the aggregated model is not finite"));
    }
  }
  if (group_ != nullptr) {
    server_.SetStage(round_, "broadcasting the model from rank 0");
    FL_RETURN_IF_ERROR(server_.SyncFromRankZero(global_));
  }
  return outcome_;
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

absl::StatusOr<Server::RoundOutcome> Server::RunRound(int round, ModelState& global) {
  Round step(*this, round, global);
  FL_RETURN_IF_ERROR(step.Configure());
  step.StartTraining();
  if (step.gathering()) FL_RETURN_IF_ERROR(step.GatherToRankZero());
  step.ConsumeUpdates();
  step.ScreenHeldUpdates();
  if (step.gathering()) FL_RETURN_IF_ERROR(step.SendVerdicts());
  if (step.reducing()) FL_RETURN_IF_ERROR(step.ReducePartialSums());
  if (step.secure()) FL_RETURN_IF_ERROR(step.UnmaskSecureSum());
  return step.Finish();
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
    FL_RETURN_IF_ERROR(config_.before_evaluation());
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
