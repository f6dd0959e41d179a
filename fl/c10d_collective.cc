#include "fl/c10d_collective.h"

#include <atomic>
#include <cstdlib>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "glog/logging.h"

namespace fl {
namespace {

constexpr char kStagePrefix[] = "fedkit/stage/";
constexpr char kHeartbeatPrefix[] = "fedkit/heartbeat/";
// The first failure any rank diagnosed, for the ranks that fail after rank 0 has
// ended and taken the store along.
constexpr char kFailureKey[] = "fedkit/failure";
constexpr auto kHeartbeatPeriod = std::chrono::milliseconds(250);
// How long a failing rank waits for the store to say who else stopped: the
// diagnosis itself watches heartbeats for 4 periods.
constexpr auto kDiagnosisDeadline = 4 * kHeartbeatPeriod + std::chrono::seconds(4);
// How long closing the store may take before it is left to end with the process.
constexpr auto kStoreCloseDeadline = 8 * kHeartbeatPeriod;

std::string StageKey(int rank) { return absl::StrCat(kStagePrefix, rank); }
std::string HeartbeatKey(int rank) { return absl::StrCat(kHeartbeatPrefix, rank); }

std::vector<uint8_t> Bytes(const std::string& text) { return {text.begin(), text.end()}; }

// The first of `names` that is set, with its name.
std::optional<std::pair<std::string, std::string>> FirstSet(
    const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr && *value != '\0') {
      return std::make_pair(name, std::string(value));
    }
  }
  return std::nullopt;
}

absl::StatusOr<int> ParseInt(const std::pair<std::string, std::string>& variable, int min) {
  int value = 0;
  if (!absl::SimpleAtoi(variable.second, &value) || value < min) {
    return absl::InvalidArgumentError(absl::StrCat("environment variable ", variable.first, "=\"",
                                                   variable.second, "\": expected an integer >= ",
                                                   min));
  }
  return value;
}

std::string FirstLine(std::string message) {
  // c10::Error appends a C++ backtrace; its first line is the message.
  if (size_t end = message.find('\n'); end != std::string::npos) message.resize(end);
  return message;
}

// What the heartbeat thread shares with its collective. Shared rather than owned
// by the collective: a store that stops answering (rank 0 frozen; on LibTorch
// 1.13 also a rank stopped part-way through a request, which blocks the store's
// single reading thread) blocks the thread in a read with no timeout, and the
// collective then leaves the thread behind instead of hanging.
struct HeartbeatState {
  absl::Notification done;
  absl::Mutex mutex;
  bool stopping ABSL_GUARDED_BY(mutex) = false;
  // The stage this rank is in, counted by its changes. The heartbeat records it
  // in the store as it changes, so that the rounds never wait on the store.
  std::string stage ABSL_GUARDED_BY(mutex) = "start-up";
  int64_t stage_changes ABSL_GUARDED_BY(mutex) = 0;
  // kFailureKey's value once the heartbeat has seen it set.
  std::string failure ABSL_GUARDED_BY(mutex);
  // The store failed a heartbeat (it timed out or was gone): on rank 0 its
  // serving thread may be blocked for good. Set before `done`.
  bool store_failed = false;
};

// What a diagnosis hands back; shared for the same reason as HeartbeatState.
struct DiagnosisState {
  absl::Notification done;
  // Set before `done`: the whole report, and whether the store answered.
  std::string report;
  bool store_answered = false;
};

class C10dCollective : public Collective {
 public:
  C10dCollective(ProcessGroupAddress address, c10::intrusive_ptr<c10d::TCPStore> store,
                 c10::intrusive_ptr<c10d::ProcessGroupGloo> group)
      : address_(std::move(address)), store_(std::move(store)), group_(std::move(group)) {
    heartbeat_thread_ = std::thread(&C10dCollective::Heartbeat, address_, heartbeat_);
  }

  ~C10dCollective() override {
    {
      absl::MutexLock lock(&heartbeat_->mutex);
      heartbeat_->stopping = true;
    }
    const auto patience = store_silent_ ? kHeartbeatPeriod : 8 * kHeartbeatPeriod;
    if (heartbeat_->done.WaitForNotificationWithTimeout(absl::FromChrono(patience))) {
      heartbeat_thread_.join();
      // A heartbeat that timed out on a blocked store ended as one that stopped.
      if (heartbeat_->store_failed) store_silent_ = true;
    } else {
      // Its read of the store never returned.
      heartbeat_thread_.detach();
      store_silent_ = true;
    }
    // Gloo's group holds the store too: it goes first, so that the last
    // reference to the store is this collective's.
    group_.reset();
    if (store_silent_) {
      // Known blocked: waiting out the deadline would only delay the exit.
      store_.release();
    } else {
      DestroyWithinDeadline(std::move(store_));
    }
  }

  // On rank 0 the store's destructor joins its serving thread, which a request
  // sent only in part blocks for good, whenever it arrives: before this
  // collective ends or while the store is being destroyed. The store is
  // destroyed on a thread of its own; one still blocked after the deadline is
  // left behind and the store ends with the process.
  static void DestroyWithinDeadline(c10::intrusive_ptr<c10d::TCPStore> store) {
    auto destroyed = std::make_shared<absl::Notification>();
    std::thread([store = std::move(store), destroyed]() mutable {
      store.reset();
      destroyed->Notify();
    }).detach();
    if (!destroyed->WaitForNotificationWithTimeout(absl::FromChrono(kStoreCloseDeadline))) {
      LOG(WARNING) << "c10d: the rendezvous store did not close within "
                   << absl::FormatDuration(absl::FromChrono(kStoreCloseDeadline))
                   << " (a request sent only in part blocks it); it ends with the process";
    }
  }

  int rank() const override { return address_.rank; }
  int world_size() const override { return address_.world_size; }

  void SetStage(const std::string& stage) override {
    absl::MutexLock lock(&heartbeat_->mutex);
    heartbeat_->stage = stage;
    ++heartbeat_->stage_changes;
  }

  absl::Status AllReduceSum(std::vector<at::Tensor>& tensors) override {
    return ByDtype(tensors, /*broadcast=*/false);
  }

  absl::Status Broadcast(std::vector<at::Tensor>& tensors) override {
    return ByDtype(tensors, /*broadcast=*/true);
  }

  absl::StatusOr<std::vector<std::string>> Gather(std::string message) override {
    try {
      std::vector<at::Tensor> mine{at::tensor({static_cast<int64_t>(message.size())}, at::kLong)};
      std::vector<std::vector<at::Tensor>> lengths(1);
      for (int r = 0; r < world_size(); ++r) lengths[0].push_back(at::empty({1}, at::kLong));
      Wait(group_->allgather(lengths, mine));
      if (rank() != 0) {
        payload_bytes_ += static_cast<int64_t>(message.size());
        if (!message.empty()) {
          std::vector<at::Tensor> out{AsBytes(message)};
          Wait(group_->send(out, 0, kGatherTag));
        }
        return std::vector<std::string>();
      }
      std::vector<std::string> messages(world_size());
      messages[0] = std::move(message);
      for (int r = 1; r < world_size(); ++r) {
        const int64_t length = lengths[0][r].item<int64_t>();
        if (length == 0) continue;
        std::vector<at::Tensor> in{at::empty({length}, at::kByte)};
        Wait(group_->recv(in, r, kGatherTag));
        messages[r].assign(static_cast<const char*>(in[0].data_ptr()), length);
      }
      return messages;
    } catch (const std::exception& e) {
      return Failure("gathering messages on rank 0", e);
    }
  }

  absl::StatusOr<std::string> BroadcastMessage(std::string message) override {
    try {
      std::vector<at::Tensor> length{
          at::tensor({static_cast<int64_t>(rank() == 0 ? message.size() : 0)}, at::kLong)};
      Wait(group_->broadcast(length));
      const int64_t size = length[0].item<int64_t>();
      if (size == 0) return std::string();
      std::vector<at::Tensor> data{rank() == 0 ? AsBytes(message) : at::empty({size}, at::kByte)};
      Wait(group_->broadcast(data));
      if (rank() == 0) {
        payload_bytes_ += size;
        return message;
      }
      return std::string(static_cast<const char*>(data[0].data_ptr()), size);
    } catch (const std::exception& e) {
      return Failure("broadcasting a message from rank 0", e);
    }
  }

  int64_t payload_bytes() const override { return payload_bytes_; }

 private:
  static constexpr int kGatherTag = 7;

  static at::Tensor AsBytes(const std::string& message) {
    return at::from_blob(const_cast<char*>(message.data()), {static_cast<int64_t>(message.size())},
                         at::kByte);
  }

  void Wait(const c10::intrusive_ptr<c10d::Work>& work) { work->wait(); }

  // One collective per dtype over the tensors concatenated, then copied back:
  // Gloo reduces or broadcasts one buffer per call, and every process builds the
  // same buffers from the same layout.
  absl::Status ByDtype(std::vector<at::Tensor>& tensors, bool broadcast) {
    std::map<at::ScalarType, std::vector<size_t>> groups;
    for (size_t i = 0; i < tensors.size(); ++i) groups[tensors[i].scalar_type()].push_back(i);
    try {
      for (const auto& [dtype, members] : groups) {
        std::vector<at::Tensor> flat;
        for (size_t i : members) flat.push_back(tensors[i].detach().to(at::kCPU).reshape({-1}));
        std::vector<at::Tensor> buffer{at::cat(flat)};
        if (broadcast) {
          Wait(group_->broadcast(buffer));
          if (rank() == 0) payload_bytes_ += static_cast<int64_t>(buffer[0].nbytes());
        } else {
          Wait(group_->allreduce(buffer));
          payload_bytes_ += static_cast<int64_t>(buffer[0].nbytes());
        }
        int64_t offset = 0;
        for (size_t i : members) {
          at::Tensor& tensor = tensors[i];
          const int64_t n = tensor.numel();
          // A copy, not a view of the shared buffer, so each tensor owns its storage.
          at::Tensor part = buffer[0].narrow(0, offset, n).view(tensor.sizes()).clone();
          offset += n;
          tensor = part.to(tensor.device());
        }
      }
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return Failure(broadcast ? "broadcasting from rank 0" : "all-reducing", e);
    }
  }

  static void Heartbeat(ProcessGroupAddress address, std::shared_ptr<HeartbeatState> state) {
    try {
      c10d::TCPStoreOptions options;
      options.port = static_cast<uint16_t>(address.master_port);
      options.waitWorkers = false;
      options.timeout = std::chrono::seconds(5);
      c10d::TCPStore beat(address.master_addr, options);
      bool seen_failure = false;
      int64_t recorded_changes = 0;  // ConnectC10d recorded "start-up".
      absl::Time next_beat = absl::Now();
      for (;;) {
        std::string stage;
        bool stage_changed = false;
        {
          absl::MutexLock lock(&state->mutex);
          auto woken = [&state, recorded_changes] {
            return state->stopping || state->stage_changes != recorded_changes;
          };
          state->mutex.AwaitWithDeadline(absl::Condition(&woken), next_beat);
          if (state->stopping) break;
          if (state->stage_changes != recorded_changes) {
            stage = state->stage;
            recorded_changes = state->stage_changes;
            stage_changed = true;
          }
        }
        if (stage_changed) beat.set(StageKey(address.rank), Bytes(stage));
        if (absl::Now() < next_beat) continue;
        beat.add(HeartbeatKey(address.rank), 1);
        if (!seen_failure && beat.check({kFailureKey})) {
          const std::vector<uint8_t> failure = beat.get(kFailureKey);
          absl::MutexLock lock(&state->mutex);
          state->failure.assign(failure.begin(), failure.end());
          seen_failure = true;
        }
        next_beat = absl::Now() + absl::FromChrono(kHeartbeatPeriod);
      }
    } catch (const std::exception& e) {
      // The store is gone (rank 0 ended) or blocked; the next collective reports it.
      VLOG(1) << "heartbeat stopped: " << e.what();
      state->store_failed = true;
    }
    state->done.Notify();
  }

  // Runs on its own thread: which peers stopped answering and where each was
  // last seen, as the end of `state->report` (after `headline`), left in the
  // store for the others when the store answered.
  static void Diagnose(c10::intrusive_ptr<c10d::TCPStore> store, ProcessGroupAddress address,
                       std::string stage, std::string headline,
                       std::shared_ptr<DiagnosisState> state) {
    try {
      store->setTimeout(std::chrono::seconds(2));
      std::vector<int64_t> before(address.world_size);
      for (int r = 0; r < address.world_size; ++r) before[r] = store->add(HeartbeatKey(r), 0);
      std::this_thread::sleep_for(4 * kHeartbeatPeriod);
      std::vector<std::string> lines;
      for (int r = 0; r < address.world_size; ++r) {
        if (r == address.rank) continue;
        const bool beating = store->add(HeartbeatKey(r), 0) != before[r];
        const std::vector<uint8_t> seen =
            store->check({StageKey(r)}) ? store->get(StageKey(r)) : std::vector<uint8_t>();
        const std::string where(seen.begin(), seen.end());
        if (!beating) {
          lines.push_back(absl::StrCat("rank ", r, " is not answering (dead or stopped; last seen at ",
                                       where.empty() ? "start-up" : where, ")"));
        } else if (where != stage) {
          lines.push_back(absl::StrCat("rank ", r, " is alive at ", where));
        }
      }
      state->report = absl::StrCat(headline, lines.empty()
                                                 ? "every other rank is alive at the same stage"
                                                 : absl::StrJoin(lines, "; "));
      state->store_answered = true;
      // The first failure stays in the store for the other ranks' heartbeats.
      if (!store->check({kFailureKey})) store->set(kFailureKey, Bytes(state->report));
    } catch (const std::exception& e) {
      VLOG(1) << "diagnosis stopped: " << FirstLine(e.what());
    }
    // The collective may be gone as soon as `done` is seen: the store must not
    // be destroyed here, on a thread nobody waits for.
    store.reset();
    state->done.Notify();
  }

  // Why the store gave no diagnosis, from where this rank stands.
  std::string StoreSilence() {
    const std::string store = absl::StrCat("rank 0, which holds the rendezvous store at ",
                                           address_.master_addr, ":", address_.master_port);
    absl::MutexLock lock(&heartbeat_->mutex);
    // Rank 0 may have ended because another rank failed: that failure is the news.
    if (!heartbeat_->failure.empty()) {
      return absl::StrCat(store, ", has ended; the first failure reported: ", heartbeat_->failure);
    }
    if (rank() == 0) {
      return "the rendezvous store this rank holds is not answering (blocked, most likely by a "
             "rank stopped part-way through a request)";
    }
    return absl::StrCat(store, ", is not answering (dead or stopped, or its store blocked by a "
                        "rank stopped part-way through a request)");
  }

  absl::Status Failure(const std::string& what, const std::exception& e) {
    std::string stage;
    {
      absl::MutexLock lock(&heartbeat_->mutex);
      stage = heartbeat_->stage;
    }
    const std::string headline =
        absl::StrCat("rank ", rank(), " at ", stage, ": ", what, " failed (", FirstLine(e.what()), "): ");
    if (!store_silent_) {
      auto diagnosis = std::make_shared<DiagnosisState>();
      // Detached, holding the store: a read the store never answers keeps the
      // thread, and with it the store, until the process ends.
      std::thread(&C10dCollective::Diagnose, store_, address_, stage, headline, diagnosis).detach();
      if (diagnosis->done.WaitForNotificationWithTimeout(absl::FromChrono(kDiagnosisDeadline)) &&
          diagnosis->store_answered) {
        // Rank 0's exit takes the store along: a few heartbeats first, so the
        // others read the report.
        if (rank() == 0) std::this_thread::sleep_for(4 * kHeartbeatPeriod);
        return absl::UnavailableError(diagnosis->report);
      }
      store_silent_ = true;
    }
    return absl::UnavailableError(absl::StrCat(headline, StoreSilence()));
  }

  const ProcessGroupAddress address_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  int64_t payload_bytes_ = 0;
  // Set once the store missed a diagnosis's deadline or failed it; no later
  // failure asks it again, and it is never destroyed.
  bool store_silent_ = false;
  std::shared_ptr<HeartbeatState> heartbeat_ = std::make_shared<HeartbeatState>();
  std::thread heartbeat_thread_;
};

}  // namespace

absl::StatusOr<ProcessGroupAddress> ProcessGroupAddressFromEnvironment() {
  ProcessGroupAddress address;
  // As torchrun, then as Open MPI's mpirun, then as Slurm's srun set them.
  const std::vector<std::pair<std::string, std::vector<std::string>>> sources = {
      {"RANK/WORLD_SIZE", {"RANK", "WORLD_SIZE"}},
      {"Open MPI", {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}},
      {"Slurm", {"SLURM_PROCID", "SLURM_NTASKS"}}};
  for (const auto& [source, names] : sources) {
    auto rank = FirstSet({names[0]});
    auto size = FirstSet({names[1]});
    if (!rank.has_value() || !size.has_value()) continue;
    absl::StatusOr<int> r = ParseInt(*rank, 0);
    if (!r.ok()) return r.status();
    absl::StatusOr<int> w = ParseInt(*size, 1);
    if (!w.ok()) return w.status();
    if (*r >= *w) {
      return absl::InvalidArgumentError(absl::StrCat(names[0], "=", *r, " must be below ",
                                                     names[1], "=", *w));
    }
    address.rank = *r;
    address.world_size = *w;
    address.source = source;
    break;
  }
  if (address.source.empty()) {
    return absl::InvalidArgumentError(
        "simulation.backend C10D: RANK and WORLD_SIZE are not set (nor Open MPI's or Slurm's "
        "equivalents); start the processes with bazel run //tools:launch, torchrun-style "
        "variables, mpirun or srun");
  }
  auto addr = FirstSet({"MASTER_ADDR"});
  auto port = FirstSet({"MASTER_PORT"});
  if (!addr.has_value() || !port.has_value()) {
    return absl::InvalidArgumentError(
        "simulation.backend C10D: MASTER_ADDR and MASTER_PORT must name rank 0's host and a free "
        "port there, as for PyTorch");
  }
  absl::StatusOr<int> p = ParseInt(*port, 1);
  if (!p.ok()) return p.status();
  if (*p > 65535) return absl::InvalidArgumentError("MASTER_PORT must be at most 65535");
  address.master_addr = addr->second;
  address.master_port = *p;
  return address;
}

absl::StatusOr<std::unique_ptr<Collective>> ConnectC10d(const ProcessGroupAddress& address,
                                                        std::chrono::milliseconds timeout) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(address.master_port);
    options.isServer = address.rank == 0;
    options.numWorkers = address.world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(address.master_addr, options);
    store->set(StageKey(address.rank), Bytes("start-up"));
    auto group_options = c10d::ProcessGroupGloo::Options::create(timeout);
    if (auto interface = FirstSet({"GLOO_SOCKET_IFNAME"}); interface.has_value()) {
      group_options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForInterface(interface->second));
    } else if (address.master_addr == "127.0.0.1" || address.master_addr == "localhost") {
      group_options->devices.push_back(
          c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    } else {
      group_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    }
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, address.rank,
                                                             address.world_size, group_options);
    LOG(INFO) << "c10d: rank " << address.rank << " of " << address.world_size << " (from "
              << address.source << "), store at " << address.master_addr << ":"
              << address.master_port;
    return std::unique_ptr<Collective>(
        std::make_unique<C10dCollective>(address, std::move(store), std::move(group)));
  } catch (const std::exception& e) {
    const std::string message = FirstLine(e.what());
    return absl::UnavailableError(absl::StrCat(
        "rank ", address.rank, ": could not join the ", address.world_size,
        " processes at ", address.master_addr, ":", address.master_port, " within ",
        timeout.count() / 1000, " s (", message, ")"));
  }
}

}  // namespace fl
