// Runs a libFuzzer-style target (LLVMFuzzerTestOneInput) without libFuzzer, so
// that every fuzz target builds and runs with gcc too: first every input of the
// corpus folders and files named on the command line (seeds and every crasher
// found so far), then seeded random mutations of them. It takes libFuzzer's
// flags, so the same command line works on either build (//tools/fuzz:fuzz_test.sh
// runs both): -runs=N caps the executions (corpus included) and makes a run the
// same amount of work on any machine, -max_total_time=S caps the seconds, -seed,
// -max_len, -rss_limit_mb (the address space is capped, as libFuzzer caps memory,
// so that an input asking for a huge allocation fails that allocation, and the
// target must report it as an error, instead of exhausting the machine) and
// -artifact_prefix (where a crashing input is written before the process dies).
// Unlike libFuzzer it has no coverage feedback and adds nothing to the corpus.
// Real coverage-guided runs: the libFuzzer build, tools/fuzz/fuzz.sh.
//
//   driver [-runs=N] [-max_total_time=S] [-seed=1] [-max_len=65536]
//          [-rss_limit_mb=4096] [-artifact_prefix=DIR/] FILE_OR_FOLDER...

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {


// The input being run, for the crash handler (written before each run).
const std::string* current_input = nullptr;
char crash_path[4096];

void OnCrash(int signal) {
  if (current_input != nullptr) {
    const int fd = ::open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t ignored = ::write(fd, current_input->data(), current_input->size());
      (void)ignored;
      ::close(fd);
    }
    static const char kMessage[] = "\nfuzz driver: crashing input written to ";
    ssize_t ignored = ::write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
    ignored = ::write(STDERR_FILENO, crash_path, std::strlen(crash_path));
    ignored = ::write(STDERR_FILENO, "\n", 1);
    (void)ignored;
  }
  ::signal(signal, SIG_DFL);
  ::raise(signal);
}

void Run(const std::string& input) {
  current_input = &input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
  current_input = nullptr;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One random edit of the kinds libFuzzer's default mutators make.
void Mutate(std::string& input, const std::vector<std::string>& corpus, size_t max_len,
            std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  static const uint8_t kInteresting[] = {0, 1, 0x7f, 0x80, 0xff, 0xfe, 0x10, 0x40};
  switch (rng() % 8) {
    case 0:  // flip a bit
      if (!input.empty()) input[pick(input.size())] ^= static_cast<char>(1 << (rng() % 8));
      break;
    case 1:  // an interesting byte
      if (!input.empty()) input[pick(input.size())] = static_cast<char>(kInteresting[rng() % 8]);
      break;
    case 2:  // insert random bytes
      input.insert(pick(input.size() + 1), std::string(1 + rng() % 8, static_cast<char>(rng())));
      break;
    case 3:  // erase a range
      if (!input.empty()) {
        const size_t at = pick(input.size());
        input.erase(at, 1 + pick(input.size() - at));
      }
      break;
    case 4:  // truncate
      input.resize(pick(input.size() + 1));
      break;
    case 5:  // duplicate a range
      if (!input.empty()) {
        const size_t at = pick(input.size());
        const std::string part = input.substr(at, 1 + pick(16));
        input.insert(pick(input.size() + 1), part);
      }
      break;
    case 6: {  // splice with another corpus input
      const std::string& other = corpus[pick(corpus.size())];
      input = input.substr(0, pick(input.size() + 1)) + other.substr(pick(other.size() + 1));
      break;
    }
    default:  // overwrite 4 bytes with a random or extreme 32-bit value
      if (input.size() >= 4) {
        const uint32_t value = rng() % 2 ? static_cast<uint32_t>(rng()) : 0xffffffffu >> (rng() % 32);
        std::memcpy(&input[pick(input.size() - 3)], &value, 4);
      }
  }
  if (input.size() > max_len) input.resize(max_len);
}

// The value of a "-name=value" flag, or nullptr when `arg` is not that flag.
const char* FlagValue(const std::string& arg, const char* name) {
  const std::string prefix = std::string("-") + name + "=";
  return arg.rfind(prefix, 0) == 0 ? arg.c_str() + prefix.size() : nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t max_runs = -1;
  double max_seconds = 0;
  uint64_t seed = 1;
  size_t max_len = 4096;
  uint64_t rss_limit_mb = 2048;
  std::string artifact_prefix = "./";
  std::vector<std::string> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = nullptr;
    if ((value = FlagValue(arg, "runs")) != nullptr) {
      max_runs = std::strtoll(value, nullptr, 10);
    } else if ((value = FlagValue(arg, "max_total_time")) != nullptr) {
      max_seconds = std::atof(value);
    } else if ((value = FlagValue(arg, "seed")) != nullptr) {
      seed = std::strtoull(value, nullptr, 10);
    } else if ((value = FlagValue(arg, "max_len")) != nullptr) {
      max_len = std::strtoull(value, nullptr, 10);
    } else if ((value = FlagValue(arg, "rss_limit_mb")) != nullptr) {
      rss_limit_mb = std::strtoull(value, nullptr, 10);
    } else if ((value = FlagValue(arg, "artifact_prefix")) != nullptr) {
      artifact_prefix = value;
    } else if (arg.rfind("-", 0) == 0) {
      std::fprintf(stderr, "fuzz driver: ignoring libFuzzer flag %s\n", arg.c_str());
    } else if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) corpus.push_back(ReadFile(entry.path()));
      }
    } else {
      corpus.push_back(ReadFile(arg));
    }
  }
  if (max_runs < 0 && max_seconds <= 0) max_seconds = 2;
  if (corpus.empty()) corpus.push_back("");
  const rlimit limit{rss_limit_mb << 20, rss_limit_mb << 20};
  if (::setrlimit(RLIMIT_AS, &limit) != 0) std::perror("setrlimit");
  std::snprintf(crash_path, sizeof(crash_path), "%scrash-seed%llu", artifact_prefix.c_str(),
                static_cast<unsigned long long>(seed));
  for (int signal : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL}) ::signal(signal, OnCrash);

  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration<double>(max_seconds);
  auto more = [&](int64_t runs) {
    if (max_runs >= 0 && runs >= max_runs) return false;
    return max_seconds <= 0 || std::chrono::steady_clock::now() < deadline;
  };
  int64_t runs = 0;
  for (size_t i = 0; i < corpus.size() && more(runs); ++i, ++runs) Run(corpus[i]);
  std::mt19937_64 rng(seed);
  for (; more(runs); ++runs) {
    std::string input = corpus[rng() % corpus.size()];
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      Mutate(input, corpus, max_len, rng);
    }
    Run(input);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("fuzz driver: Done %lld runs in %.1f second(s) (%zu corpus inputs, seed %llu): "
              "no crash\n",
              static_cast<long long>(runs), seconds, corpus.size(),
              static_cast<unsigned long long>(seed));
  return 0;
}
