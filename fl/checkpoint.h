#ifndef FL_CHECKPOINT_H_
#define FL_CHECKPOINT_H_

// Checkpoints: everything a run holds between two rounds that its spec and the
// round number do not already fix (every random stream is derived from those), so
// that a resumed run continues exactly as the uninterrupted one would have.
//
// File layout (checkpoint.fkc): the 8 bytes "FEDKITCK", a little-endian uint32
// format version, then records, each a little-endian uint64 length and that many
// bytes: one fedkit.CheckpointHeader, then header.num_tensors fedkit.CheckpointTensor;
// last, the zlib CRC-32 of everything before it (uint32). A reader checks the
// checksum, every length and every tensor's size before using anything, so a
// truncated or corrupt file is refused whole, never half-loaded.
//
// WriteCheckpoint writes a temporary file beside `path`, fsyncs it, renames it
// over `path` and fsyncs the folder: the previous checkpoint stays until the new
// one is complete.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/client_state_store.h"
#include "fl/metrics_sink.h"
#include "fl/server.h"
#include "fl/spec.pb.h"

namespace fl {

inline constexpr char kCheckpointFile[] = "checkpoint.fkc";

struct Checkpoint {
  // The resolved spec, in text format with Anys expanded.
  std::string spec;
  ServerProgress server;
  std::map<std::string, at::Tensor> aggregator_state;
  std::map<ClientStateStore::Key, TensorMap> client_states;
  // metrics.csv and diagnostics.csv so far.
  std::vector<MetricsRow> rows;
  std::vector<MetricsSink::DiagnosticsRow> diagnostics;
};

// The file's bytes. Equal checkpoints give equal bytes.
absl::StatusOr<std::string> SerializeCheckpoint(const Checkpoint& checkpoint);
absl::Status WriteCheckpoint(const std::string& path, const Checkpoint& checkpoint);

// Tensors that were on an accelerator come back on `device`, the others on the
// CPU. Errors name `path`.
absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path, const at::Device& device);
// The same from the file's bytes; `source` names them in errors.
absl::StatusOr<Checkpoint> ParseCheckpoint(absl::string_view bytes, const std::string& source,
                                           const at::Device& device);

// OK when `given` may continue a run started from `checkpointed`: they may differ
// only in server.rounds (more or fewer rounds), output (where results go) and
// simulation (workers and threads; a different thread count can change the
// floating-point sums, so exactness needs the same). Otherwise the error lists
// every field that differs. A different server.rounds is refused when
// client.system draws late joins or early leaves over the whole run.
absl::Status CheckResumable(const fedkit::ExperimentSpec& checkpointed,
                            const fedkit::ExperimentSpec& given);

}  // namespace fl

#endif  // FL_CHECKPOINT_H_
