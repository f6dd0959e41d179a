#include "fl/experiment.h"

#include <cmath>
#include <numeric>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "fl/atomic_file.h"
#include "fl/c10d_collective.h"
#include "fl/checkpoint.h"
#include "fl/client_evaluation.h"
#include "fl/client_hook.h"
#include "fl/codec.h"
#include "fl/device.h"
#include "fl/errors.h"
#include "fl/evaluator.h"
#include "fl/federation.h"
#include "fl/index_files.h"
#include "fl/model.h"
#include "fl/model_file.h"
#include "fl/own_model_evaluation.h"
#include "fl/personalization.h"
#include "fl/registry.h"
#include "fl/report/class_counts.h"
#include "fl/report/run_report.h"
#include "fl/secure_aggregation.h"
#include "fl/seeding.h"
#include "fl/server.h"
#include "fl/spec_loader.h"
#include "fl/spec_validation.h"
#include "fl/status_macros.h"
#include "fl/stop_request.h"
#include "fl/thread_budget.h"
#include "fl/wire.h"
#include "glog/logging.h"

namespace fl {
namespace {

constexpr int kDefaultEvalBatchSize = 1000;
constexpr int kDefaultC10dTimeoutSeconds = 300;

// Creates plugin `name` at spec path `path`, recording problems in `errors`.
template <typename Interface>
std::unique_ptr<Interface> CreatePlugin(const std::string& path, const std::string& name,
                                        const google::protobuf::Any& options,
                                        const typename Interface::CreateArgs& args,
                                        ErrorList& errors) {
  const Registry<Interface>& registry = Registry<Interface>::Global();
  if (name.empty()) {
    errors.Add(absl::StrCat(path, ".name"),
               absl::StrCat("required; one of: ", absl::StrJoin(registry.Names(), ", ")));
    return nullptr;
  }
  if (registry.Find(name) == nullptr) {
    errors.Add(absl::StrCat(path, ".name"), registry.UnknownNameError(name).message());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<Interface>> plugin;
  try {
    plugin = registry.Create(name, options, args);
  } catch (const c10::Error& e) {
    // E.g. a model too large to allocate: the spec's fault, reported as such.
    plugin = absl::InvalidArgumentError(
        absl::StrCat("cannot be created: ", e.what_without_backtrace()));
  }
  if (!plugin.ok()) {
    errors.AddStatus(absl::StrCat(path, " (", name, "): "), plugin.status());
    return nullptr;
  }
  return *std::move(plugin);
}

std::optional<std::string> Environment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::nullopt : std::optional<std::string>(value);
}

// `request` already describes the model (DescribeModel); the spec, the machine and
// the environment fill in the rest.
absl::StatusOr<ThreadBudget> BudgetFor(const fedkit::ExperimentSpec& spec,
                                       ThreadBudgetRequest request) {
  request.cores = UsableCores();
  // Processes sharing a host (tools:launch and torchrun say how many) share its
  // cores.
  if (spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    int local_processes = 0;
    if (auto local = Environment("LOCAL_WORLD_SIZE");
        local.has_value() && absl::SimpleAtoi(*local, &local_processes) && local_processes > 1) {
      request.cores = std::max(1, request.cores / local_processes);
    }
  }
  if (spec.simulation().has_workers()) request.workers = spec.simulation().workers();
  if (spec.simulation().has_threads_per_worker()) {
    request.threads_per_worker = spec.simulation().threads_per_worker();
  }
  request.clients_per_round = spec.server().one_shot() ? spec.partition().num_clients()
                                                       : spec.server().clients_per_round();
  // Half of what is free: the data and the server's own copies need the rest.
  request.memory_bytes = AvailableMemoryBytes() / 2;
  request.omp_threads_env = Environment(kOmpThreadsVariable);
  request.openblas_threads_env = Environment(kOpenBlasThreadsVariable);
  return ChooseThreadBudget(request);
}

// Reads initial_model_path against `model`'s layout, for RunExperiment.
void ReadInitialModel(const fedkit::ExperimentSpec& spec, const Model& model,
                      Experiment& experiment, ErrorList& errors) {
  if (spec.initial_model_path().empty()) return;
  absl::StatusOr<ModelState> state =
      ReadModelFile(ResolveUserPath(spec.initial_model_path()), ModelState::FromModule(model));
  if (state.ok()) {
    experiment.initial_model = *std::move(state);
  } else {
    errors.AddStatus("initial_model_path: ", state.status());
  }
}

// The global model before the first round: initial_model_path's when the spec
// names one, else `global_model` as the seed initialised it.
absl::StatusOr<ModelState> InitialGlobalModel(const Experiment& experiment, Model& global_model) {
  if (experiment.initial_model.has_value()) {
    FL_RETURN_IF_ERROR(experiment.initial_model->LoadInto(global_model));
  }
  return ModelState::FromModule(global_model);
}

// Creates the output folder and its parents; the error names it.
absl::Status CreateOutputDir(const std::string& output_dir) {
  std::error_code error;
  std::filesystem::create_directories(output_dir, error);
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot create output directory ", output_dir, ": ", error.message()));
  }
  return absl::OkStatus();
}

// output.write_inputs: partition.json, proxy.json (with a proxy set) and
// initial_model.pt, the files that start another run from this one's inputs.
absl::Status WriteRunInputs(const std::string& output_dir, int64_t train_examples,
                            const std::vector<std::vector<int64_t>>& shares,
                            const std::vector<int64_t>& proxy_indices,
                            const ModelState& initial) {
  FL_RETURN_IF_ERROR(CreateOutputDir(output_dir));
  FL_RETURN_IF_ERROR(WriteFileAtomically(output_dir + "/partition.json",
                                         PartitionFileJson(train_examples, shares)));
  if (!proxy_indices.empty()) {
    FL_RETURN_IF_ERROR(
        WriteFileAtomically(output_dir + "/proxy.json", ProxyFileJson(proxy_indices)));
  }
  return WriteModelFile(output_dir + "/initial_model.pt", initial);
}

}  // namespace

std::set<std::string> UnsharedTensorNames(const Experiment& experiment) {
  std::set<std::string> names(experiment.personal_tensors.begin(),
                              experiment.personal_tensors.end());
  names.insert(experiment.frozen_tensors.begin(), experiment.frozen_tensors.end());
  return names;
}

absl::StatusOr<Experiment> BuildExperiment(const fedkit::ExperimentSpec& spec) {
  ErrorList errors;
  ValidateSpecFields(spec, errors);

  Experiment experiment;
  experiment.spec = spec;
  absl::StatusOr<c10::Device> device = ResolveDevice(spec.device());
  if (device.ok()) {
    experiment.device = *device;
  } else {
    errors.AddStatus("", device.status());
  }

  ThreadBudgetRequest thread_request;
  std::unique_ptr<Model> model;
  experiment.dataset =
      CreatePlugin<Dataset>("dataset", spec.dataset().name(), spec.dataset().options(), {}, errors);
  experiment.partitioner = CreatePlugin<Partitioner>("partition", spec.partition().name(),
                                                     spec.partition().options(), {}, errors);
  if (experiment.dataset != nullptr) {
    experiment.data_info = experiment.dataset->info();
    // Built once here to validate the options and to size the thread budget;
    // RunExperiment builds its own.
    model = CreatePlugin<Model>(
        "model", spec.model().name(), spec.model().options(),
        {experiment.data_info.input_shape, experiment.data_info.num_classes}, errors);
    if (model != nullptr) {
      DescribeModel(*model, thread_request);
      ReadInitialModel(spec, *model, experiment, errors);
    }
  } else if (!spec.model().name().empty()) {
    // Without the data's shape the model cannot be built; still check name and type.
    auto options = Registry<Model>::Global().UnpackOptions(spec.model().name(),
                                                           spec.model().options());
    if (!options.ok()) errors.AddStatus("model: ", options.status());
  }
  experiment.aggregator = CreatePlugin<Aggregator>("aggregator", spec.aggregator().name(),
                                                   spec.aggregator().options(), {}, errors);
  std::vector<std::string> planned_hooks;
  // Every aggregator's hooks and proxy need: the spec's, then each comparison's.
  auto check_needs = [&](const Aggregator& aggregator, const std::string& name) {
    const AggregatorProperties properties = aggregator.properties();
    for (const std::string& hook : properties.client_hooks) {
      if (!absl::c_linear_search(planned_hooks, hook)) planned_hooks.push_back(hook);
    }
    if (properties.uses_proxy && !HasProxy(spec.server().proxy())) {
      errors.Add("server.proxy.size",
                 absl::StrCat("aggregator \"", name,
                              "\" trains on a server-held proxy set: set server.proxy { size: N }"
                              " with N > 0 (or indices_path)"));
    }
    if (properties.step_aware &&
        spec.server().incomplete_updates() == fedkit::ServerSpec::SCALE) {
      errors.Add("server.incomplete_updates",
                 absl::StrCat("SCALE conflicts with aggregator \"", name,
                              "\" (aggregator.name), which reads each update's local steps and "
                              "corrects incomplete updates itself: the delta would be rescaled "
                              "twice; use KEEP or DROP"));
    }
    if (properties.needs_local_sgd &&
        spec.client().optimizer().kind() != fedkit::OptimizerSpec::SGD) {
      errors.Add("client.optimizer.kind",
                 absl::StrCat(fedkit::OptimizerSpec::Kind_Name(spec.client().optimizer().kind()),
                              " conflicts with aggregator \"", name,
                              "\" (aggregator.name), whose server step assumes local SGD; "
                              "use kind: SGD"));
    }
  };
  if (experiment.aggregator != nullptr) {
    check_needs(*experiment.aggregator, spec.aggregator().name());
    const AggregatorProperties properties = experiment.aggregator->properties();
    ValidatePersonalization(spec, properties, errors);
    if (model != nullptr) {
      absl::StatusOr<UnsharedTensors> unshared = ResolveUnshared(*model, properties);
      if (unshared.ok()) {
        experiment.personal_tensors = std::move(unshared->personal);
        experiment.frozen_tensors = std::move(unshared->frozen);
        experiment.local_phases = properties.local_phases;
        experiment.personal_model = properties.personal_model;
      } else {
        errors.AddStatus("", unshared.status());
      }
    }
    if (spec.server().has_async() && !experiment.aggregator->properties().sums_only) {
      errors.Add("server.async",
                 absl::StrCat("aggregator \"", spec.aggregator().name(),
                              "\" (with these options) does not aggregate through sums alone "
                              "(it needs a whole cohort at once, or a statistic that is not a "
                              "sum); asynchronous steps take updates as they arrive"));
    }
    if (spec.server().has_secure_aggregation() && !experiment.aggregator->properties().sums_only) {
      errors.Add("server.secure_aggregation",
                 absl::StrCat("aggregator \"", spec.aggregator().name(),
                              "\" (with these options) does not aggregate through sums alone "
                              "(it needs every client's update, or a statistic that is not a "
                              "sum); under secure aggregation the server sees only the sum"));
    }
  }
  for (int i = 0; i < spec.server().compare_size(); ++i) {
    const fedkit::OneShotComparison& compare = spec.server().compare(i);
    const std::string path = absl::StrCat("server.compare[", i, "]");
    const std::string label = compare.label().empty() ? compare.aggregator().name() : compare.label();
    for (int j = 0; j < i; ++j) {
      const fedkit::OneShotComparison& other = spec.server().compare(j);
      if (label == (other.label().empty() ? other.aggregator().name() : other.label())) {
        errors.Add(path + ".label", absl::StrCat("\"", label, "\" is also server.compare[", j,
                                                 "]'s; give each comparison its own label"));
      }
    }
    std::unique_ptr<Aggregator> aggregator = CreatePlugin<Aggregator>(
        path + ".aggregator", compare.aggregator().name(), compare.aggregator().options(), {},
        errors);
    if (aggregator == nullptr) continue;
    check_needs(*aggregator, compare.aggregator().name());
    experiment.comparisons.push_back({label, std::move(aggregator)});
  }
  for (int i = 0; i < spec.client().hooks_size(); ++i) {
    const fedkit::PluginSpec& hook = spec.client().hooks(i);
    const std::string path = absl::StrCat("client.hooks[", i, "]");
    // A hook runs once per client: twice would apply its loss term twice and
    // share one per-client state slot.
    if (absl::c_linear_search(planned_hooks, hook.name())) {
      errors.Add(path + ".name",
                 absl::StrCat("hook \"", hook.name(),
                              "\" is already requested by aggregator \"",
                              spec.aggregator().name(), "\"",
                              spec.server().compare_size() > 0 ? " or a comparison" : "",
                              "; a hook runs once per client, so remove it here (its options"
                              " come from the aggregator's)"));
    }
    for (int j = 0; j < i; ++j) {
      if (spec.client().hooks(j).name() == hook.name()) {
        errors.Add(path + ".name", absl::StrCat("hook \"", hook.name(),
                                                "\" is also client.hooks[", j, "]; a hook runs once"
                                                " per client"));
      }
    }
    std::unique_ptr<ClientHook> created =
        CreatePlugin<ClientHook>(path, hook.name(), hook.options(), {}, errors);
    if (created == nullptr) continue;
    if (created->planned_only()) {
      errors.Add(path + ".name",
                 absl::StrCat("hook \"", hook.name(), "\" is the client half of an aggregator and "
                              "runs only when that aggregator plans it: choose that aggregator "
                              "(or make it elastic's base) instead"));
      continue;
    }
    experiment.spec_hooks.push_back({hook.name(), hook.options()});
  }
  absl::StatusOr<ThreadBudget> threads = BudgetFor(spec, thread_request);
  if (threads.ok()) {
    experiment.threads = *std::move(threads);
  } else {
    errors.AddStatus("", threads.status());
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return experiment;
}

namespace {

// Applies the worker threads and says what was applied.
void ApplyAndReportThreads(const ThreadBudget& threads) {
  const AppliedThreads applied = ApplyThreads(threads.worker);
  std::printf("threads: %d worker(s) x %d thread(s) on %d core(s) (%s)\n", threads.workers,
              threads.threads_per_worker, threads.cores, threads.reason.c_str());
  std::printf("threads applied: intra-op %d, inter-op %d, OpenBLAS %s\n", applied.intra_op,
              applied.inter_op,
              applied.blas_controllable ? std::to_string(applied.blas).c_str()
                                        : "not controllable (the loaded BLAS is not OpenBLAS)");
  std::fflush(stdout);
  for (const std::string& warning : threads.warnings) LOG(WARNING) << "threads: " << warning;
}

// A distributed run joins its other processes before loading anything, so that a
// wrong address fails fast; a single-process run has no group.
absl::StatusOr<std::unique_ptr<Collective>> JoinProcessGroup(const fedkit::ExperimentSpec& spec) {
  if (spec.simulation().backend() != fedkit::SimulationSpec::C10D) return nullptr;
  // Gloo writes to its peers' sockets with writev, which raises SIGPIPE once a
  // peer has died: that would end this rank silently. Ignored, the write fails
  // with EPIPE and the run reports which rank stopped answering.
  std::signal(SIGPIPE, SIG_IGN);
  FL_ASSIGN_OR_RETURN(ProcessGroupAddress address, ProcessGroupAddressFromEnvironment());
  const int timeout = spec.simulation().c10d().has_timeout_seconds()
                          ? spec.simulation().c10d().timeout_seconds()
                          : kDefaultC10dTimeoutSeconds;
  return ConnectC10d(address, std::chrono::seconds(timeout));
}

// class_counts.csv: each client's training examples by class, which the report
// page draws as the partition's heatmap.
absl::Status WriteClassCounts(const std::string& output_dir, const RunData& data,
                              int64_t num_classes) {
  const at::Tensor labels = data.train.y.to(at::kCPU, at::kLong).contiguous();
  const absl::Span<const int64_t> span(labels.data_ptr<int64_t>(), labels.numel());
  FL_RETURN_IF_ERROR(CreateOutputDir(output_dir));
  return WriteFileAtomically(
      output_dir + "/class_counts.csv",
      report::CountsCsv(report::CountByClass(data.shares, span, num_classes)));
}

int64_t EvalBatchSize(const fedkit::ExperimentSpec& spec) {
  return spec.server().has_eval_batch_size() ? spec.server().eval_batch_size()
                                             : kDefaultEvalBatchSize;
}

// The server's settings from the spec (what it does each round), without the
// hooks that reach into the runner (checkpointing, stopping).
ServerConfig ServerConfigFor(const fedkit::ExperimentSpec& spec, const ThreadBudget& threads,
                             Collective* group, std::vector<int> client_ranks,
                             const std::vector<int64_t>& client_sizes) {
  ServerConfig config;
  config.rounds = spec.server().rounds();
  config.clients_per_round = spec.server().clients_per_round();
  config.poisson_sampling = spec.server().cohort_sampling() == fedkit::ServerSpec::POISSON;
  config.eval_every = spec.server().has_eval_every() ? spec.server().eval_every() : 1;
  config.first_eval_round =
      spec.server().has_first_eval_round() ? spec.server().first_eval_round() : 0;
  config.one_shot = spec.server().one_shot();
  config.min_accepted_updates = spec.server().min_accepted_updates();
  config.download = CodecFromSpec(spec.server().download());
  config.download_error_feedback = spec.server().download().error_feedback();
  switch (spec.server().incomplete_updates()) {
    case fedkit::ServerSpec::DROP:
      config.incomplete = ServerConfig::Incomplete::kDrop;
      break;
    case fedkit::ServerSpec::SCALE:
      config.incomplete = ServerConfig::Incomplete::kScale;
      break;
    default:
      config.incomplete = ServerConfig::Incomplete::kKeep;
  }
  config.max_norm_to_median = spec.server().screening().max_norm_to_median();
  config.workers = threads.workers;
  config.seed = spec.seed();
  config.collective = group;
  config.client_ranks = std::move(client_ranks);
  config.gather_updates = spec.simulation().c10d().merge() == fedkit::C10dSpec::GATHER;
  if (spec.server().has_async()) {
    const fedkit::AsyncSpec& async = spec.server().async();
    ServerConfig::Async& a = config.async.emplace();
    a.concurrency = async.concurrency();
    a.buffer_size = async.has_buffer_size() ? async.buffer_size() : 1;
    if (async.has_mixing_rate()) a.mixing_rate = async.mixing_rate();
    a.staleness = StalenessFromSpec(async.staleness());
  }
  if (spec.server().has_secure_aggregation()) {
    const fedkit::SecureAggregationSpec& secure = spec.server().secure_aggregation();
    SecureAggregationConfig& s = config.secure_aggregation.emplace();
    s.threshold = secure.threshold();
    s.neighbours = secure.neighbours();
    s.update_norm_bound = secure.update_norm_bound();
    s.max_weight = secure.has_max_weight()
                       ? secure.max_weight()
                       : static_cast<double>(*absl::c_max_element(client_sizes));
    s.value_range = secure.value_range();
    config.new_aggregator = [&spec] {
      return Registry<Aggregator>::Global().Create(spec.aggregator().name(),
                                                   spec.aggregator().options());
    };
  }
  // Only when the server's setting differs; otherwise the one applied first stands.
  if (!(threads.server == threads.worker)) {
    config.on_phase = [&threads](RoundPhase phase) {
      ApplyThreads(phase == RoundPhase::kClients ? threads.worker : threads.server);
    };
  }
  config.keep_best = spec.output().save_best_model();
  config.checkpoint_every = spec.output().checkpoint_every();
  config.stop_requested = StopRequested;
  return config;
}

// What the aggregator may ask of the run (the device, a new model, the proxy set,
// the federation's size). `test_accuracy` is set by the caller, which owns the test set.
ServerContext ServerContextFor(const Experiment& experiment, const Examples& proxy,
                               int64_t federation_examples) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  ServerContext context;
  context.device = experiment.device;
  context.new_model = [&spec, info = &experiment.data_info, device = experiment.device] {
    return NewModel(spec, *info, device);
  };
  context.proxy = proxy.size() > 0 ? &proxy : nullptr;
  context.num_clients = spec.partition().num_clients();
  context.num_examples = federation_examples;
  context.client_momentum = spec.client().optimizer().momentum();
  context.expected_cohort_size =
      spec.server().one_shot() ? context.num_clients : spec.server().clients_per_round();
  context.poisson_sampling = spec.server().cohort_sampling() == fedkit::ServerSpec::POISSON;
  context.planned_rounds = spec.server().rounds();
  context.asynchronous = spec.server().has_async();
  context.uniform_cohorts =
      !context.asynchronous && spec.client().system().trace_path().empty();
  return context;
}

// The client states of clients another rank owns are not this rank's to keep.
void KeepOwnedStates(const Collective* group, const std::vector<int>& client_ranks,
                     std::map<ClientStateStore::Key, TensorMap>& states) {
  if (group == nullptr) return;
  for (auto it = states.begin(); it != states.end();) {
    it = client_ranks[it->first.first] == group->rank() ? std::next(it) : states.erase(it);
  }
}

// Everything a checkpoint needs to write one, from the runner's objects.
struct CheckpointSources {
  const fedkit::ExperimentSpec* spec = nullptr;
  c10::Device device = c10::kCPU;
  Collective* group = nullptr;
  const std::vector<int>* client_ranks = nullptr;
  ClientStateStore* state_store = nullptr;
  Aggregator* aggregator = nullptr;
  MetricsSink* sink = nullptr;
  std::string path;
};

// Writes a checkpoint after `progress`. Each rank holds its own clients' states;
// rank 0 gathers and writes them all, so the file is the same whatever the number
// of processes.
absl::Status WriteRunCheckpoint(const CheckpointSources& from, const ServerProgress& progress) {
  std::map<ClientStateStore::Key, TensorMap> client_states = from.state_store->Snapshot();
  const bool rank_zero = from.group == nullptr || from.group->rank() == 0;
  if (from.group != nullptr) {
    KeepOwnedStates(from.group, *from.client_ranks, client_states);
    FL_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                        from.group->Gather(rank_zero ? std::string()
                                                     : SerializeClientStates(client_states)));
    if (!rank_zero) return absl::OkStatus();
    for (size_t r = 1; r < messages.size(); ++r) {
      FL_ASSIGN_OR_RETURN(auto theirs,
                          ParseClientStates(messages[r], from.device,
                                            absl::StrCat("client states from rank ", r)));
      client_states.merge(theirs);
    }
  }
  Checkpoint checkpoint;
  checkpoint.spec = SpecToText(*from.spec);
  checkpoint.server = progress;
  checkpoint.aggregator_state = from.aggregator->SaveState();
  checkpoint.client_states = std::move(client_states);
  checkpoint.rows = from.sink->rows();
  checkpoint.diagnostics = from.sink->diagnostic_rows();
  FL_RETURN_IF_ERROR(WriteCheckpoint(from.path, checkpoint));
  LOG(INFO) << "checkpoint after round " << progress.rounds_done << " in " << from.path;
  return absl::OkStatus();
}

// Puts a checkpoint's state back (aggregator, this rank's client states, rank 0's
// rows) and resumes the server after its last round.
absl::StatusOr<ModelState> ResumeFrom(const Checkpoint& resume, const ModelState& initial,
                                      const CheckpointSources& into, Server& server) {
  if (absl::Status layout = initial.CheckSameLayout(resume.server.global); !layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the checkpoint's model does not fit the spec's: ", layout.message()));
  }
  FL_RETURN_IF_ERROR(into.aggregator->RestoreState(resume.aggregator_state));
  std::map<ClientStateStore::Key, TensorMap> client_states = resume.client_states;
  KeepOwnedStates(into.group, *into.client_ranks, client_states);
  into.state_store->Restore(std::move(client_states));
  if (into.sink != nullptr) {
    for (const MetricsRow& row : resume.rows) FL_RETURN_IF_ERROR(into.sink->AddRow(row));
    for (const MetricsSink::DiagnosticsRow& row : resume.diagnostics) {
      FL_RETURN_IF_ERROR(into.sink->AddDiagnostics(row.round, row.values));
    }
  }
  LOG(INFO) << "resuming after round " << resume.server.rounds_done << " of "
            << into.spec->server().rounds();
  return server.Resume(resume.server);
}

// output.report (default on): report.html from the files the run has just
// written. The results are complete without it, so a failure only warns.
void WriteReportPage(const fedkit::ExperimentSpec& spec, const std::string& output_dir) {
  if (spec.output().has_report() && !spec.output().report()) return;
  if (absl::Status status = report::WriteRunReport(output_dir); !status.ok()) {
    LOG(WARNING) << "no report.html: " << status;
  }
}

// What a run writes before its first round (not again on resume):
// output.write_inputs' files, and class_counts.csv for the report page.
absl::Status WriteStartFiles(const Experiment& experiment, const std::string& output_dir,
                             const RunData& data, const ModelState& initial) {
  if (experiment.spec.output().write_inputs()) {
    FL_RETURN_IF_ERROR(WriteRunInputs(output_dir, data.train.size(), data.shares,
                                      data.proxy_indices, initial));
  }
  return WriteClassCounts(output_dir, data, experiment.data_info.num_classes);
}

// server.client_evaluation's test sets (none when it is off), from the run's
// data before its shares go to the clients.
absl::StatusOr<std::optional<ClientTestSets>> ClientTestsFor(const Experiment& experiment,
                                                             const RunData& data) {
  const fedkit::ClientEvaluationSpec& spec = experiment.spec.server().client_evaluation();
  if (spec.has_enabled() && !spec.enabled()) return std::optional<ClientTestSets>();
  ClientTestSetOptions options;
  options.examples_per_client = spec.examples_per_client();
  options.sample_clients = spec.sample_clients();
  absl::StatusOr<ClientTestSets> sets =
      LabelMatchedTestSets(data.train.y, data.shares, data.test.y,
                           experiment.data_info.num_classes, options, experiment.spec.seed());
  if (!sets.ok()) {
    return absl::Status(sets.status().code(),
                        absl::StrCat("server.client_evaluation: ", sets.status().message()));
  }
  if (sets->untestable > 0 || sets->shortfall > 0) {
    LOG(WARNING) << "server.client_evaluation: " << sets->untestable
                 << " client(s) left out (the test split has none of their classes), "
                 << sets->shortfall << " test example(s) fewer than asked (a class had too few)";
  }
  return std::optional<ClientTestSets>(*std::move(sets));
}

// summary.json's "client_evaluation": how the per-client columns were made.
std::string ClientEvaluationJson(const Experiment& experiment, const ClientTestSets& sets) {
  const int fine_tune_steps = experiment.spec.server().client_evaluation().fine_tune_steps();
  return absl::StrCat("{\"split\": \"label_matched\", \"model\": \"",
                      experiment.personal_model             ? "personal"
                      : experiment.personal_tensors.empty() ? "global"
                                                            : "global_with_personal",
                      "\", \"fine_tune_steps\": ", fine_tune_steps,
                      ", \"clients\": ", sets.clients.size(),
                      ", \"test_examples\": ", sets.indices.numel(),
                      ", \"untestable_clients\": ", sets.untestable,
                      ", \"shortfall\": ", sets.shortfall, "}");
}

// The spec's client_evaluation settings for EvaluateOwnModels; the caller adds
// the test sets, the data and the personal tensors.
OwnModelEvaluation OwnModelSetup(const Experiment& experiment, int64_t eval_batch_size) {
  const fedkit::ClientEvaluationSpec& spec = experiment.spec.server().client_evaluation();
  OwnModelEvaluation setup;
  setup.augmentation = experiment.data_info.train_augmentation;
  setup.client = experiment.spec.client();
  setup.fine_tune_steps = spec.fine_tune_steps();
  setup.fine_tune_learning_rate = spec.fine_tune_learning_rate();
  setup.seed = experiment.spec.seed();
  setup.eval_batch_size = eval_batch_size;
  return setup;
}

// The server half of a run, assembled around a Federation: the server with its
// settings and what it lends the aggregator, evaluation on the test split, the
// metrics sink (rank 0), the one-shot report and checkpoints; then the
// synchronous round loop from the first round or from a checkpoint.
class ServerSide {
 public:
  // `client_tests`: each client's test examples (server.client_evaluation), or
  // none when it is off.
  ServerSide(Experiment& experiment, Federation& federation, Model& global_model,
             Collective* group, const std::string& output_dir,
             std::optional<ClientTestSets> client_tests,
             std::vector<std::vector<int64_t>> fine_tuning_shares)
      : experiment_(experiment),
        federation_(federation),
        global_model_(global_model),
        group_(group),
        output_dir_(output_dir),
        eval_batch_(EvalBatchSize(experiment.spec)),
        client_tests_(std::move(client_tests)),
        fine_tuning_shares_(std::move(fine_tuning_shares)) {}

  // Opens the sink (rank 0 only writes results) and builds the server.
  absl::Status Open(bool rank_zero, RoundObserver on_round, ClientReach reach_clients) {
    const fedkit::ExperimentSpec& spec = experiment_.spec;
    if (rank_zero) {
      FL_ASSIGN_OR_RETURN(sink_, MetricsSink::Open(output_dir_, spec));
      sink_->AddSummaryField("threads", experiment_.threads.ToJson());
      if (client_tests_.has_value()) {
        sink_->AddSummaryField("client_evaluation", ClientEvaluationJson(experiment_, *client_tests_));
      }
    }
    aggregator_ = experiment_.aggregator.get();
    if (spec.server().one_shot()) {
      report_ = std::make_unique<OneShotReport>(spec.aggregator().name(), aggregator_,
                                                std::move(experiment_.comparisons), TestEvaluator(),
                                                TestPredictorEvaluator(), sink_.get());
      aggregator_ = report_.get();
    }
    checkpoint_sources_ = {&spec,
                           experiment_.device,
                           group_,
                           &federation_.client_ranks(),
                           &federation_.state_store(),
                           aggregator_,
                           sink_.get(),
                           output_dir_ + "/" + kCheckpointFile};
    ServerConfig config = ServerConfigFor(spec, experiment_.threads, group_,
                                          federation_.client_ranks(), federation_.client_sizes());
    config.on_evaluated = std::move(on_round);
    config.unshared_tensors = UnsharedTensorNames(experiment_);
    config.task_seconds = [this](int64_t client, int round, int64_t bytes_down) {
      return federation_.TaskSeconds(client, round, bytes_down);
    };
    if (federation_.has_availability()) {
      config.next_window = [this](int64_t client, double at) {
        return federation_.NextWindow(client, at);
      };
    }
    config.checkpoint = [this](const ServerProgress& progress) {
      return WriteRunCheckpoint(checkpoint_sources_, progress);
    };
    const fedkit::ClientEvaluationSpec& client_evaluation = spec.server().client_evaluation();
    if (group_ != nullptr && KeepsPersonalTensors() &&
        (!client_evaluation.has_enabled() || client_evaluation.enabled())) {
      config.before_evaluation = [this](int) { return GatherPersonalTensors(); };
    }
    ServerContext context =
        ServerContextFor(experiment_, federation_.data().proxy, federation_.num_examples());
    context.test_accuracy = [evaluate = TestEvaluator()](const ModelState& state)
        -> absl::StatusOr<double> {
      FL_ASSIGN_OR_RETURN(Evaluation evaluation, evaluate(state));
      return evaluation.accuracy;
    };
    std::vector<std::unique_ptr<Client>> clients = federation_.TakeClients();
    if (reach_clients) {
      const size_t count = clients.size();
      FL_ASSIGN_OR_RETURN(clients, reach_clients(std::move(clients)));
      if (clients.size() != count) {
        return absl::InternalError(absl::StrCat("the deployment reaches ", clients.size(),
                                                " clients of ", count));
      }
      // Deployed clients keep their personal tensors: each evaluates its own model.
      if (KeepsPersonalTensors()) {
        for (const std::unique_ptr<Client>& client : clients) self_evaluating_.push_back(client.get());
        config.before_evaluation = [this](int round) {
          evaluating_round_ = round;
          return absl::OkStatus();
        };
      }
    }
    server_ = std::make_unique<Server>(std::move(config), aggregator_, std::move(clients),
                                       std::move(context), WithClientAccuracy(TestEvaluator()),
                                       sink_.get());
    server_->set_predictor_evaluator(
        [this, evaluate = TestPredictorEvaluator()](const Predictor& predict) {
          return AddClientAccuracy(evaluate(predict));
        });
    return absl::OkStatus();
  }

  // From `initial`, or after `resume`'s last round.
  absl::StatusOr<ModelState> Run(ModelState initial, const Checkpoint* resume) {
    if (resume == nullptr) return server_->Run(std::move(initial));
    return ResumeFrom(*resume, initial, checkpoint_sources_, *server_);
  }

  const Server& server() const { return *server_; }
  // Null on ranks other than 0.
  const MetricsSink* sink() const { return sink_.get(); }

 private:
  Server::Evaluator TestEvaluator() {
    return [this](const ModelState& state) {
      return Evaluate(global_model_, state, federation_.data().test, eval_batch_);
    };
  }
  OneShotReport::PredictorEvaluator TestPredictorEvaluator() {
    return [this](const Predictor& predict) {
      return EvaluatePredictor(predict, federation_.data().test, eval_batch_);
    };
  }
  // The server's evaluations also read each client's accuracy off the test
  // split's per-example results.
  Server::Evaluator WithClientAccuracy(Server::Evaluator evaluate) {
    return [this, evaluate = std::move(evaluate)](const ModelState& state) {
      if (!OwnModels()) return AddClientAccuracy(evaluate(state));
      return AddOwnModelAccuracy(evaluate(state), state);
    };
  }
  // Each client is evaluated with a model of its own: its personal tensors, or
  // fine-tuned first (fl/own_model_evaluation.h).
  bool OwnModels() const {
    return client_tests_.has_value() &&
           (KeepsPersonalTensors() ||
            experiment_.spec.server().client_evaluation().fine_tune_steps() > 0);
  }
  bool KeepsPersonalTensors() const {
    return !experiment_.personal_tensors.empty() || experiment_.personal_model;
  }
  // C10D: each rank keeps its own clients' personal tensors, and rank 0, which
  // evaluates, gets a copy of every rank's before each evaluation (every client
  // the rank owns, whether or not it is evaluated: only rank 0 knows which are).
  absl::Status GatherPersonalTensors() {
    std::map<ClientStateStore::Key, TensorMap> personal;
    for (auto& [key, tensors] : federation_.state_store().Snapshot()) {
      if (key.second == kPersonalSlot) personal.emplace(key, std::move(tensors));
    }
    KeepOwnedStates(group_, federation_.client_ranks(), personal);
    const bool rank_zero = group_->rank() == 0;
    FL_ASSIGN_OR_RETURN(std::vector<std::string> messages,
                        group_->Gather(rank_zero ? std::string() : SerializeClientStates(personal)));
    if (!rank_zero) return absl::OkStatus();
    for (size_t r = 1; r < messages.size(); ++r) {
      FL_ASSIGN_OR_RETURN(auto theirs,
                          ParseClientStates(messages[r], experiment_.device,
                                            absl::StrCat("personal tensors from rank ", r)));
      for (const auto& [key, tensors] : theirs) {
        const std::vector<int>& ranks = federation_.client_ranks();
        if (key.second != kPersonalSlot || key.first < 0 ||
            key.first >= static_cast<int64_t>(ranks.size()) || ranks[key.first] != static_cast<int>(r)) {
          return absl::InternalError(absl::StrCat("rank ", r, " sent client ", key.first, "'s \"",
                                                  key.second, "\" state, which is not its personal "
                                                  "tensors of a client it owns"));
        }
      }
      personal.merge(theirs);
    }
    gathered_personal_.Restore(std::move(personal));
    return absl::OkStatus();
  }
  absl::StatusOr<Evaluation> AddOwnModelAccuracy(absl::StatusOr<Evaluation> evaluation,
                                                 const ModelState& state) const {
    if (!evaluation.ok() || client_tests_->clients.empty()) return evaluation;
    if (!self_evaluating_.empty()) return AddDeployedOwnModelAccuracy(std::move(evaluation), state);
    const fedkit::ClientEvaluationSpec& spec = experiment_.spec.server().client_evaluation();
    OwnModelEvaluation setup = OwnModelSetup(experiment_, eval_batch_);
    setup.sets = &*client_tests_;
    setup.test = &federation_.data().test;
    setup.train = &federation_.data().train;
    setup.shares = &fine_tuning_shares_;
    if (KeepsPersonalTensors()) {
      setup.personal = group_ != nullptr ? &gathered_personal_ : &federation_.state_store();
    }
    FL_ASSIGN_OR_RETURN(OwnModelAccuracy own, EvaluateOwnModels(global_model_, state, setup));
    if (own.fine_tuning_failed > 0) {
      LOG(WARNING) << "server.client_evaluation: fine-tuning failed for " << own.fine_tuning_failed
                   << " of " << client_tests_->clients.size()
                   << " client(s), left out of client_acc_*; first: " << own.first_failure;
    }
    evaluation->client_accuracy = ClientAccuracyColumns(own.accuracy);
    if (spec.fine_tune_steps() > 0) {
      evaluation->client_accuracy["client_ft_failed"] = static_cast<double>(own.fine_tuning_failed);
    }
    return evaluation;
  }
  // A deployment: each evaluated client evaluates its own model on its test
  // examples and answers with its count. A client that cannot (disconnected, past
  // its deadline) is left out and counted in client_eval_failed.
  absl::StatusOr<Evaluation> AddDeployedOwnModelAccuracy(absl::StatusOr<Evaluation> evaluation,
                                                         const ModelState& state) const {
    const ClientTestSets& sets = *client_tests_;
    const at::Tensor all = sets.indices.to(at::kCPU).contiguous();
    const int64_t* indices = all.data_ptr<int64_t>();
    std::vector<double> per_client;
    std::vector<int64_t> sizes;
    int64_t failed = 0;
    absl::Status first_failure;
    int64_t offset = 0;
    for (size_t p = 0; p < sets.clients.size(); ++p) {
      const std::vector<int64_t> own(indices + offset, indices + offset + sets.sizes[p]);
      offset += sets.sizes[p];
      absl::StatusOr<OwnEvaluation> result =
          self_evaluating_[static_cast<size_t>(sets.clients[p])]->EvaluateOwnModel(
              state, own, evaluating_round_);
      if (!result.ok()) {
        if (failed++ == 0) first_failure = result.status();
        continue;
      }
      per_client.push_back(static_cast<double>(result->correct) /
                           static_cast<double>(result->examples));
      sizes.push_back(result->examples);
    }
    if (per_client.empty()) {
      return absl::UnavailableError(absl::StrCat(
          "server.client_evaluation: no deployed client evaluated its own model; first: ",
          first_failure.message()));
    }
    if (failed > 0) {
      LOG(WARNING) << "server.client_evaluation: " << failed << " of " << sets.clients.size()
                   << " deployed client(s) did not evaluate their own model, left out of "
                      "client_acc_*; first: "
                   << first_failure;
    }
    evaluation->client_accuracy = ClientAccuracyColumns(SummarizeAccuracies(per_client, sizes));
    evaluation->client_accuracy["client_eval_failed"] = static_cast<double>(failed);
    return evaluation;
  }
  absl::StatusOr<Evaluation> AddClientAccuracy(absl::StatusOr<Evaluation> evaluation) const {
    if (!evaluation.ok() || !client_tests_.has_value() || client_tests_->clients.empty()) {
      return evaluation;
    }
    evaluation->client_accuracy =
        ClientAccuracyColumns(SummarizeClientAccuracy(*client_tests_, evaluation->correct));
    return evaluation;
  }

  Experiment& experiment_;
  Federation& federation_;
  Model& global_model_;
  Collective* group_;
  const std::string output_dir_;
  const int64_t eval_batch_;
  const std::optional<ClientTestSets> client_tests_;
  // Each client's training indices, kept for fine-tuning at evaluation (the
  // clients own theirs); empty without it.
  const std::vector<std::vector<int64_t>> fine_tuning_shares_;
  // C10D, rank 0: every client's personal tensors as of the last evaluation.
  ClientStateStore gathered_personal_;
  // A deployment with personal tensors: the clients (owned by the server, in id
  // order), which evaluate their own models, and the round being evaluated.
  std::vector<Client*> self_evaluating_;
  int evaluating_round_ = 0;
  std::unique_ptr<MetricsSink> sink_;
  Aggregator* aggregator_ = nullptr;
  std::unique_ptr<OneShotReport> report_;
  CheckpointSources checkpoint_sources_;
  std::unique_ptr<Server> server_;
};

}  // namespace

absl::StatusOr<Evaluation> EvaluateOnTestSplit(
    Experiment& experiment,
    const std::function<absl::StatusOr<ModelState>(const ModelState& layout)>& read) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  FL_RETURN_IF_ERROR(experiment.dataset->CheckAvailable());
  FL_ASSIGN_OR_RETURN(DatasetSplits data, experiment.dataset->Load());
  FL_RETURN_IF_ERROR(CheckLabels(data.test, experiment.data_info.num_classes, "test"));
  const Examples test = {data.test.x.to(experiment.device), data.test.y.to(experiment.device)};
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      NewModel(spec, experiment.data_info, experiment.device));
  FL_ASSIGN_OR_RETURN(ModelState state, read(ModelState::FromModule(*model)));
  return Evaluate(*model, state, test, EvalBatchSize(spec));
}

absl::StatusOr<ExperimentResult> RunExperiment(Experiment& experiment,
                                               const std::string& output_dir,
                                               const Checkpoint* resume, RoundObserver on_round,
                                               ClientReach reach_clients) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  if (on_round && spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    return absl::FailedPreconditionError(
        "a per-round observer watches a single-process run; simulation.backend C10D has several");
  }
  if (reach_clients && spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    return absl::FailedPreconditionError(
        "a deployment's server is one process: simulation.backend must not be C10D");
  }
  ApplyAndReportThreads(experiment.threads);
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Collective> group, JoinProcessGroup(spec));
  const bool rank_zero = group == nullptr || group->rank() == 0;

  FL_ASSIGN_OR_RETURN(RunData data, LoadRunData(experiment));
  // The global model draws from LibTorch's global generator before the replicas do.
  torch::manual_seed(DeriveSeed(spec.seed(), SeedStream::kInitialModel));
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> global_model,
                      NewModel(spec, experiment.data_info, experiment.device));
  FL_ASSIGN_OR_RETURN(ModelState initial, InitialGlobalModel(experiment, *global_model));
  if (rank_zero && resume == nullptr) {
    FL_RETURN_IF_ERROR(WriteStartFiles(experiment, output_dir, data, initial));
  }
  LOG(INFO) << "model " << spec.model().name() << ": " << initial.NumParameters()
            << " parameters, " << initial.NumElements() - initial.NumParameters()
            << " buffer elements; " << data.shares.size() << " clients on " << experiment.device;
  std::optional<ClientTestSets> client_tests;
  std::vector<std::vector<int64_t>> fine_tuning_shares;
  if (rank_zero) {
    FL_ASSIGN_OR_RETURN(client_tests, ClientTestsFor(experiment, data));
    if (client_tests.has_value() && spec.server().client_evaluation().fine_tune_steps() > 0) {
      fine_tuning_shares = data.shares;
    }
  }
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Federation> federation,
                      Federation::Assemble(experiment, std::move(data), group.get()));

  ServerSide side(experiment, *federation, *global_model, group.get(), output_dir,
                  std::move(client_tests), std::move(fine_tuning_shares));
  FL_RETURN_IF_ERROR(side.Open(rank_zero, std::move(on_round), std::move(reach_clients)));
  FL_ASSIGN_OR_RETURN(ModelState final_model, side.Run(std::move(initial), resume));
  if (!rank_zero) return ExperimentResult{std::move(final_model), {}, group->rank()};
  FL_RETURN_IF_ERROR(WriteModelFile(output_dir + "/model.pt", final_model));
  if (side.server().best_model().has_value()) {
    FL_RETURN_IF_ERROR(WriteModelFile(output_dir + "/best_model.pt", *side.server().best_model()));
  }
  WriteReportPage(spec, output_dir);
  return ExperimentResult{std::move(final_model), side.sink()->rows()};
}

HostedClient::HostedClient() = default;
HostedClient::HostedClient(HostedClient&&) = default;
HostedClient::~HostedClient() = default;

namespace {

// A deployed client (fl_client) as the session sees it: the federation's client,
// which also evaluates its own model when the server asks (Task.evaluation).
class SelfEvaluatingClient : public Client {
 public:
  SelfEvaluatingClient(std::unique_ptr<Client> inner, const Experiment& experiment,
                       Federation& federation, std::unique_ptr<Model> model,
                       std::vector<std::vector<int64_t>> shares, bool own_data)
      : inner_(std::move(inner)),
        experiment_(experiment),
        federation_(federation),
        model_(std::move(model)),
        shares_(std::move(shares)),
        own_data_(own_data) {}

  int64_t id() const override { return inner_->id(); }
  int64_t num_examples() const override { return inner_->num_examples(); }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override {
    return inner_->Train(global, plan, round);
  }
  void Acknowledge(bool accepted) override { inner_->Acknowledge(accepted); }

  absl::StatusOr<OwnEvaluation> EvaluateOwnModel(const ModelState& global,
                                                 const std::vector<int64_t>& test_indices,
                                                 int round) override {
    const Examples& test = federation_.data().test;
    const int64_t available = test.y.size(0);
    std::vector<int64_t> indices = test_indices;
    if (own_data_) {  // its test split is its own held-out data
      indices.resize(static_cast<size_t>(available));
      std::iota(indices.begin(), indices.end(), int64_t{0});
    }
    for (const int64_t i : indices) {
      if (i < 0 || i >= available) {
        return absl::InvalidArgumentError(absl::StrCat("test index ", i, " is outside the test split of ",
                                                       available));
      }
    }
    if (indices.empty()) return absl::InvalidArgumentError("no test example to evaluate on");
    const auto n = static_cast<int64_t>(indices.size());
    ClientTestSets sets;
    sets.clients = {id()};
    sets.sizes = {n};
    sets.indices = at::tensor(indices, at::kLong);
    sets.owner = at::zeros({n}, at::kLong);
    OwnModelEvaluation setup = OwnModelSetup(experiment_, EvalBatchSize(experiment_.spec));
    setup.sets = &sets;
    setup.test = &test;
    setup.train = &federation_.data().train;
    setup.shares = &shares_;
    setup.personal = &federation_.state_store();
    FL_ASSIGN_OR_RETURN(OwnModelAccuracy own, EvaluateOwnModels(*model_, global, setup));
    return OwnEvaluation{std::llround(own.accuracy.per_client[0] * static_cast<double>(n)), n};
  }

 private:
  std::unique_ptr<Client> inner_;
  const Experiment& experiment_;
  Federation& federation_;
  std::unique_ptr<Model> model_;  // the evaluation's replica
  // Every client's training share (only this client's is not empty), for fine-tuning.
  const std::vector<std::vector<int64_t>> shares_;
  const bool own_data_;
};

}  // namespace

absl::StatusOr<HostedClient> HostClient(Experiment& experiment, int64_t client_id,
                                        Dataset* own_data) {
  const fedkit::ExperimentSpec& spec = experiment.spec;
  if (spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    return absl::FailedPreconditionError(
        "a deployment's client is one process: simulation.backend must not be C10D");
  }
  if (client_id < 0 || client_id >= spec.partition().num_clients()) {
    return absl::InvalidArgumentError(absl::StrCat("client id ", client_id, " is not in [0, ",
                                                   spec.partition().num_clients(),
                                                   ") (partition.num_clients)"));
  }
  ApplyAndReportThreads(experiment.threads);
  RunData data;
  if (own_data == nullptr) {
    FL_ASSIGN_OR_RETURN(data, LoadRunData(experiment));
  } else {
    FL_ASSIGN_OR_RETURN(data, LoadOwnData(experiment, *own_data, client_id));
  }
  // The server's order of draws from LibTorch's generator: the global model first.
  torch::manual_seed(DeriveSeed(spec.seed(), SeedStream::kInitialModel));
  FL_ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                      NewModel(spec, experiment.data_info, experiment.device));
  HostedClient hosted;
  hosted.layout = ModelState::FromModule(*model).Clone();
  std::vector<std::vector<int64_t>> shares(data.shares.size());
  shares[static_cast<size_t>(client_id)] = data.shares[static_cast<size_t>(client_id)];
  FL_ASSIGN_OR_RETURN(hosted.federation, Federation::Assemble(experiment, std::move(data), nullptr));
  std::vector<std::unique_ptr<Client>> clients = hosted.federation->TakeClients();
  hosted.client = std::make_unique<SelfEvaluatingClient>(
      std::move(clients[static_cast<size_t>(client_id)]), experiment, *hosted.federation,
      std::move(model), std::move(shares), own_data != nullptr);
  return hosted;
}

}  // namespace fl
