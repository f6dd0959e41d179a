#ifndef FL_DEPLOY_PAYLOAD_H_
#define FL_DEPLOY_PAYLOAD_H_

// Payloads of the session protocol (deploy.proto): a header declares a payload's
// size, then chunks carry it. The receiver refuses a declared size above its limit
// before allocating anything, and a chunk that would run past the declared size.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fl::deploy {

// The smallest message limit a side may set (see PayloadLimits).
inline constexpr int64_t kMinMessageBytes = int64_t{64} << 10;

struct PayloadLimits {
  // The largest payload a side accepts (a task's model and plan, an update).
  int64_t max_payload_bytes = int64_t{1} << 30;
  // The largest gRPC message a side accepts (its receive limit; gRPC's default
  // is 4 MiB), >= kMinMessageBytes. Each side names it in its first message
  // (Hello, Welcome) and the other sends chunks that fit.
  int64_t max_message_bytes = int64_t{4} << 20;
  // The largest chunk a side sends; smaller when its peer accepts less.
  int64_t chunk_bytes = int64_t{1} << 20;
};

// The limits a command line's --max_payload_mb and --max_message_kb give, the
// same for fl_server and fl_client. InvalidArgument naming the flag when
// max_message_kb is below kMinMessageBytes.
absl::StatusOr<PayloadLimits> PayloadLimitsFromFlags(int64_t max_payload_mb,
                                                     int64_t max_message_kb);

// The chunk size for a peer whose messages may be at most `peer_max_message`
// bytes (0: not said, gRPC's default): `own.chunk_bytes`, or less, leaving room
// for a chunk message's own bytes.
int64_t ChunkBytesFor(const PayloadLimits& own, int64_t peer_max_message);

// `payload` cut into pieces of at most `chunk_bytes` (none for an empty payload).
std::vector<absl::string_view> Chunks(absl::string_view payload, int64_t chunk_bytes);

class PayloadAssembler {
 public:
  // Refuses (kResourceExhausted) a declared size above `limit`, and a negative one
  // (kInvalidArgument); `what` names the payload in errors.
  static absl::StatusOr<PayloadAssembler> Start(int64_t declared, int64_t limit, std::string what);

  // Refuses (kInvalidArgument) a chunk that would run past the declared size.
  absl::Status Add(absl::string_view chunk);
  bool complete() const { return static_cast<int64_t>(data_.size()) == declared_; }
  // The whole payload; REQUIRES: complete().
  std::string Take() &&;

 private:
  PayloadAssembler(int64_t declared, std::string what)
      : declared_(declared), what_(std::move(what)) {}

  int64_t declared_;
  std::string what_;
  std::string data_;
};

}  // namespace fl::deploy

#endif  // FL_DEPLOY_PAYLOAD_H_
