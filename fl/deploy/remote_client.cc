#include "fl/deploy/remote_client.h"

#include "absl/strings/str_cat.h"
#include "fl/deploy/evaluation_task.h"
#include "fl/status_macros.h"
#include "fl/wire.h"

namespace fl::deploy {

RemoteClient::RemoteClient(int64_t id, int64_t num_examples, Coordinator* coordinator,
                           absl::Duration deadline, c10::Device device)
    : id_(id),
      num_examples_(num_examples),
      coordinator_(coordinator),
      deadline_(deadline),
      device_(device) {}

absl::StatusOr<ClientUpdate> RemoteClient::Train(const ModelState& global, const RoundPlan& plan,
                                                 int round) {
  FL_ASSIGN_OR_RETURN(std::string answer, coordinator_->RunTask(id_, round,
                                                                SerializeTask(global, plan, round),
                                                                deadline_));
  const std::string source = absl::StrCat("round ", round, ": client ", id_);
  FL_ASSIGN_OR_RETURN(std::vector<IndexedUpdate> updates, ParseUpdates(answer, device_, source));
  if (updates.size() != 1) {
    return absl::DataLossError(
        absl::StrCat(source, ": an answer holds one outcome, got ", updates.size()));
  }
  absl::StatusOr<ClientUpdate> update = std::move(updates[0].update);
  if (update.ok() && update->client_id != id_) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the update says it is client ", update->client_id, "'s"));
  }
  return update;
}

void RemoteClient::Acknowledge(bool accepted) { coordinator_->SendVerdict(id_, accepted); }

absl::StatusOr<OwnEvaluation> RemoteClient::EvaluateOwnModel(
    const ModelState& global, const std::vector<int64_t>& test_indices, int round) {
  RoundPlan plan;
  plan.broadcast = EvaluationBroadcast(test_indices);
  FL_ASSIGN_OR_RETURN(std::string answer,
                      coordinator_->RunTask(id_, round, SerializeTask(global, plan, round),
                                            deadline_, /*evaluation=*/true));
  const std::string source = absl::StrCat("evaluation after round ", round, ": client ", id_);
  FL_ASSIGN_OR_RETURN(std::vector<IndexedUpdate> outcomes, ParseUpdates(answer, device_, source));
  if (outcomes.size() != 1) {
    return absl::DataLossError(
        absl::StrCat(source, ": an answer holds one outcome, got ", outcomes.size()));
  }
  FL_ASSIGN_OR_RETURN(ClientUpdate outcome, std::move(outcomes[0].update));
  return ReadEvaluationAnswer(outcome, id_, source);
}

}  // namespace fl::deploy
