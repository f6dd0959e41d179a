#include "fl/update_triage.h"

#include "absl/strings/str_cat.h"

namespace fl {
namespace {

Triage Reject(std::string reason, absl::Status status) {
  Triage triage;
  triage.kind = Triage::Kind::kRejected;
  triage.reason = std::move(reason);
  triage.status = std::move(status);
  return triage;
}

}  // namespace

Triage TriageUpdate(const ModelState& global, IncompleteUpdates incomplete,
                    absl::StatusOr<ClientUpdate>& update) {
  if (!update.ok()) return Reject("training", update.status());
  if (update->planned_steps > 0 && update->local_steps == 0) {
    return {.kind = Triage::Kind::kDropped};
  }
  if (absl::Status layout = global.CheckSameLayout(update->delta); !layout.ok()) {
    return Reject("shape", absl::InvalidArgumentError(absl::StrCat("delta: ", layout.message())));
  }
  if (!update->delta.AllFinite()) {
    return Reject("non_finite", absl::InvalidArgumentError("delta is not finite"));
  }
  for (const auto& [name, extra] : update->extras) {
    if (!extra.AllFinite()) {
      return Reject("non_finite",
                    absl::InvalidArgumentError(absl::StrCat("extra \"", name, "\" is not finite")));
    }
  }
  if (update->num_examples <= 0) {
    return Reject("num_examples", absl::InvalidArgumentError(
                                      absl::StrCat("num_examples is ", update->num_examples)));
  }
  Triage triage;
  if (update->local_steps < update->planned_steps) {
    triage.incomplete = true;
    if (incomplete == IncompleteUpdates::kDrop) {
      triage.kind = Triage::Kind::kLeftOut;
    } else if (incomplete == IncompleteUpdates::kScale) {
      const double scale = static_cast<double>(update->planned_steps) / update->local_steps;
      // Parameters times scale (in place: + (scale - 1) x itself); buffers as they are.
      update->delta.Axpy(scale - 1.0, 0.0, ModelState(update->delta));
    }
  }
  return triage;
}

}  // namespace fl
