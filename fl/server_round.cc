// A synchronous round (Server::Round): configure, draw the cohort, train it on the
// workers, meet the updates (in process, gathered to rank 0 or reduced across
// ranks, or under secure aggregation), screen, finalise.

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>
#include <limits>
#include <optional>
#include <thread>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "fl/client_sampler.h"
#include "fl/seeding.h"
#include "fl/server.h"
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

}  // namespace

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

}  // namespace fl
