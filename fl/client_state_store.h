#ifndef FL_CLIENT_STATE_STORE_H_
#define FL_CLIENT_STATE_STORE_H_

// State a client hook keeps on a client across rounds (SCAFFOLD's c_i, EFL's
// error-feedback residual, Elastic's sensitivity EMA). One map per (client, hook):
// never shared between clients or between hooks. Memory grows only with the
// clients that actually stored something.

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>

#include "absl/synchronization/mutex.h"

namespace fl {

using TensorMap = std::map<std::string, at::Tensor>;

class ClientStateStore {
 public:
  // The state of `hook` on `client_id`, created empty on first use. The reference
  // stays valid for the store's lifetime. Thread-safe across different clients;
  // one client is only ever trained by one worker at a time.
  TensorMap& Get(int64_t client_id, const std::string& hook);

  // Number of (client, hook) pairs holding state.
  size_t size() const;

 private:
  mutable absl::Mutex mutex_;
  std::map<std::pair<int64_t, std::string>, TensorMap> states_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace fl

#endif  // FL_CLIENT_STATE_STORE_H_
