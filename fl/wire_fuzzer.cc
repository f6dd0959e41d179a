// Fuzz target: the readers of what the ranks of a distributed run send each
// other, and of a deployed client's task (fl/wire.h). The first byte picks the
// reader (client updates, a tensor map, client states, a task); the rest is its
// input. Each gives records or an error,
// never a crash or an allocation beyond the input. What parses must survive a
// round trip: its serialisation parses, and serialises to the same bytes again
// (not to the input's: protobuf reads many encodings of one message and writes
// one).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fl/wire.h"

namespace {

[[noreturn]] void Fail(const char* reader, const char* what, const absl::Status& status) {
  std::fprintf(stderr, "%s round trip: %s: %s\n", reader, what, status.ToString().c_str());
  std::abort();
}

// parse(bytes), then serialise, parse and serialise again: the two
// serialisations must be equal.
template <typename Parse, typename Serialize>
void CheckRoundTrip(const char* reader, absl::string_view bytes, Parse parse,
                    Serialize serialize) {
  auto parsed = parse(bytes, c10::Device(c10::kCPU), "fuzz");
  if (!parsed.ok()) return;
  const std::string written = serialize(*parsed);
  auto reread = parse(written, c10::Device(c10::kCPU), "rewritten");
  if (!reread.ok()) Fail(reader, "what it wrote does not parse", reread.status());
  if (serialize(*reread) != written) {
    Fail(reader, "serialise(parse(bytes)) changed the bytes", absl::OkStatus());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const absl::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckRoundTrip("ParseUpdates", bytes, fl::ParseUpdates, fl::SerializeUpdates);
      break;
    case 1:
      CheckRoundTrip("ParseTensors", bytes, fl::ParseTensors, fl::SerializeTensors);
      break;
    case 2:
      CheckRoundTrip("ParseClientStates", bytes, fl::ParseClientStates,
                     fl::SerializeClientStates);
      break;
    default:
      CheckRoundTrip("ParseTask", bytes, fl::ParseTask, [](const fl::Task& task) {
        return fl::SerializeTask(task.model, task.plan, task.round);
      });
  }
  return 0;
}
