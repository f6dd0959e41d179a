#include "fl/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/checkpoint.pb.h"
#include "fl/status_macros.h"
#include "fl/tensor_record.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace fl {
namespace {

constexpr char kMagic[8] = {'F', 'E', 'D', 'K', 'I', 'T', 'C', 'K'};
constexpr uint32_t kFormatVersion = 1;

using fedkit::CheckpointTensor;

void ToRecord(const MetricsRow& row, fedkit::MetricsRowRecord& record) {
  record.set_round(row.round);
  record.set_test_accuracy(row.test_accuracy);
  record.set_test_loss(row.test_loss);
  record.set_train_loss(row.train_loss);
  record.set_clients(row.clients);
  record.set_rejected(row.rejected);
  record.set_incomplete(row.incomplete);
  record.set_dropped(row.dropped);
  record.set_bytes_up(row.bytes_up);
  record.set_bytes_down(row.bytes_down);
  record.set_seconds(row.seconds);
  record.set_virtual_seconds(row.virtual_seconds);
  record.set_local_steps(row.local_steps);
  record.mutable_diagnostics()->insert(row.diagnostics.begin(), row.diagnostics.end());
  record.mutable_client_accuracy()->insert(row.client_accuracy.begin(), row.client_accuracy.end());
  record.mutable_rejected_by_reason()->insert(row.rejected_by_reason.begin(),
                                              row.rejected_by_reason.end());
}

MetricsRow FromRecord(const fedkit::MetricsRowRecord& record) {
  MetricsRow row;
  row.round = record.round();
  row.test_accuracy = record.test_accuracy();
  row.test_loss = record.test_loss();
  row.train_loss = record.train_loss();
  row.clients = record.clients();
  row.rejected = record.rejected();
  row.incomplete = record.incomplete();
  row.dropped = record.dropped();
  row.bytes_up = record.bytes_up();
  row.bytes_down = record.bytes_down();
  row.seconds = record.seconds();
  row.virtual_seconds = record.virtual_seconds();
  row.local_steps = record.local_steps();
  row.diagnostics.insert(record.diagnostics().begin(), record.diagnostics().end());
  row.client_accuracy.insert(record.client_accuracy().begin(), record.client_accuracy().end());
  row.rejected_by_reason.insert(record.rejected_by_reason().begin(),
                                record.rejected_by_reason().end());
  return row;
}

// Writes `bytes` to a temporary file beside `path`, fsyncs it, renames it over
// `path` and fsyncs the folder, so the previous file stays until the new one is
// complete and durable.
absl::Status WriteDurably(const std::string& path, absl::string_view bytes) {
  const std::string temp = path + ".tmp";
  auto error = [&](const char* what) {
    return absl::UnavailableError(
        absl::StrCat(what, " ", temp, " (for ", path, "): ", std::strerror(errno)));
  };
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return error("cannot create");
  auto fail = [&](const char* what) {
    const absl::Status status = error(what);
    ::close(fd);
    ::unlink(temp.c_str());
    return status;
  };
  const char* p = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail("cannot write");
    p += n;
    size -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail("cannot fsync");
  if (::close(fd) != 0) {
    ::unlink(temp.c_str());
    return error("cannot close");
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) return error("cannot rename into place");
  // The rename itself is durable once the folder is.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dir_fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return absl::OkStatus();
}

void AppendLittleEndian(uint64_t value, size_t width, std::string& out) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

absl::Status AppendRecord(const google::protobuf::Message& message, std::string& out) {
  FL_ASSIGN_OR_RETURN(const std::string bytes, DeterministicBytes(message));
  AppendLittleEndian(bytes.size(), 8, out);
  out += bytes;
  return absl::OkStatus();
}

uint64_t ReadLittleEndian(absl::string_view bytes, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return value;
}

}  // namespace

absl::StatusOr<std::string> SerializeCheckpoint(const Checkpoint& checkpoint) {
  std::vector<CheckpointTensor> tensors;
  auto add_state = [&](CheckpointTensor::Section section, const ModelState& state) {
    for (const ModelState::Entry& entry : state.entries()) {
      tensors.push_back(TensorToRecord(section, entry.name, entry.tensor));
      tensors.back().set_is_buffer(entry.is_buffer);
    }
  };
  const ServerProgress& server = checkpoint.server;
  add_state(CheckpointTensor::GLOBAL_MODEL, server.global);
  if (server.clients_copy.has_value()) add_state(CheckpointTensor::CLIENTS_COPY, *server.clients_copy);
  if (server.best_model.has_value()) add_state(CheckpointTensor::BEST_MODEL, *server.best_model);
  for (const auto& [key, tensor] : checkpoint.aggregator_state) {
    tensors.push_back(TensorToRecord(CheckpointTensor::AGGREGATOR, key, tensor));
  }
  for (const auto& [client_hook, state] : checkpoint.client_states) {
    for (const auto& [key, tensor] : state) {
      tensors.push_back(TensorToRecord(CheckpointTensor::CLIENT_STATE, key, tensor));
      tensors.back().set_client_id(client_hook.first);
      tensors.back().set_hook(client_hook.second);
    }
  }
  if (server.async.has_value()) {
    for (const auto& [number, version] : server.async->versions) {
      const size_t first = tensors.size();
      add_state(CheckpointTensor::ASYNC_MODEL, version.model);
      for (const auto& [name, extra] : version.plan.broadcast) {
        const size_t before = tensors.size();
        add_state(CheckpointTensor::ASYNC_BROADCAST, extra);
        for (size_t i = before; i < tensors.size(); ++i) tensors[i].set_hook(name);
      }
      for (size_t i = first; i < tensors.size(); ++i) tensors[i].set_client_id(number);
    }
  }

  fedkit::CheckpointHeader header;
  header.set_spec(checkpoint.spec);
  header.set_rounds_done(server.rounds_done);
  ToRecord(server.pending, *header.mutable_pending());
  for (const MetricsRow& row : checkpoint.rows) ToRecord(row, *header.add_rows());
  for (const MetricsSink::DiagnosticsRow& row : checkpoint.diagnostics) {
    fedkit::DiagnosticsRecord& record = *header.add_diagnostics();
    record.set_round(row.round);
    record.mutable_values()->insert(row.values.begin(), row.values.end());
  }
  header.set_download_bytes(server.download_bytes);
  header.set_best_round(server.best_round);
  header.set_best_accuracy(server.best_accuracy);
  header.set_num_tensors(static_cast<int64_t>(tensors.size()));
  header.set_seconds(server.seconds);
  if (server.async.has_value()) {
    header.set_async(true);
    for (const ClientEvent& event : server.async->in_flight) {
      fedkit::AsyncEventRecord& record = *header.add_in_flight();
      record.set_time(event.time);
      record.set_client(event.client);
      record.set_version(event.version);
    }
    header.set_dispatches(server.async->dispatches);
    for (const auto& [number, version] : server.async->versions) {
      fedkit::AsyncVersionRecord& record = *header.add_versions();
      record.set_version(number);
      record.set_bytes_down(version.bytes_down);
      for (const HookRequest& hook : version.plan.hooks) {
        fedkit::AsyncVersionRecord::Hook& h = *record.add_hooks();
        h.set_name(hook.name);
        *h.mutable_options() = hook.options;
      }
    }
  }

  std::string bytes(kMagic, sizeof(kMagic));
  AppendLittleEndian(kFormatVersion, 4, bytes);
  FL_RETURN_IF_ERROR(AppendRecord(header, bytes));
  for (const CheckpointTensor& tensor : tensors) FL_RETURN_IF_ERROR(AppendRecord(tensor, bytes));
  const uLong crc = crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
                            bytes.size());
  AppendLittleEndian(static_cast<uint32_t>(crc), 4, bytes);
  return bytes;
}

absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  FL_ASSIGN_OR_RETURN(const std::string bytes, SerializeCheckpoint(checkpoint));
  return WriteDurably(path, bytes);
}

absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes, const std::string& source,
                                           const at::Device& device) {
  auto corrupt = [&source](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(source, " is not a complete fedkit checkpoint: ", what));
  };
  constexpr size_t kPrefix = sizeof(kMagic) + 4;
  if (bytes.size() < kPrefix + 4) return corrupt(absl::StrCat("only ", bytes.size(), " bytes"));
  if (bytes.substr(0, sizeof(kMagic)) != absl::string_view(kMagic, sizeof(kMagic))) {
    return corrupt("it does not start with \"FEDKITCK\"");
  }
  const uint64_t version = ReadLittleEndian(bytes.substr(sizeof(kMagic)), 4);
  if (version != kFormatVersion) {
    return corrupt(absl::StrCat("format version ", version, ", this build reads ", kFormatVersion));
  }
  const size_t body_end = bytes.size() - 4;
  const uint32_t stored_crc = static_cast<uint32_t>(ReadLittleEndian(bytes.substr(body_end), 4));
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), body_end));
  if (crc != stored_crc) return corrupt("its checksum does not match (truncated or damaged)");

  size_t pos = kPrefix;
  auto next_record = [&](google::protobuf::Message& message, const std::string& what) -> absl::Status {
    if (body_end - pos < 8) return corrupt(absl::StrCat(what, ": no room for its length"));
    const uint64_t length = ReadLittleEndian(bytes.substr(pos), 8);
    pos += 8;
    if (length > body_end - pos || length > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      return corrupt(absl::StrCat(what, ": length ", length, " runs past the end"));
    }
    if (!message.ParseFromArray(bytes.data() + pos, static_cast<int>(length))) {
      return corrupt(absl::StrCat(what, ": cannot parse"));
    }
    pos += length;
    return absl::OkStatus();
  };

  fedkit::CheckpointHeader header;
  FL_RETURN_IF_ERROR(next_record(header, "header"));
  if (header.rounds_done() < 0 || header.num_tensors() < 0) {
    return corrupt("negative round or tensor count");
  }
  Checkpoint checkpoint;
  checkpoint.spec = header.spec();
  ServerProgress& server = checkpoint.server;
  server.rounds_done = header.rounds_done();
  server.pending = FromRecord(header.pending());
  for (const fedkit::MetricsRowRecord& row : header.rows()) checkpoint.rows.push_back(FromRecord(row));
  for (const fedkit::DiagnosticsRecord& row : header.diagnostics()) {
    checkpoint.diagnostics.push_back({row.round(), {row.values().begin(), row.values().end()}});
  }
  server.download_bytes = header.download_bytes();
  server.best_round = header.best_round();
  server.best_accuracy = header.best_accuracy();
  server.seconds = header.seconds();
  // Asynchronous mode's versions: weights and broadcast tensors by version.
  std::map<int64_t, std::vector<ModelState::Entry>> version_models;
  std::map<int64_t, std::map<std::string, std::vector<ModelState::Entry>>> version_broadcasts;
  if (header.async()) {
    AsyncProgress& async = server.async.emplace();
    async.dispatches = header.dispatches();
    for (const fedkit::AsyncVersionRecord& record : header.versions()) {
      AsyncProgress::Version& version = async.versions[record.version()];
      version.bytes_down = record.bytes_down();
      for (const fedkit::AsyncVersionRecord::Hook& hook : record.hooks()) {
        version.plan.hooks.push_back({hook.name(), hook.options()});
      }
    }
    for (const fedkit::AsyncEventRecord& record : header.in_flight()) {
      if (async.versions.count(record.version()) == 0) {
        return corrupt(absl::StrCat("client ", record.client(), " in flight trains from version ",
                                    record.version(), ", which is not stored"));
      }
      async.in_flight.push_back({record.time(), record.client(), record.version()});
    }
  }

  std::vector<ModelState::Entry> global, clients_copy, best;
  for (int64_t i = 0; i < header.num_tensors(); ++i) {
    CheckpointTensor record;
    const std::string what = absl::StrCat("tensor record ", i);
    FL_RETURN_IF_ERROR(next_record(record, what));
    absl::StatusOr<at::Tensor> tensor =
        TensorFromRecord(record, device, absl::StrCat(what, " (\"", record.name(), "\")"));
    if (!tensor.ok()) return corrupt(std::string(tensor.status().message()));
    switch (record.section()) {
      case CheckpointTensor::GLOBAL_MODEL:
        global.push_back({record.name(), *tensor, record.is_buffer()});
        break;
      case CheckpointTensor::CLIENTS_COPY:
        clients_copy.push_back({record.name(), *tensor, record.is_buffer()});
        break;
      case CheckpointTensor::BEST_MODEL:
        best.push_back({record.name(), *tensor, record.is_buffer()});
        break;
      case CheckpointTensor::AGGREGATOR:
        checkpoint.aggregator_state[record.name()] = *tensor;
        break;
      case CheckpointTensor::CLIENT_STATE:
        checkpoint.client_states[{record.client_id(), record.hook()}][record.name()] = *tensor;
        break;
      case CheckpointTensor::ASYNC_MODEL:
      case CheckpointTensor::ASYNC_BROADCAST:
        if (!server.async.has_value() || server.async->versions.count(record.client_id()) == 0) {
          return corrupt(absl::StrCat(what, ": version ", record.client_id(), " is not stored"));
        }
        (record.section() == CheckpointTensor::ASYNC_MODEL
             ? version_models[record.client_id()]
             : version_broadcasts[record.client_id()][record.hook()])
            .push_back({record.name(), *tensor, record.is_buffer()});
        break;
      default:
        return corrupt(absl::StrCat(what, ": unknown section ", record.section()));
    }
  }
  if (pos != body_end) return corrupt(absl::StrCat(body_end - pos, " bytes after the last record"));
  if (global.empty()) return corrupt("no global model");
  server.global = ModelState(std::move(global));
  if (!clients_copy.empty()) server.clients_copy = ModelState(std::move(clients_copy));
  if (!best.empty()) server.best_model = ModelState(std::move(best));
  if (server.async.has_value()) {
    for (auto& [number, version] : server.async->versions) {
      if (version_models.count(number) == 0) {
        return corrupt(absl::StrCat("no weights for version ", number));
      }
      version.model = ModelState(std::move(version_models[number]));
      for (auto& [name, entries] : version_broadcasts[number]) {
        version.plan.broadcast[name] = ModelState(std::move(entries));
      }
    }
  }
  return checkpoint;
}

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, const at::Device& device) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open checkpoint ", path));
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::UnavailableError(absl::StrCat("cannot read checkpoint ", path));
  return ParseCheckpoint(contents.str(), path, device);
}

absl::Status CheckResumable(const fedkit::ExperimentSpec& checkpointed,
                            const fedkit::ExperimentSpec& given) {
  namespace pb = google::protobuf;
  pb::util::MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  const pb::Descriptor* spec = fedkit::ExperimentSpec::descriptor();
  differencer.IgnoreField(spec->FindFieldByName("output"));
  differencer.IgnoreField(spec->FindFieldByName("simulation"));
  differencer.IgnoreField(fedkit::ServerSpec::descriptor()->FindFieldByName("rounds"));
  if (!differencer.Compare(checkpointed, given)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the spec differs from the checkpoint's in fields other than server.rounds, output and "
        "simulation:\n",
        differences));
  }
  const fedkit::SystemSpec& system = given.client().system();
  if (checkpointed.server().rounds() != given.server().rounds() &&
      (system.late_join_fraction() > 0 || system.early_leave_fraction() > 0)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "server.rounds: ", given.server().rounds(), " differs from the checkpoint's ",
        checkpointed.server().rounds(),
        ", and client.system's late joins and early leaves are drawn over the whole run"));
  }
  return absl::OkStatus();
}

}  // namespace fl
