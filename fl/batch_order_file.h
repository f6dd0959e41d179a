#ifndef FL_BATCH_ORDER_FILE_H_
#define FL_BATCH_ORDER_FILE_H_

// Batch orders recorded from one implementation's run and replayed in another,
// so that both train on exactly the same mini-batches (tools/side_by_side/
// records them from the official code; fedkit records its own with
// client.batch_order_record_dir and FedLAW's proxy_order_record_dir):
// <dir>/<round>/<name>.txt, one line per epoch, each line the epoch's order as
// space-separated integers, a permutation of the examples the reader expects.
// A client's file is named by its id and holds dataset indices; a server's proxy
// file (FedLAW's) holds positions in the proxy set.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fl {

// The epochs' orders of <dir>/<round>/<name>.txt. Errors (naming the file and
// line): a missing file, no line, a token that is not an integer, a line that is
// not a permutation of `examples`.
absl::StatusOr<std::vector<std::vector<int64_t>>> ReadBatchOrders(
    const std::string& dir, int round, const std::string& name,
    const std::vector<int64_t>& examples);

// OK for "" (nothing recorded) and for a folder that is new or empty; an error
// otherwise, since AppendBatchOrder appends to what is there.
absl::Status CheckBatchOrderRecordFolder(const std::string& dir);

// Appends `order` as one line (one epoch) to <dir>/<round>/<name>.txt, creating
// the round's folder. Each (round, name) file has one writer, so clients training
// in parallel may record at once. Errors name the file.
absl::Status AppendBatchOrder(const std::string& dir, int round, const std::string& name,
                              const std::vector<int64_t>& order);

}  // namespace fl

#endif  // FL_BATCH_ORDER_FILE_H_
