// Fuzz target: a sweep file's text through LoadSweep, with a small valid base
// spec beside it, so mutations reach every check down to each variant's resolved
// spec. Either a sweep or an error; never a crash. What loads keeps the promise
// that nothing fails after validation: every (variant, seed) run's spec
// resolves. And the loaded sweep, written back as text with its defaults filled
// in, loads to the same sweep.

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "tools/sweep/sweep_spec.h"

namespace {

constexpr char kBaseSpec[] = R"pb(
  name: "fuzz_base"
  seed: 1
  device: CPU
  dataset {
    name: "fashion_mnist"
    options {
      [type.googleapis.com/fedkit.data.FashionMnistOptions] { train_limit: 600 test_limit: 200 }
    }
  }
  partition { name: "iid" num_clients: 4 }
  model { name: "logreg" }
  client { steps: 1 batch_size: 8 optimizer { kind: SGD lr: 0.1 } }
  server { rounds: 2 clients_per_round: 2 }
  aggregator { name: "fedavg" }
)pb";

const std::filesystem::path& Folder() {
  static const std::filesystem::path* const folder = [] {
    const char* tmp = std::getenv("TEST_TMPDIR");
    auto* path = new std::filesystem::path(std::string(tmp != nullptr ? tmp : "/tmp") +
                                           "/sweep_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(*path);
    std::ofstream(*path / "base.textproto") << kBaseSpec;
    return path;
  }();
  return *folder;
}

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "sweep fuzzer: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path path = Folder() / "fuzz.sweep.textproto";
  Write(path, std::string(reinterpret_cast<const char*>(data), size));
  const sweep::SweepFlags flags{(Folder() / "out").string(), std::nullopt};
  absl::StatusOr<sweep::Sweep> loaded = sweep::LoadSweep(path.string(), flags);
  if (!loaded.ok()) return 0;

  for (const sweep::Variant& variant : loaded->spec.variants()) {
    for (uint64_t seed : loaded->spec.seeds()) {
      absl::StatusOr<fedkit::ExperimentSpec> run = sweep::RunSpec(*loaded, variant, seed);
      if (!run.ok()) {
        Fail("a validated sweep's run does not resolve: " + std::string(run.status().message()));
      }
    }
  }

  std::string text;
  google::protobuf::TextFormat::PrintToString(loaded->spec, &text);
  const std::filesystem::path again = Folder() / "again.sweep.textproto";
  Write(again, text);
  absl::StatusOr<sweep::Sweep> reloaded = sweep::LoadSweep(again.string(), flags);
  if (!reloaded.ok()) {
    Fail("a loaded sweep written back does not load: " + std::string(reloaded.status().message()) +
         "\n" + text);
  }
  std::string differences;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&differences);
  if (!differencer.Compare(loaded->spec, reloaded->spec)) {
    Fail("a loaded sweep written back loads differently:\n" + differences);
  }
  return 0;
}
