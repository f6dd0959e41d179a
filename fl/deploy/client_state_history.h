#ifndef FL_DEPLOY_CLIENT_STATE_HISTORY_H_
#define FL_DEPLOY_CLIENT_STATE_HISTORY_H_

// A client process's hook state (SCAFFOLD's c_i, EFL's residuals, kept momentum:
// fl/client_state_store.h), kept on the client's own disk after every round in
// which the server accepted its update, so that
// - a client process that restarts continues from the state it had, and
// - when the server resumes from a checkpoint taken before rounds this client has
//   already trained in, the client goes back to the state it had then, and the
//   resumed run equals the uninterrupted one bit for bit.
//
// Each state is a file DIR/after_round_<r>.state (fl/wire.h's client-state
// encoding, written atomically). DIR/run names the run's spec digest and the
// client's id, so that no other run or client ever loads them. Only what a resume
// can need is kept: the newest state at or before the server's checkpoint, and
// the later ones (the task tells the client which checkpoint that is).

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include <c10/core/Device.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/client_state_store.h"

namespace fl::deploy {

class ClientStateHistory {
 public:
  // Creates `dir` when missing; `store` (the client's, which must outlive this)
  // is where states are recorded from and restored to. Errors name `dir`: it
  // cannot be made or read, or holds another run's or another client's states.
  static absl::StatusOr<std::unique_ptr<ClientStateHistory>> Open(const std::string& dir,
                                                                  int64_t client_id,
                                                                  const std::string& spec_digest,
                                                                  const c10::Device& device,
                                                                  ClientStateStore* store);

  // Before a task: the store gets the state recorded after the newest round <=
  // `state_after_round` (no state when there is none), unless it holds it
  // already, and the states of later rounds are deleted (the server went back
  // before them). Returns the round whose state the store now holds (0: none).
  // Errors name the file that cannot be read.
  absl::StatusOr<int> Rewind(int state_after_round);
  // After the server accepted this client's update of `round`: records the
  // store's committed state (nothing when the client holds none).
  absl::Status Record(int round);
  // Deletes the states older than the newest one at or before
  // `checkpointed_round`: no resume can go back to them.
  absl::Status Forget(int checkpointed_round);

  // The rounds with a recorded state, ascending.
  const std::set<int>& rounds() const { return rounds_; }

 private:
  ClientStateHistory(std::string dir, int64_t client_id, const c10::Device& device,
                     ClientStateStore* store, std::set<int> rounds);
  std::string PathOf(int round) const;
  absl::Status Delete(int round);

  const std::string dir_;
  const int64_t client_id_;
  const c10::Device device_;
  ClientStateStore* const store_;
  std::set<int> rounds_;
  // The round whose state the store holds; 0: none (the state of a new client).
  int current_ = 0;
};

}  // namespace fl::deploy

#endif  // FL_DEPLOY_CLIENT_STATE_HISTORY_H_
