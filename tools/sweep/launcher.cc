#include "tools/sweep/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace sweep {
namespace {

using Clock = std::chrono::steady_clock;

volatile sig_atomic_t pending_signal = 0;

void OnSignal(int signal) { pending_signal = signal; }

// Catches SIGINT and SIGTERM for as long as it lives, without SA_RESTART so that
// a blocked wait4 returns to pass them on.
class SignalCatcher {
 public:
  SignalCatcher() {
    pending_signal = 0;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalCatcher() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_;
  struct sigaction old_term_;
};

// The child's pid, or the reason it could not start (also written to its log).
pid_t Spawn(const Job& job, std::string* error) {
  std::vector<char*> argv;
  for (const std::string& arg : job.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, job.log.c_str(),
                                   O_WRONLY | O_CREAT | (job.append_log ? O_APPEND : O_TRUNC),
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int result = posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (result == 0) return pid;
  *error = absl::StrCat("cannot start ", job.argv[0], ": ", std::strerror(result));
  std::ofstream(job.log) << *error << "\n";
  return -1;
}

}  // namespace

std::vector<JobResult> RunJobs(const std::vector<Job>& jobs, int parallel,
                               const JobCallbacks& callbacks, bool* stopped) {
  SignalCatcher catcher;
  std::vector<JobResult> results(jobs.size());
  struct Running {
    size_t job;
    Clock::time_point start;
  };
  std::map<pid_t, Running> running;
  size_t next = 0;
  *stopped = false;
  while (true) {
    if (pending_signal != 0) {
      *stopped = true;
      for (const auto& [child, unused] : running) kill(child, pending_signal);
      pending_signal = 0;
    }
    while (!*stopped && next < jobs.size() && running.size() < static_cast<size_t>(parallel)) {
      const size_t job = next++;
      JobResult& result = results[job];
      result.ran = true;
      callbacks.started(job);
      const Clock::time_point start = Clock::now();
      const pid_t pid = Spawn(jobs[job], &result.how);
      if (pid < 0) {
        callbacks.finished(job, result);
        continue;
      }
      running[pid] = {job, start};
    }
    if (running.empty()) break;

    int status = 0;
    struct rusage usage;
    const pid_t pid = wait4(-1, &status, 0, &usage);
    if (pid < 0) {
      // EINTR: a signal to pass on (at the top); anything else (ECHILD) leaves
      // nothing to wait for.
      if (errno == EINTR) continue;
      break;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    JobResult& result = results[it->second.job];
    result.wall_seconds = std::chrono::duration<double>(Clock::now() - it->second.start).count();
    // Linux reports ru_maxrss in KiB.
    result.max_rss_mb = usage.ru_maxrss / 1024.0;
    if (WIFEXITED(status)) {
      result.exit_code = WEXITSTATUS(status);
      result.how = absl::StrCat("exit ", result.exit_code);
    } else {
      result.how = absl::StrCat("signal ", WTERMSIG(status));
    }
    const size_t job = it->second.job;
    running.erase(it);
    callbacks.finished(job, result);
  }
  return results;
}

}  // namespace sweep
