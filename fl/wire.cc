#include "fl/wire.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "fl/status_macros.h"
#include "fl/tensor_record.h"
#include "fl/wire.pb.h"
#include "glog/logging.h"

namespace fl {
namespace {

using fedkit::CheckpointTensor;

// Records over protobuf's 2 GB limit are a tensor that large: not supported.
std::string Bytes(const google::protobuf::Message& message) {
  absl::StatusOr<std::string> bytes = DeterministicBytes(message);
  CHECK(bytes.ok()) << bytes.status();
  return *std::move(bytes);
}

void AppendFramed(const google::protobuf::Message& message, std::string& out) {
  const std::string record = Bytes(message);
  const uint64_t length = record.size();
  out.append(reinterpret_cast<const char*>(&length), sizeof(length));
  out.append(record);
}

// The records of `bytes`, each checked against what is left.
absl::StatusOr<std::vector<absl::string_view>> SplitFramed(absl::string_view bytes,
                                                           const std::string& source) {
  std::vector<absl::string_view> records;
  while (!bytes.empty()) {
    uint64_t length = 0;
    if (bytes.size() < sizeof(length)) {
      return absl::DataLossError(absl::StrCat(source, ": truncated record length"));
    }
    std::memcpy(&length, bytes.data(), sizeof(length));
    bytes.remove_prefix(sizeof(length));
    if (length > bytes.size()) {
      return absl::DataLossError(absl::StrCat(source, ": record of ", length, " bytes, ",
                                              bytes.size(), " left"));
    }
    records.push_back(bytes.substr(0, length));
    bytes.remove_prefix(length);
  }
  return records;
}

void AddEntries(const ModelState& state, const std::string& extra,
                google::protobuf::RepeatedPtrField<CheckpointTensor>& out) {
  for (const ModelState::Entry& entry : state.entries()) {
    CheckpointTensor& record = *out.Add();
    record = TensorToRecord(CheckpointTensor::UNKNOWN, entry.name, entry.tensor);
    record.set_is_buffer(entry.is_buffer);
    record.set_hook(extra);
  }
}

absl::StatusOr<ModelState::Entry> EntryFromRecord(const CheckpointTensor& record,
                                                  const c10::Device& device,
                                                  const std::string& where) {
  FL_ASSIGN_OR_RETURN(at::Tensor tensor, TensorFromRecord(record, device, where));
  return ModelState::Entry{record.name(), std::move(tensor), record.is_buffer()};
}

}  // namespace

std::string SerializeUpdates(const std::vector<IndexedUpdate>& updates) {
  std::string out;
  for (const IndexedUpdate& indexed : updates) {
    fedkit::UpdateMessage message;
    message.set_cohort_index(indexed.cohort_index);
    if (!indexed.update.ok()) {
      message.set_status_code(static_cast<int>(indexed.update.status().code()));
      message.set_status_message(std::string(indexed.update.status().message()));
    } else {
      const ClientUpdate& update = *indexed.update;
      message.set_client_id(update.client_id);
      message.set_num_examples(update.num_examples);
      message.set_local_steps(update.local_steps);
      message.set_planned_steps(update.planned_steps);
      message.set_bytes_sent(update.bytes_sent);
      message.mutable_metrics()->insert(update.metrics.begin(), update.metrics.end());
      AddEntries(update.delta, "", *message.mutable_delta());
      for (const auto& [name, extra] : update.extras) AddEntries(extra, name, *message.mutable_extras());
    }
    AppendFramed(message, out);
  }
  return out;
}

absl::StatusOr<std::vector<IndexedUpdate>> ParseUpdates(absl::string_view bytes,
                                                        const c10::Device& device,
                                                        const std::string& source) {
  FL_ASSIGN_OR_RETURN(std::vector<absl::string_view> records, SplitFramed(bytes, source));
  std::vector<IndexedUpdate> updates;
  for (absl::string_view record : records) {
    fedkit::UpdateMessage message;
    if (!message.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      return absl::DataLossError(absl::StrCat(source, ": unreadable update record"));
    }
    IndexedUpdate indexed;
    indexed.cohort_index = message.cohort_index();
    const std::string where = absl::StrCat(source, ": update of client ", message.client_id());
    if (message.status_code() != 0) {
      indexed.update = absl::Status(static_cast<absl::StatusCode>(message.status_code()),
                                    message.status_message());
    } else {
      ClientUpdate update;
      update.client_id = message.client_id();
      update.num_examples = message.num_examples();
      update.local_steps = message.local_steps();
      update.planned_steps = message.planned_steps();
      update.bytes_sent = message.bytes_sent();
      update.metrics.insert(message.metrics().begin(), message.metrics().end());
      std::vector<ModelState::Entry> delta;
      for (const CheckpointTensor& tensor : message.delta()) {
        FL_ASSIGN_OR_RETURN(ModelState::Entry entry, EntryFromRecord(tensor, device, where));
        delta.push_back(std::move(entry));
      }
      update.delta = ModelState(std::move(delta));
      std::map<std::string, std::vector<ModelState::Entry>> extras;
      for (const CheckpointTensor& tensor : message.extras()) {
        FL_ASSIGN_OR_RETURN(ModelState::Entry entry, EntryFromRecord(tensor, device, where));
        extras[tensor.hook()].push_back(std::move(entry));
      }
      for (auto& [name, entries] : extras) update.extras[name] = ModelState(std::move(entries));
      indexed.update = std::move(update);
    }
    updates.push_back(std::move(indexed));
  }
  return updates;
}

std::string SerializeTask(const ModelState& model, const RoundPlan& plan, int round) {
  fedkit::TaskMessage message;
  message.set_round(round);
  AddEntries(model, "", *message.mutable_model());
  for (const HookRequest& hook : plan.hooks) {
    fedkit::TaskMessage::Hook& out = *message.add_hooks();
    out.set_name(hook.name);
    *out.mutable_options() = hook.options;
  }
  for (const auto& [name, extra] : plan.broadcast) {
    AddEntries(extra, name, *message.mutable_broadcast());
  }
  std::string out;
  AppendFramed(message, out);
  return out;
}

absl::StatusOr<Task> ParseTask(absl::string_view bytes, const c10::Device& device,
                               const std::string& source) {
  FL_ASSIGN_OR_RETURN(std::vector<absl::string_view> records, SplitFramed(bytes, source));
  if (records.size() != 1) {
    return absl::DataLossError(
        absl::StrCat(source, ": a task is one record, got ", records.size()));
  }
  fedkit::TaskMessage message;
  if (!message.ParseFromArray(records[0].data(), static_cast<int>(records[0].size()))) {
    return absl::DataLossError(absl::StrCat(source, ": unreadable task record"));
  }
  Task task;
  task.round = message.round();
  std::vector<ModelState::Entry> model;
  for (const CheckpointTensor& tensor : message.model()) {
    FL_ASSIGN_OR_RETURN(ModelState::Entry entry,
                        EntryFromRecord(tensor, device, absl::StrCat(source, ": model")));
    model.push_back(std::move(entry));
  }
  task.model = ModelState(std::move(model));
  for (const fedkit::TaskMessage::Hook& hook : message.hooks()) {
    task.plan.hooks.push_back({hook.name(), hook.options()});
  }
  std::map<std::string, std::vector<ModelState::Entry>> broadcast;
  for (const CheckpointTensor& tensor : message.broadcast()) {
    FL_ASSIGN_OR_RETURN(ModelState::Entry entry,
                        EntryFromRecord(tensor, device, absl::StrCat(source, ": broadcast")));
    broadcast[tensor.hook()].push_back(std::move(entry));
  }
  for (auto& [name, entries] : broadcast) task.plan.broadcast[name] = ModelState(std::move(entries));
  return task;
}

std::string SerializeTensors(const TensorMap& tensors) {
  fedkit::TensorsMessage message;
  for (const auto& [name, tensor] : tensors) {
    *message.add_tensors() = TensorToRecord(CheckpointTensor::AGGREGATOR, name, tensor);
  }
  return Bytes(message);
}

absl::StatusOr<TensorMap> ParseTensors(absl::string_view bytes, const c10::Device& device,
                                       const std::string& source) {
  fedkit::TensorsMessage message;
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat(source, ": unreadable tensors"));
  }
  TensorMap tensors;
  for (const CheckpointTensor& tensor : message.tensors()) {
    FL_ASSIGN_OR_RETURN(tensors[tensor.name()],
                        TensorFromRecord(tensor, device, absl::StrCat(source, ": ", tensor.name())));
  }
  return tensors;
}

std::string SerializeClientStates(const std::map<ClientStateStore::Key, TensorMap>& states) {
  std::string out;
  for (const auto& [key, tensors] : states) {
    fedkit::TensorsMessage message;
    for (const auto& [name, tensor] : tensors) {
      CheckpointTensor& record = *message.add_tensors();
      record = TensorToRecord(CheckpointTensor::CLIENT_STATE, name, tensor);
      record.set_client_id(key.first);
      record.set_hook(key.second);
    }
    AppendFramed(message, out);
  }
  return out;
}

absl::StatusOr<std::map<ClientStateStore::Key, TensorMap>> ParseClientStates(
    absl::string_view bytes, const c10::Device& device, const std::string& source) {
  FL_ASSIGN_OR_RETURN(std::vector<absl::string_view> records, SplitFramed(bytes, source));
  std::map<ClientStateStore::Key, TensorMap> states;
  for (absl::string_view record : records) {
    fedkit::TensorsMessage message;
    if (!message.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
      return absl::DataLossError(absl::StrCat(source, ": unreadable client-state record"));
    }
    for (const CheckpointTensor& tensor : message.tensors()) {
      const std::string where =
          absl::StrCat(source, ": state of client ", tensor.client_id(), ", hook ", tensor.hook());
      FL_ASSIGN_OR_RETURN(at::Tensor value, TensorFromRecord(tensor, device, where));
      states[{tensor.client_id(), tensor.hook()}][tensor.name()] = std::move(value);
    }
  }
  return states;
}

}  // namespace fl
