#ifndef FL_BATCH_ORDER_FILE_H_
#define FL_BATCH_ORDER_FILE_H_

// Batch orders recorded from another implementation's run, so that fedkit can
// train on exactly its mini-batches (tools/side_by_side/ records them from the
// official code): <dir>/<round>/<name>.txt, one line per epoch, each line the
// epoch's order as space-separated integers, a permutation of the examples the
// reader expects. A client's file is named by its id and holds dataset indices;
// a server's proxy file (FedLAW's) holds positions in the proxy set.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fl {

// The epochs' orders of <dir>/<round>/<name>.txt. Errors (naming the file and
// line): a missing file, no line, a token that is not an integer, a line that is
// not a permutation of `examples`.
absl::StatusOr<std::vector<std::vector<int64_t>>> ReadBatchOrders(
    const std::string& dir, int round, const std::string& name,
    const std::vector<int64_t>& examples);

}  // namespace fl

#endif  // FL_BATCH_ORDER_FILE_H_
