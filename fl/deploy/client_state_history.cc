#include "fl/deploy/client_state_history.h"

#include <filesystem>
#include <map>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "fl/atomic_file.h"
#include "fl/index_files.h"
#include "fl/status_macros.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl::deploy {
namespace {

constexpr char kRunFile[] = "run";
constexpr char kPrefix[] = "after_round_";
constexpr char kSuffix[] = ".state";

std::string RunLine(const std::string& spec_digest, int64_t client_id) {
  return absl::StrCat("fedkit client hook state: spec digest ", spec_digest, ", client ",
                      client_id, "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClientStateHistory>> ClientStateHistory::Open(
    const std::string& dir, int64_t client_id, const std::string& spec_digest,
    const c10::Device& device, ClientStateStore* store) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make the client state folder ", dir, ": ", error.message()));
  }
  const std::string run_path = absl::StrCat(dir, "/", kRunFile);
  const std::string expected = RunLine(spec_digest, client_id);
  if (std::filesystem::exists(run_path)) {
    FL_ASSIGN_OR_RETURN(std::string found, ReadTextFile(run_path, "client state folder's"));
    if (found != expected) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the client state folder ", dir, " belongs to another run or client (its ", kRunFile,
          " file says \"", absl::StripSuffix(found, "\n"), "\"; this is \"",
          absl::StripSuffix(expected, "\n"), "\"): remove it or choose another folder"));
    }
  } else {
    FL_RETURN_IF_ERROR(WriteFileAtomically(run_path, expected));
  }
  std::set<int> rounds;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    absl::string_view name = file;
    int round;
    if (absl::ConsumePrefix(&name, kPrefix) && absl::ConsumeSuffix(&name, kSuffix) &&
        absl::SimpleAtoi(name, &round) && round > 0) {
      rounds.insert(round);
    }
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot list the client state folder ", dir, ": ", error.message()));
  }
  if (!rounds.empty()) {
    LOG(INFO) << "client " << client_id << ": hook states after rounds " << *rounds.begin()
              << " to " << *rounds.rbegin() << " in " << dir;
  }
  return std::unique_ptr<ClientStateHistory>(
      new ClientStateHistory(dir, client_id, device, store, std::move(rounds)));
}

ClientStateHistory::ClientStateHistory(std::string dir, int64_t client_id,
                                       const c10::Device& device, ClientStateStore* store,
                                       std::set<int> rounds)
    : dir_(std::move(dir)),
      client_id_(client_id),
      device_(device),
      store_(store),
      rounds_(std::move(rounds)) {}

std::string ClientStateHistory::PathOf(int round) const {
  return absl::StrCat(dir_, "/", kPrefix, round, kSuffix);
}

absl::Status ClientStateHistory::Delete(int round) {
  std::error_code error;
  std::filesystem::remove(PathOf(round), error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot delete ", PathOf(round), ": ", error.message()));
  }
  rounds_.erase(round);
  return absl::OkStatus();
}

absl::StatusOr<int> ClientStateHistory::Rewind(int state_after_round) {
  auto after = rounds_.upper_bound(state_after_round);
  const int target = after == rounds_.begin() ? 0 : *std::prev(after);
  if (target != current_) {
    std::map<ClientStateStore::Key, TensorMap> states;
    if (target > 0) {
      const std::string path = PathOf(target);
      FL_ASSIGN_OR_RETURN(std::string bytes, ReadTextFile(path, "client state"));
      FL_ASSIGN_OR_RETURN(states, ParseClientStates(bytes, device_, path));
      for (const auto& [key, state] : states) {
        if (key.first != client_id_) {
          return absl::DataLossError(
              absl::StrCat(path, ": holds a state of client ", key.first, ", not ", client_id_));
        }
      }
    }
    if (target < current_) {
      LOG(INFO) << "client " << client_id_ << ": back to the hook state after round " << target
                << " (the server resumed from an earlier checkpoint)";
    }
    store_->Restore(std::move(states));
    current_ = target;
  }
  while (!rounds_.empty() && *rounds_.rbegin() > state_after_round) {
    FL_RETURN_IF_ERROR(Delete(*rounds_.rbegin()));
  }
  return current_;
}

absl::Status ClientStateHistory::Record(int round) {
  std::map<ClientStateStore::Key, TensorMap> states = store_->Snapshot();
  for (auto it = states.begin(); it != states.end();) {
    it = it->first.first == client_id_ ? std::next(it) : states.erase(it);
  }
  if (states.empty()) return absl::OkStatus();
  FL_RETURN_IF_ERROR(WriteFileAtomically(PathOf(round), SerializeClientStates(states)));
  rounds_.insert(round);
  current_ = round;
  return absl::OkStatus();
}

absl::Status ClientStateHistory::Forget(int checkpointed_round) {
  auto after = rounds_.upper_bound(checkpointed_round);
  if (after == rounds_.begin()) return absl::OkStatus();
  const int kept = *std::prev(after);
  while (*rounds_.begin() < kept) FL_RETURN_IF_ERROR(Delete(*rounds_.begin()));
  return absl::OkStatus();
}

}  // namespace fl::deploy
