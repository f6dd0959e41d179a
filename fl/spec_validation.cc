#include "fl/spec_validation.h"

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/batch_order_file.h"
#include "fl/codec.h"
#include "fl/fault_model.h"
#include "fl/secure_aggregation.h"
#include "fl/staleness.h"
#include "fl/system_model.h"

namespace fl {
namespace {

// The fields that name files of identical inputs (docs/identical-inputs.md)
// exclude those that would draw the same input otherwise.
void ValidateInputFiles(const fedkit::ExperimentSpec& spec, ErrorList& errors) {
  const fedkit::ProxySpec& proxy = spec.server().proxy();
  if (!proxy.indices_path().empty()) {
    if (proxy.size() != 0) {
      errors.Add("server.proxy.indices_path",
                 "excludes server.proxy.size: the file fixes the proxy set");
    }
    if (proxy.has_imbalance()) {
      errors.Add("server.proxy.indices_path",
                 "excludes server.proxy.imbalance: the file fixes the proxy set");
    }
  }
  if (!spec.initial_model_path().empty() && spec.server().independent_init()) {
    errors.Add("initial_model_path",
               "excludes server.independent_init, under which every client starts from its "
               "own initialisation");
  }
}

// Asynchronous mode's own fields, and what it cannot run with: everything that
// needs a whole cohort at once (the aggregator's property is checked once it exists).
void ValidateAsync(const fedkit::ExperimentSpec& spec, int num_clients, ErrorList& errors) {
  const fedkit::ServerSpec& server = spec.server();
  const fedkit::AsyncSpec& async = server.async();
  const std::string path = "server.async.";
  if (async.concurrency() < 1 || async.concurrency() > std::max(num_clients, 1)) {
    errors.Add(path + "concurrency",
               absl::StrCat("must be in [1, partition.num_clients = ", num_clients, "], got ",
                            async.concurrency()));
  }
  if (async.has_buffer_size() && async.buffer_size() < 1) {
    errors.Add(path + "buffer_size", absl::StrCat("must be >= 1, got ", async.buffer_size()));
  }
  if (async.has_mixing_rate()) {
    if (!(async.mixing_rate() > 0 && async.mixing_rate() <= 1)) {
      errors.Add(path + "mixing_rate",
                 absl::StrCat("must be in (0, 1], got ", async.mixing_rate()));
    }
    if (async.has_buffer_size() && async.buffer_size() != 1) {
      errors.Add(path + "buffer_size",
                 absl::StrCat("must be 1 with mixing_rate (FedAsync mixes each update in as it "
                              "arrives), got ", async.buffer_size()));
    }
  }
  if (absl::Status staleness = StalenessFromSpec(async.staleness()).Check(path + "staleness");
      !staleness.ok()) {
    errors.AddStatus("", staleness);
  }
  auto refuse = [&](bool set, const std::string& field, const char* why) {
    if (set) errors.Add(field, absl::StrCat("excludes server.async: ", why));
  };
  refuse(server.one_shot(), "server.one_shot", "one-shot runs aggregate every client at once");
  refuse(server.has_secure_aggregation(), "server.secure_aggregation",
         "masks cancel only over a whole cohort");
  refuse(server.screening().max_norm_to_median() > 0, "server.screening.max_norm_to_median",
         "the median is a cohort's");
  refuse(server.cohort_sampling() != fedkit::ServerSpec::FIXED_SIZE, "server.cohort_sampling",
         "clients are drawn one at a time as others finish");
  refuse(server.download().kind() != fedkit::CodecSpec::IDENTITY, "server.download",
         "a lossy download's clients' copy follows synchronous rounds");
  refuse(spec.simulation().backend() != fedkit::SimulationSpec::IN_PROCESS,
         "simulation.backend", "asynchronous runs are in-process");
  refuse(server.min_accepted_updates() > 0, "server.min_accepted_updates",
         "an asynchronous step takes the updates that arrive");
}

// What secure aggregation cannot run with: the server sees only the sum, so
// nothing that needs one client's update, a compressed upload or a second process.
void ValidateSecureAggregation(const fedkit::ExperimentSpec& spec, ErrorList& errors) {
  const fedkit::SecureAggregationSpec& secure = spec.server().secure_aggregation();
  const std::string path = "server.secure_aggregation.";
  if (!(secure.update_norm_bound() > 0) || !std::isfinite(secure.update_norm_bound())) {
    errors.Add(path + "update_norm_bound",
               absl::StrCat("must be > 0 (the L2 norm each client clips its update to, which "
                            "sizes the encoding), got ", secure.update_norm_bound()));
  }
  if (secure.has_max_weight() && (!(secure.max_weight() > 0) || !std::isfinite(secure.max_weight()))) {
    errors.Add(path + "max_weight", absl::StrCat("must be > 0, got ", secure.max_weight()));
  }
  if (secure.has_value_range() &&
      (!(secure.value_range() > 0) || !std::isfinite(secure.value_range()))) {
    errors.Add(path + "value_range", absl::StrCat("must be > 0, got ", secure.value_range()));
  }
  if (secure.neighbours() < 0) {
    errors.Add(path + "neighbours", absl::StrCat("must be >= 0, got ", secure.neighbours()));
  }
  const int cohort = spec.server().clients_per_round();
  if (secure.threshold() != 0 && secure.neighbours() >= 0) {
    const int neighbourhood = NeighbourhoodSize(cohort, secure.neighbours());
    if (secure.threshold() < 2 || secure.threshold() > neighbourhood) {
      errors.Add(path + "threshold",
                 absl::StrCat("must be 0 (a majority) or in [2, ", neighbourhood,
                              "] (the neighbourhood of a round of server.clients_per_round = ",
                              cohort, "), got ", secure.threshold()));
    }
  }
  if (spec.server().one_shot()) {
    errors.Add(path.substr(0, path.size() - 1),
               "one-shot runs keep every client's model; secure aggregation reveals only the sum");
  }
  if (spec.server().screening().max_norm_to_median() > 0) {
    errors.Add("server.screening.max_norm_to_median",
               "needs every update's norm, which secure aggregation hides from the server");
  }
  if (CodecFromSpec(spec.client().upload()).kind != CodecConfig::Kind::kIdentity) {
    errors.Add("client.upload", "a compressed update cannot be masked: secure aggregation sends "
                                "4 bytes per summed value; remove the upload codec");
  }
  if (spec.simulation().backend() == fedkit::SimulationSpec::C10D) {
    errors.Add("simulation.backend",
               "secure aggregation runs in one process (C10D is not supported with it)");
  }
}

}  // namespace

void ValidateSpecFields(const fedkit::ExperimentSpec& spec, ErrorList& errors) {
  if (spec.name().empty()) {
    errors.Add("name", "required");
  } else if (spec.name().find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789_-.") != std::string::npos) {
    errors.Add("name", absl::StrCat("only letters, digits, '_', '-' and '.', got \"",
                                    spec.name(), "\""));
  }
  const int num_clients = spec.partition().num_clients();
  if (num_clients < 1) {
    errors.Add("partition.num_clients", absl::StrCat("must be >= 1, got ", num_clients));
  }

  const fedkit::ClientTrainingSpec& client = spec.client();
  switch (client.budget_case()) {
    case fedkit::ClientTrainingSpec::kEpochs:
      if (client.epochs() < 1) {
        errors.Add("client.epochs", absl::StrCat("must be >= 1, got ", client.epochs()));
      }
      break;
    case fedkit::ClientTrainingSpec::kSteps:
      if (client.steps() < 1) {
        errors.Add("client.steps", absl::StrCat("must be >= 1, got ", client.steps()));
      }
      break;
    default:
      errors.Add("client", "set one of epochs or steps (local work per round)");
  }
  if (client.batch_size() < 1) {
    errors.Add("client.batch_size", absl::StrCat("must be >= 1, got ", client.batch_size()));
  }
  if (!(client.max_grad_norm() >= 0) || !std::isfinite(client.max_grad_norm())) {
    errors.Add("client.max_grad_norm", absl::StrCat("must be >= 0, got ", client.max_grad_norm()));
  }
  if (client.has_lr_decay() && !(client.lr_decay() > 0 && client.lr_decay() <= 1)) {
    errors.Add("client.lr_decay", absl::StrCat("must be in (0, 1], got ", client.lr_decay()));
  }
  const bool from_file = client.batch_order() == fedkit::ClientTrainingSpec::FROM_FILE;
  if (from_file && !std::filesystem::is_directory(client.batch_order_dir())) {
    errors.Add("client.batch_order_dir",
               absl::StrCat("batch_order FROM_FILE needs a folder of recorded orders, got \"",
                            client.batch_order_dir(), "\""));
  } else if (!from_file && !client.batch_order_dir().empty()) {
    errors.Add("client.batch_order_dir", "is only read with batch_order: FROM_FILE");
  }
  if (absl::Status record = CheckBatchOrderRecordFolder(client.batch_order_record_dir());
      !record.ok()) {
    errors.Add("client.batch_order_record_dir", record.message());
  }
  if (absl::Status codec = CheckCodec(CodecFromSpec(client.upload())); !codec.ok()) {
    errors.AddStatus("client.upload.", codec);
  }
  if (absl::Status faults = FaultModel::Check(client.faults()); !faults.ok()) {
    errors.AddStatus("", faults);
  }
  if (absl::Status system = SystemModel::Check(client.system()); !system.ok()) {
    errors.AddStatus("", system);
  }
  const fedkit::OptimizerSpec& opt = client.optimizer();
  if (!(opt.lr() > 0) || !std::isfinite(opt.lr())) {
    errors.Add("client.optimizer.lr", absl::StrCat("must be > 0, got ", opt.lr()));
  }
  if (!(opt.momentum() >= 0 && opt.momentum() < 1)) {
    errors.Add("client.optimizer.momentum", absl::StrCat("must be in [0, 1), got ", opt.momentum()));
  }
  if (opt.kind() == fedkit::OptimizerSpec::ADAM && opt.momentum() != 0) {
    errors.Add("client.optimizer.momentum", "applies to SGD only; Adam uses its own betas");
  }
  if (!(opt.weight_decay() >= 0) || !std::isfinite(opt.weight_decay())) {
    errors.Add("client.optimizer.weight_decay",
               absl::StrCat("must be >= 0, got ", opt.weight_decay()));
  }

  const fedkit::ServerSpec& server = spec.server();
  if (server.rounds() < 1) {
    errors.Add("server.rounds", absl::StrCat("must be >= 1, got ", server.rounds()));
  } else if (server.one_shot() && server.rounds() != 1) {
    errors.Add("server.rounds", absl::StrCat("must be 1 with one_shot, got ", server.rounds()));
  }
  if (!server.one_shot() &&
      (server.clients_per_round() < 1 || server.clients_per_round() > std::max(num_clients, 1))) {
    errors.Add("server.clients_per_round",
               absl::StrCat("must be in [1, partition.num_clients = ", num_clients, "], got ",
                            server.clients_per_round()));
  }
  if (const int most = server.one_shot() ? num_clients : server.clients_per_round();
      server.min_accepted_updates() < 0 || server.min_accepted_updates() > most) {
    errors.Add("server.min_accepted_updates",
               absl::StrCat("must be in [0, ",
                            server.one_shot() ? "partition.num_clients" : "clients_per_round",
                            " = ", most, "], got ", server.min_accepted_updates()));
  } else if (server.min_accepted_updates() > 0 &&
             server.cohort_sampling() == fedkit::ServerSpec::POISSON) {
    errors.Add("server.min_accepted_updates",
               "excludes Poisson sampling (server.cohort_sampling), whose cohorts may be empty");
  }
  const fedkit::ClientEvaluationSpec& client_evaluation = server.client_evaluation();
  if (client_evaluation.examples_per_client() < 0) {
    errors.Add("server.client_evaluation.examples_per_client",
               absl::StrCat("must be >= 0, got ", client_evaluation.examples_per_client()));
  }
  if (client_evaluation.sample_clients() < 0 ||
      client_evaluation.sample_clients() > spec.partition().num_clients()) {
    errors.Add("server.client_evaluation.sample_clients",
               absl::StrCat("must be in [0, partition.num_clients = ",
                            spec.partition().num_clients(), "], got ",
                            client_evaluation.sample_clients()));
  }
  if (client_evaluation.fine_tune_steps() < 0) {
    errors.Add("server.client_evaluation.fine_tune_steps",
               absl::StrCat("must be >= 0, got ", client_evaluation.fine_tune_steps()));
  }
  if (client_evaluation.fine_tune_learning_rate() < 0) {
    errors.Add("server.client_evaluation.fine_tune_learning_rate",
               absl::StrCat("must be >= 0, got ", client_evaluation.fine_tune_learning_rate()));
  }
  if (server.has_first_eval_round() &&
      !(server.first_eval_round() >= 1 && server.first_eval_round() <= server.rounds())) {
    errors.Add("server.first_eval_round", absl::StrCat("must be in [1, rounds = ", server.rounds(),
                                                       "], got ", server.first_eval_round()));
  }
  if (server.one_shot() && server.cohort_sampling() != fedkit::ServerSpec::FIXED_SIZE) {
    errors.Add("server.cohort_sampling", "one-shot runs take every client (server.one_shot)");
  }
  if (server.cohort_sampling() == fedkit::ServerSpec::POISSON &&
      !spec.client().system().trace_path().empty()) {
    errors.Add("server.cohort_sampling",
               "POISSON samples every client with the same probability, which a trace's "
               "online windows (client.system.trace_path) would break");
  }
  if (!server.one_shot() && server.independent_init()) {
    errors.Add("server.independent_init", "applies to one-shot runs only (server.one_shot)");
  }
  if (!server.one_shot() && server.compare_size() > 0) {
    errors.Add("server.compare", "applies to one-shot runs only (server.one_shot)");
  }
  if (absl::Status codec = CheckCodec(CodecFromSpec(server.download())); !codec.ok()) {
    errors.AddStatus("server.download.", codec);
  }
  if (server.has_eval_every() && server.eval_every() < 1) {
    errors.Add("server.eval_every", absl::StrCat("must be >= 1, got ", server.eval_every()));
  }
  if (server.has_eval_batch_size() && server.eval_batch_size() < 1) {
    errors.Add("server.eval_batch_size",
               absl::StrCat("must be >= 1, got ", server.eval_batch_size()));
  }
  if (server.proxy().size() < 0) {
    errors.Add("server.proxy.size", absl::StrCat("must be >= 0, got ", server.proxy().size()));
  }
  const double norm_ratio = server.screening().max_norm_to_median();
  if (!(norm_ratio == 0 || (norm_ratio > 1 && std::isfinite(norm_ratio)))) {
    errors.Add("server.screening.max_norm_to_median",
               absl::StrCat("must be 0 (off) or > 1, got ", norm_ratio));
  }
  if (server.has_secure_aggregation()) ValidateSecureAggregation(spec, errors);
  if (server.has_async()) ValidateAsync(spec, num_clients, errors);
  if (spec.output().checkpoint_every() < 0) {
    errors.Add("output.checkpoint_every",
               absl::StrCat("must be >= 0, got ", spec.output().checkpoint_every()));
  }
  if (server.proxy().has_imbalance() &&
      !(server.proxy().imbalance() > 0 && server.proxy().imbalance() <= 1)) {
    errors.Add("server.proxy.imbalance",
               absl::StrCat("must be in (0, 1], got ", server.proxy().imbalance()));
  }
  ValidateInputFiles(spec, errors);
}

}  // namespace fl
