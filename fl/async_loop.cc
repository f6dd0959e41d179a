// The asynchronous loop (ServerConfig::async): FedBuff and FedAsync over the
// virtual clock.
//
// `concurrency` clients are in flight at any time. A client starts from the
// newest model version and its task takes TaskSeconds on the virtual clock, known
// when it starts; its update arrives then, with staleness tau = the server steps
// taken since. Updates are applied in arrival order (fl/event_queue.h: time, then
// client), each triaged as in a synchronous round, weighted by s(tau) and handed
// to the aggregator; every buffer_size accepted updates the aggregator finalises
// a server step. The client that arrived is replaced at once by one drawn
// uniformly from the idle clients that have not trained from the newest version
// yet (a client never trains twice from one model), so each task is the pair
// (client, version) and trains as round version + 1 of that client.
//
// Training runs ahead on the worker threads, earliest arrival first, at most two
// tasks per worker beyond the one the loop waits for; the loop trains that one
// itself if no worker has started it. What a task computes depends only on its
// client and version, so the result is the same for any number of workers. The
// server keeps the model versions that clients in flight still train from.
//
// With online windows (ServerConfig::next_window) only online clients start, and a
// client whose window closes before its task ends arrives then, untrained, and is
// counted as dropped out; when no idle client is online the free slots wait for
// the first to come online. The idle online clients are indexed (fl/rank_set.h),
// the index updated as windows open and close, so a start costs O(log n).

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <utility>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "fl/event_queue.h"
#include "fl/rank_set.h"
#include "fl/seeding.h"
#include "fl/server.h"
#include "fl/status_macros.h"
#include "fl/update_triage.h"
#include "glog/logging.h"

namespace fl {

class Server::AsyncLoop {
 public:
  explicit AsyncLoop(Server& server);
  ~AsyncLoop();
  AsyncLoop(const AsyncLoop&) = delete;
  AsyncLoop& operator=(const AsyncLoop&) = delete;

  // Server steps from progress_.rounds_done + 1 to the last; returns the steps run.
  absl::StatusOr<int> Run();

 private:
  struct Version {
    ModelState model;
    RoundPlan plan;
    int64_t bytes_down = 0;
    int in_flight = 0;
  };
  struct Task {
    ClientEvent event;
    bool started = false;
    std::optional<absl::StatusOr<ClientUpdate>> result;
  };
  struct EarlierArrival {
    bool operator()(const ClientEvent& a, const ClientEvent& b) const {
      return ArrivesBefore(a, b);
    }
  };

  absl::Status CheckConfig() const;
  // The aggregator's plan for the next server step, from the current model: the
  // version new clients start from.
  absl::Status OpenVersion();
  // Starts idle clients at the current time from the newest version until
  // `concurrency` are in flight or (with online windows) none is online.
  void FillSlots();
  // The client to start: drawn uniformly from the idle clients that have not
  // trained from the newest version, or (when every idle one has) from the idle
  // ones; with online windows from those online, and none when none is (then
  // wake_ says when the first will be).
  std::optional<int> DrawIdle();
  std::optional<int> DrawOnline();
  void Start(int client);
  // With online windows: notes idle client `client`'s state at the current time
  // in the online index and when it next changes; Untrack takes a client that
  // starts out of it; Advance applies the changes due by now.
  void Track(int client);
  void Untrack(int client);
  void Advance();
  // The dispatch's `attempt`-th draw in [0, range).
  int Draw(uint64_t attempt, int range) const;
  // With online windows: whether the task of `event` ends with its client offline.
  bool Departs(const ClientEvent& event) const;
  // Takes the earliest arrival: its update triaged and accumulated, the clock
  // advanced; fails when nothing has been accepted for 10 x num_clients arrivals.
  absl::Status Arrive(const ClientEvent& event);
  // Finalises a full buffer, closes the step (metrics row, checkpoint) and opens
  // the next version; true when on_evaluated ended the run.
  absl::StatusOr<bool> CloseStep();
  // The arrived client's update: trained by a worker, or here if none started it.
  absl::StatusOr<ClientUpdate> Take(const ClientEvent& event);
  absl::StatusOr<ClientUpdate> Train(const ClientEvent& event);
  void Work();
  // Triage, staleness and accumulation of one arrival, counted in outcome_.
  void Apply(const ClientEvent& event, absl::StatusOr<ClientUpdate> update);
  void Reject(const ClientEvent& event, const std::string& reason, const absl::Status& status);
  // Finalises the buffered updates into the next model.
  absl::Status Step();
  // What a checkpoint keeps of the loop (ServerProgress::async), and taking it back.
  void Snapshot();
  absl::Status Restore();
  void Release(int64_t version);

  Server& server_;
  const ServerConfig::Async& async_;
  const int num_clients_;
  ModelState& global_;
  int64_t version_;
  EventQueue queue_;
  std::vector<uint8_t> in_flight_;
  int in_flight_count_ = 0;
  // Idle clients whose last task trained from the newest version.
  int idle_on_version_ = 0;
  // The version each client last trained from; -1: none yet.
  std::vector<int64_t> last_version_;
  // The virtual clock, and when the current server step began.
  double now_;
  double step_started_;
  // With online windows, the index of idle clients by online state, kept up to
  // date by the windows' opening and closing times (a heap of (time, client)
  // whose entry is current when it equals next_change_[client]; NaN for clients
  // in flight). online_fresh_ holds those that have not trained from the newest
  // version; trained_on_version_ the online idle ones that have, which become
  // fresh at the next step. wake_: the next change, infinite when none is due.
  std::optional<RankSet> online_idle_;
  std::optional<RankSet> online_fresh_;
  std::vector<int> trained_on_version_;
  std::priority_queue<std::pair<double, int>, std::vector<std::pair<double, int>>,
                      std::greater<>>
      changes_;
  std::vector<double> next_change_;
  double wake_ = std::numeric_limits<double>::infinity();
  int64_t dispatches_ = 0;
  int buffered_ = 0;
  // Arrivals since the last accepted one: a run that accepts nothing stops.
  int unaccepted_in_a_row_ = 0;
  RoundOutcome outcome_;
  double loss_weighted_ = 0.0;
  int64_t examples_ = 0;

  absl::Mutex mutex_;
  std::map<int64_t, Version> versions_ ABSL_GUARDED_BY(mutex_);
  std::map<int64_t, Task> tasks_ ABSL_GUARDED_BY(mutex_);  // by client
  std::set<ClientEvent, EarlierArrival> waiting_ ABSL_GUARDED_BY(mutex_);
  int ahead_ ABSL_GUARDED_BY(mutex_) = 0;  // started and not yet taken
  int max_ahead_ = 0;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::vector<std::thread> workers_;
};

Server::AsyncLoop::AsyncLoop(Server& server)
    : server_(server),
      async_(*server.config_.async),
      num_clients_(static_cast<int>(server.clients_.size())),
      global_(server.progress_.global),
      version_(server.progress_.rounds_done),
      in_flight_(server.clients_.size(), 0),
      last_version_(server.clients_.size(), -1),
      now_(server.progress_.pending.virtual_seconds),
      step_started_(now_) {}

Server::AsyncLoop::~AsyncLoop() {
  {
    absl::MutexLock lock(&mutex_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

absl::Status Server::AsyncLoop::CheckConfig() const {
  const ServerConfig& config = server_.config_;
  if (!config.task_seconds) {
    return absl::InvalidArgumentError("asynchronous mode needs the virtual clock (task_seconds)");
  }
  if (config.collective != nullptr || config.secure_aggregation.has_value() ||
      config.max_norm_to_median > 0 || config.one_shot || server_.lossy_download() ||
      config.poisson_sampling) {
    return absl::InvalidArgumentError(
        "asynchronous mode runs in one process, without secure aggregation, norm screening, "
        "one-shot mode, a lossy download or Poisson sampling");
  }
  if (!server_.aggregator_->properties().sums_only) {
    return absl::InvalidArgumentError(
        "asynchronous mode needs an aggregator whose accumulation is a sum (sums_only)");
  }
  if (async_.concurrency < 1 || async_.concurrency > num_clients_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "server.async.concurrency: must be in [1, ", num_clients_, "], got ", async_.concurrency));
  }
  if (async_.buffer_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("server.async.buffer_size: must be >= 1, got ", async_.buffer_size));
  }
  return async_.staleness.Check("server.async.staleness");
}

absl::Status Server::AsyncLoop::OpenVersion() {
  server_.StartContext(static_cast<int>(version_) + 1);
  const ModelState lent = server_.Lent(global_);
  FL_ASSIGN_OR_RETURN(RoundPlan plan, server_.aggregator_->Configure(lent, server_.context_));
  Version version;
  version.bytes_down = lent.NumBytes() + NumBytes(plan.broadcast);
  version.model = global_.Clone();
  version.plan = std::move(plan);
  absl::MutexLock lock(&mutex_);
  versions_[version_] = std::move(version);
  return absl::OkStatus();
}

void Server::AsyncLoop::FillSlots() {
  while (in_flight_count_ < async_.concurrency) {
    const std::optional<int> client = server_.config_.next_window ? DrawOnline() : DrawIdle();
    if (!client.has_value()) return;
    Start(*client);
  }
}

int Server::AsyncLoop::Draw(uint64_t attempt, int range) const {
  // A hash of (dispatch, attempt), reduced modulo the range (its bias is below
  // 2^-40 for any realistic federation): cheaper than seeding a generator for every
  // dispatch, and the same on every standard library.
  return static_cast<int>(DeriveSeed(server_.config_.seed, SeedStream::kAsyncDispatch,
                                     {static_cast<uint64_t>(dispatches_), attempt}) %
                          static_cast<uint64_t>(range));
}

std::optional<int> Server::AsyncLoop::DrawIdle() {
  const int idle = num_clients_ - in_flight_count_;
  CHECK_GT(idle, 0) << "concurrency is at most the number of clients";
  const int fresh = idle - idle_on_version_;
  auto eligible = [&](int k) {
    return !in_flight_[k] && (fresh == 0 || last_version_[k] != version_);
  };
  const int candidates = fresh > 0 ? fresh : idle;
  uint64_t attempt = 0;
  int client = 0;
  if (candidates >= num_clients_ / 8) {
    // Most clients qualify: draw until one does (a few draws).
    do client = Draw(attempt++, num_clients_); while (!eligible(client));
  } else {
    int nth = Draw(attempt, candidates);
    for (;; ++client) {
      if (eligible(client) && nth-- == 0) break;
    }
  }
  return client;
}

void Server::AsyncLoop::Track(int client) {
  const OnlineWindow window = server_.config_.next_window(server_.clients_[client]->id(), now_);
  double change = window.start;
  if (window.start <= now_) {
    change = window.end;
    online_idle_->Insert(client);
    if (last_version_[client] != version_) {
      online_fresh_->Insert(client);
    } else {
      trained_on_version_.push_back(client);
    }
  }
  next_change_[client] = change;
  if (std::isfinite(change)) changes_.emplace(change, client);
}

void Server::AsyncLoop::Untrack(int client) {
  online_idle_->Erase(client);
  online_fresh_->Erase(client);
  next_change_[client] = std::numeric_limits<double>::quiet_NaN();
}

void Server::AsyncLoop::Advance() {
  while (!changes_.empty() && changes_.top().first <= now_) {
    const auto [time, client] = changes_.top();
    changes_.pop();
    if (next_change_[client] != time) continue;  // superseded
    online_idle_->Erase(client);
    online_fresh_->Erase(client);
    Track(client);
  }
  while (!changes_.empty() && next_change_[changes_.top().second] != changes_.top().first) {
    changes_.pop();
  }
  wake_ = changes_.empty() ? std::numeric_limits<double>::infinity() : changes_.top().first;
}

std::optional<int> Server::AsyncLoop::DrawOnline() {
  // The k-th member in client order: the draw the order of arrivals cannot change.
  Advance();
  const RankSet& pool = online_fresh_->size() > 0 ? *online_fresh_ : *online_idle_;
  if (pool.size() == 0) return std::nullopt;
  return pool.Nth(Draw(0, pool.size()));
}

bool Server::AsyncLoop::Departs(const ClientEvent& event) const {
  // A task that would end at or after its window's close arrives at the close
  // (Start), when the client is offline; one that ends in time finds it online.
  return server_.config_.next_window &&
         server_.config_.next_window(server_.clients_[event.client]->id(), event.time).start >
             event.time;
}

void Server::AsyncLoop::Start(int client) {
  CHECK(!in_flight_[client]) << "client " << client << " is in flight already";
  ++dispatches_;
  if (online_idle_.has_value()) Untrack(client);
  if (last_version_[client] == version_) --idle_on_version_;
  ++in_flight_count_;
  in_flight_[client] = 1;
  last_version_[client] = version_;
  int64_t bytes_down;
  {
    absl::MutexLock lock(&mutex_);
    Version& version = versions_.at(version_);
    ++version.in_flight;
    bytes_down = version.bytes_down;
  }
  const int64_t id = server_.clients_[client]->id();
  double arrival =
      now_ + server_.config_.task_seconds(id, static_cast<int>(version_) + 1, bytes_down);
  if (server_.config_.next_window) {
    arrival = std::min(arrival, server_.config_.next_window(id, now_).end);
  }
  const ClientEvent event{arrival, client, version_};
  queue_.Push(event);
  absl::MutexLock lock(&mutex_);
  tasks_[client] = Task{event};
  waiting_.insert(event);
}

absl::StatusOr<ClientUpdate> Server::AsyncLoop::Train(const ClientEvent& event) {
  if (Departs(event)) {
    ClientUpdate departed;  // no step: triaged as dropped out
    departed.client_id = server_.clients_[event.client]->id();
    departed.planned_steps = 1;
    return departed;
  }
  const Version* version;
  {
    absl::MutexLock lock(&mutex_);
    version = &versions_.at(event.version);  // kept while the task is in flight
  }
  return server_.clients_[event.client]->Train(version->model, version->plan,
                                               static_cast<int>(event.version) + 1);
}

void Server::AsyncLoop::Work() {
  for (;;) {
    ClientEvent event;
    {
      absl::MutexLock lock(&mutex_);
      mutex_.Await(absl::Condition(
          +[](AsyncLoop* loop) ABSL_EXCLUSIVE_LOCKS_REQUIRED(loop->mutex_) {
            return loop->stopping_ || (!loop->waiting_.empty() && loop->ahead_ < loop->max_ahead_);
          },
          this));
      if (stopping_) return;
      event = *waiting_.begin();
      waiting_.erase(waiting_.begin());
      tasks_.at(event.client).started = true;
      ++ahead_;
    }
    absl::StatusOr<ClientUpdate> update = Train(event);
    absl::MutexLock lock(&mutex_);
    tasks_.at(event.client).result = std::move(update);
  }
}

absl::StatusOr<ClientUpdate> Server::AsyncLoop::Take(const ClientEvent& event) {
  bool train_here = false;
  {
    absl::MutexLock lock(&mutex_);
    Task& task = tasks_.at(event.client);
    if (!task.started) {
      task.started = true;
      waiting_.erase(event);
      ++ahead_;
      train_here = true;
    }
  }
  std::optional<absl::StatusOr<ClientUpdate>> trained;
  if (train_here) trained = Train(event);
  absl::MutexLock lock(&mutex_);
  Task& task = tasks_.at(event.client);
  if (trained.has_value()) {
    task.result = std::move(trained);
  } else {
    mutex_.Await(absl::Condition(
        +[](Task* t) { return t->result.has_value(); }, &task));
  }
  absl::StatusOr<ClientUpdate> update = std::move(*task.result);
  tasks_.erase(event.client);
  --ahead_;
  return update;
}

void Server::AsyncLoop::Release(int64_t version) {
  absl::MutexLock lock(&mutex_);
  auto it = versions_.find(version);
  // The newest version stays: new clients start from it.
  if (--it->second.in_flight == 0 && version != version_) versions_.erase(it);
}

void Server::AsyncLoop::Reject(const ClientEvent& event, const std::string& reason,
                               const absl::Status& status) {
  server_.clients_[event.client]->Acknowledge(false);
  outcome_.CountRejection(absl::StrCat("step ", version_ + 1),
                          server_.clients_[event.client]->id(), reason, status);
}

void Server::AsyncLoop::Apply(const ClientEvent& event, absl::StatusOr<ClientUpdate> update) {
  const int64_t staleness = version_ - event.version;
  ModelState start;
  {
    absl::MutexLock lock(&mutex_);
    const Version& version = versions_.at(event.version);
    outcome_.bytes_down += version.bytes_down;
    start = server_.Lent(version.model);  // shares its tensors; read only
  }
  if (update.ok()) outcome_.bytes_up += update->bytes_sent;
  const Triage triage = TriageUpdate(start, server_.config_.incomplete, update);
  if (!outcome_.Settle(triage, absl::StrCat("step ", version_ + 1),
                       server_.clients_[event.client]->id())) {
    server_.clients_[event.client]->Acknowledge(false);
    return;
  }
  if (async_.staleness.Drops(staleness)) {
    Reject(event, "stale",
           absl::OutOfRangeError(absl::StrCat("staleness ", staleness, " exceeds max_staleness ",
                                              *async_.staleness.max_staleness)));
    return;
  }
  const double weight = async_.staleness.Weight(staleness);
  ModelState& delta = update->delta;
  if (async_.mixing_rate.has_value()) {
    // FedAsync: the client's model relative to the current one, its parameters
    // times a s(tau); buffers become the client's.
    delta = ModelState::Difference(ModelState::Sum(start, 1.0, 1.0, delta), server_.Lent(global_));
    delta.Axpy(*async_.mixing_rate * weight - 1.0, 0.0, ModelState(delta));
  } else if (weight != 1.0) {
    delta.Axpy(weight - 1.0, 0.0, ModelState(delta));
  }
  const double loss = update->metrics.count("train_loss") ? update->metrics["train_loss"] : 0.0;
  const int64_t n = update->num_examples;
  const int64_t steps = update->local_steps;
  if (absl::Status status = server_.aggregator_->Accumulate(*std::move(update), server_.context_);
      !status.ok()) {
    Reject(event, "aggregator", status);
    return;
  }
  server_.clients_[event.client]->Acknowledge(true);
  ++outcome_.accepted;
  outcome_.local_steps += steps;
  loss_weighted_ += loss * static_cast<double>(n);
  examples_ += n;
  ++buffered_;
}

absl::Status Server::AsyncLoop::Step() {
  const int step = static_cast<int>(version_) + 1;
  server_.SetStage(step, "finalizing");
  FL_ASSIGN_OR_RETURN(ModelState next,
                      server_.aggregator_->Finalize(server_.Lent(global_), server_.context_));
  if (!server_.config_.unshared_tensors.empty()) {
    FL_RETURN_IF_ERROR(server_.CompleteWithUnshared(absl::StrCat("step ", step), global_, next));
  }
  if (!next.AllFinite()) {
    return absl::InternalError(absl::StrCat("step ", step, ": the aggregated model is not finite"));
  }
  global_ = std::move(next);
  outcome_.train_loss = examples_ > 0 ? loss_weighted_ / static_cast<double>(examples_) : 0.0;
  outcome_.virtual_seconds = now_ - step_started_;
  step_started_ = now_;
  {
    absl::MutexLock lock(&mutex_);
    auto it = versions_.find(version_);
    if (it->second.in_flight == 0) versions_.erase(it);
  }
  ++version_;
  buffered_ = 0;
  idle_on_version_ = 0;  // every idle client's last version is older now
  if (online_idle_.has_value()) {
    for (int client : trained_on_version_) {
      if (online_idle_->contains(client)) online_fresh_->Insert(client);
    }
    trained_on_version_.clear();
  }
  return absl::OkStatus();
}

void Server::AsyncLoop::Snapshot() {
  AsyncProgress& async = server_.progress_.async.emplace();
  async.in_flight = queue_.Pending();
  async.dispatches = dispatches_;
  absl::MutexLock lock(&mutex_);
  for (const auto& [number, version] : versions_) {
    if (version.in_flight > 0) {
      async.versions[number] = {version.model, version.plan, version.bytes_down};
    }
  }
}

absl::Status Server::AsyncLoop::Restore() {
  const AsyncProgress saved = *std::move(server_.progress_.async);
  server_.progress_.async.reset();
  // A step ends as a client arrives, before it is replaced: one fewer in flight.
  if (saved.in_flight.size() > static_cast<size_t>(async_.concurrency)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint has ", saved.in_flight.size(),
                     " clients in flight, more than server.async.concurrency = ",
                     async_.concurrency));
  }
  dispatches_ = saved.dispatches;
  absl::MutexLock lock(&mutex_);
  for (const auto& [number, version] : saved.versions) {
    versions_[number] = Version{version.model, version.plan, version.bytes_down, 0};
  }
  for (const ClientEvent& event : saved.in_flight) {
    if (event.client < 0 || event.client >= num_clients_ || in_flight_[event.client] ||
        event.version >= version_ || versions_.count(event.version) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the checkpoint's client ", event.client, " in flight from version ", event.version,
          " does not fit this run (", num_clients_, " clients, ", version_, " steps done)"));
    }
    in_flight_[event.client] = 1;
    ++in_flight_count_;
    last_version_[event.client] = event.version;
    ++versions_[event.version].in_flight;
    queue_.Push(event);
    tasks_[event.client] = Task{event};
    waiting_.insert(event);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Server::AsyncLoop::Run() {
  FL_RETURN_IF_ERROR(CheckConfig());
  const int workers = std::max(1, server_.config_.workers);
  max_ahead_ = 2 * workers;
  server_.EnterPhase(RoundPhase::kClients);
  if (server_.progress_.async.has_value()) FL_RETURN_IF_ERROR(Restore());
  FL_RETURN_IF_ERROR(OpenVersion());
  if (server_.config_.next_window) {
    online_idle_.emplace(num_clients_);
    online_fresh_.emplace(num_clients_);
    next_change_.assign(num_clients_, std::numeric_limits<double>::quiet_NaN());
    for (int k = 0; k < num_clients_; ++k) {
      if (!in_flight_[k]) Track(k);
    }
  }
  FillSlots();
  server_.before_checkpoint_ = [this] { Snapshot(); };
  if (workers > 1) {
    for (int w = 0; w < workers; ++w) workers_.emplace_back([this] { Work(); });
  }
  const int last = server_.config_.rounds;
  while (version_ < last) {
    if (in_flight_count_ < async_.concurrency &&
        (queue_.empty() || wake_ < queue_.Next().time)) {
      // Free slots, and a client comes online before the next arrival.
      if (std::isinf(wake_)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "step ", version_ + 1, ": no client is in flight or online at or after virtual second ",
            now_, " (client.system.trace_path)"));
      }
      now_ = wake_;
      FillSlots();
      continue;
    }
    FL_RETURN_IF_ERROR(Arrive(queue_.Pop()));
    if (buffered_ == async_.buffer_size) {
      FL_ASSIGN_OR_RETURN(const bool ended, CloseStep());
      if (ended) return static_cast<int>(version_);
    }
    if (version_ < last) FillSlots();
  }
  return last;
}

absl::Status Server::AsyncLoop::Arrive(const ClientEvent& event) {
  now_ = event.time;
  absl::StatusOr<ClientUpdate> update = Take(event);
  in_flight_[event.client] = 0;
  if (online_idle_.has_value()) Track(event.client);
  --in_flight_count_;
  idle_on_version_ += event.version == version_;
  const int accepted_before = outcome_.accepted;
  Apply(event, std::move(update));
  Release(event.version);
  unaccepted_in_a_row_ = outcome_.accepted > accepted_before ? 0 : unaccepted_in_a_row_ + 1;
  if (unaccepted_in_a_row_ > 10 * num_clients_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "step ", version_ + 1, ": ", unaccepted_in_a_row_, " arrivals in a row and none accepted",
        outcome_.first_error.ok() ? " (every client dropped out or was left out)"
                          : absl::StrCat("; first rejection: ", outcome_.first_error.message())));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Server::AsyncLoop::CloseStep() {
  FL_RETURN_IF_ERROR(Step());
  const RoundOutcome outcome = std::exchange(outcome_, RoundOutcome());
  loss_weighted_ = 0.0;
  examples_ = 0;
  FL_ASSIGN_OR_RETURN(const bool ended, server_.CloseRound(static_cast<int>(version_), outcome));
  if (!ended && version_ < server_.config_.rounds) FL_RETURN_IF_ERROR(OpenVersion());
  return ended;
}

absl::StatusOr<int> Server::RunAsync() {
  absl::StatusOr<int> steps;
  {
    AsyncLoop loop(*this);
    steps = loop.Run();
  }
  before_checkpoint_ = nullptr;
  return steps;
}

}  // namespace fl
