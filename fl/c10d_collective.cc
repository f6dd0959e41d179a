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

// What the heartbeat thread shares with its collective. Shared rather than owned
// by the collective: a frozen rank 0 blocks the thread in a store read that has no
// timeout, and the collective then leaves the thread behind instead of hanging.
struct HeartbeatState {
  absl::Notification stop;
  absl::Notification done;
  absl::Mutex mutex;
  // kFailureKey's value once the heartbeat has seen it set.
  std::string failure ABSL_GUARDED_BY(mutex);
};

class C10dCollective : public Collective {
 public:
  C10dCollective(ProcessGroupAddress address, c10::intrusive_ptr<c10d::TCPStore> store,
                 c10::intrusive_ptr<c10d::ProcessGroupGloo> group)
      : address_(std::move(address)), store_(std::move(store)), group_(std::move(group)) {
    heartbeat_thread_ = std::thread(&C10dCollective::Heartbeat, address_, heartbeat_);
  }

  ~C10dCollective() override {
    heartbeat_->stop.Notify();
    if (heartbeat_->done.WaitForNotificationWithTimeout(absl::FromChrono(8 * kHeartbeatPeriod))) {
      heartbeat_thread_.join();
    } else {
      heartbeat_thread_.detach();
    }
  }

  int rank() const override { return address_.rank; }
  int world_size() const override { return address_.world_size; }

  void SetStage(const std::string& stage) override {
    stage_ = stage;
    try {
      store_->set(StageKey(rank()), Bytes(stage));
    } catch (const std::exception& e) {
      // The next collective fails and says so; the stage is only a diagnosis.
      VLOG(1) << "could not record stage: " << e.what();
    }
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
      do {
        beat.add(HeartbeatKey(address.rank), 1);
        if (!seen_failure && beat.check({kFailureKey})) {
          const std::vector<uint8_t> failure = beat.get(kFailureKey);
          absl::MutexLock lock(&state->mutex);
          state->failure.assign(failure.begin(), failure.end());
          seen_failure = true;
        }
      } while (!state->stop.WaitForNotificationWithTimeout(absl::FromChrono(kHeartbeatPeriod)));
    } catch (const std::exception& e) {
      // The store is gone (rank 0 ended); the next collective reports it.
      VLOG(1) << "heartbeat stopped: " << e.what();
    }
    state->done.Notify();
  }

  // Which peers stopped answering, and where each was last seen. Sets
  // `store_answered` when the store did.
  std::string Diagnose(bool& store_answered) {
    store_answered = false;
    try {
      store_->setTimeout(std::chrono::seconds(2));
      // LibTorch's TCPStore applies a timeout to its connection's reads in a get
      // (a wait); add() alone would wait on a frozen rank 0 as long as the last get.
      store_->get(StageKey(rank()));
      std::vector<int64_t> before(world_size());
      for (int r = 0; r < world_size(); ++r) before[r] = store_->add(HeartbeatKey(r), 0);
      std::this_thread::sleep_for(4 * kHeartbeatPeriod);
      std::vector<std::string> lines;
      for (int r = 0; r < world_size(); ++r) {
        if (r == rank()) continue;
        const bool beating = store_->add(HeartbeatKey(r), 0) != before[r];
        const std::vector<uint8_t> stage =
            store_->check({StageKey(r)}) ? store_->get(StageKey(r)) : std::vector<uint8_t>();
        const std::string where(stage.begin(), stage.end());
        if (!beating) {
          lines.push_back(absl::StrCat("rank ", r, " is not answering (dead or stopped; last seen at ",
                                       where.empty() ? "start-up" : where, ")"));
        } else if (where != stage_) {
          lines.push_back(absl::StrCat("rank ", r, " is alive at ", where));
        }
      }
      store_answered = true;
      if (lines.empty()) return "every other rank is alive at the same stage";
      return absl::StrJoin(lines, "; ");
    } catch (const std::exception& e) {
      const std::string store = absl::StrCat("rank 0, which holds the rendezvous store at ",
                                             address_.master_addr, ":", address_.master_port);
      absl::MutexLock lock(&heartbeat_->mutex);
      // Rank 0 may have ended because another rank failed: that failure is the news.
      if (!heartbeat_->failure.empty()) {
        return absl::StrCat(store, ", has ended; the first failure reported: ", heartbeat_->failure);
      }
      return absl::StrCat(store, ", is not answering (dead or stopped)");
    }
  }

  absl::Status Failure(const std::string& what, const std::exception& e) {
    std::string message = e.what();
    // c10::Error appends a C++ backtrace; its first line is the message.
    if (size_t end = message.find('\n'); end != std::string::npos) message.resize(end);
    bool store_answered = false;
    const std::string diagnosis = Diagnose(store_answered);
    std::string failure =
        absl::StrCat("rank ", rank(), " at ", stage_, ": ", what, " failed (", message, "): ", diagnosis);
    if (store_answered) Publish(failure);
    return absl::UnavailableError(std::move(failure));
  }

  // Leaves the first failure in the store for the other ranks' heartbeats to read.
  // Rank 0's exit takes the store along, so it waits a few heartbeats first.
  void Publish(const std::string& failure) {
    try {
      if (!store_->check({kFailureKey})) store_->set(kFailureKey, Bytes(failure));
    } catch (const std::exception& e) {
      VLOG(1) << "could not publish the failure: " << e.what();
      return;
    }
    if (rank() == 0) std::this_thread::sleep_for(4 * kHeartbeatPeriod);
  }

  const ProcessGroupAddress address_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  std::string stage_ = "start-up";
  int64_t payload_bytes_ = 0;
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
    std::string message = e.what();
    if (size_t end = message.find('\n'); end != std::string::npos) message.resize(end);
    return absl::UnavailableError(absl::StrCat(
        "rank ", address.rank, ": could not join the ", address.world_size,
        " processes at ", address.master_addr, ":", address.master_port, " within ",
        timeout.count() / 1000, " s (", message, ")"));
  }
}

}  // namespace fl
