#ifndef FL_UPDATE_TRIAGE_H_
#define FL_UPDATE_TRIAGE_H_

// What the server does with one client's answer before any aggregator sees it, the
// same in the synchronous rounds and the asynchronous loop: a failed training, a
// misshapen or non-finite update or one without examples is rejected (with the
// reason metrics.csv counts it under); a client that completed no step dropped
// out; an incomplete update is kept, left out or scaled as the spec says.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/client_update.h"
#include "fl/model_state.h"

namespace fl {

// What happens to an update with fewer local steps than planned
// (ServerSpec.incomplete_updates).
enum class IncompleteUpdates { kKeep, kDrop, kScale };

struct Triage {
  enum class Kind {
    kAccept,    // goes on to the aggregator
    kDropped,   // completed no step: sent nothing
    kLeftOut,   // incomplete, and the spec drops incomplete updates
    kRejected,  // see reason and status
  };
  Kind kind = Kind::kAccept;
  // Fewer local steps than planned (whatever the kind, but kDropped).
  bool incomplete = false;
  // For kRejected: "training", "shape", "non_finite" or "num_examples".
  std::string reason;
  absl::Status status;
};

// Triages `update` against the model it was trained from. Under kScale an
// incomplete update's parameter delta is scaled by planned / completed steps in
// place (EFL's p_k = E p^k / s_k, for any aggregator).
Triage TriageUpdate(const ModelState& global, IncompleteUpdates incomplete,
                    absl::StatusOr<ClientUpdate>& update);

}  // namespace fl

#endif  // FL_UPDATE_TRIAGE_H_
