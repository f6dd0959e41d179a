#include "fl/python/python_plugins.h"

#include <pybind11/stl.h>
#include <torch/extension.h>  // at::Tensor <-> torch.Tensor without copies

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "aggregators/common/partial_sums.h"
#include "fl/aggregator.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "google/protobuf/struct.pb.h"
#include "glog/logging.h"
#include "google/protobuf/util/json_util.h"

namespace fl::python {
namespace {

namespace py = pybind11;

// The exception being handled, as Python prints it (traceback included).
std::string Traceback(const py::error_already_set& e) {
  try {
    py::list lines =
        py::module_::import("traceback").attr("format_exception")(e.type(), e.value(), e.trace());
    std::string text;
    for (py::handle line : lines) text += line.cast<std::string>();
    return text;
  } catch (const std::exception&) {
    return e.what();
  }
}

// Runs `body` (Python calls and conversions); an exception becomes a Status saying
// who raised it in which method.
template <typename Body>
auto Guarded(const std::string& who, const char* method, Body body) -> decltype(body()) {
  try {
    return body();
  } catch (const py::error_already_set& e) {
    return absl::InternalError(absl::StrCat(who, ": ", method, " raised:\n", Traceback(e)));
  } catch (const std::exception& e) {  // a result of the wrong type (py::cast_error)
    return absl::InvalidArgumentError(absl::StrCat(who, ": ", method, ": ", e.what()));
  }
}

py::object Namespace(const py::dict& fields) {
  return py::module_::import("types").attr("SimpleNamespace")(**fields);
}

py::dict ExtrasToDict(const ExtraStates& extras) {
  py::dict d;
  for (const auto& [name, state] : extras) d[name.c_str()] = ModelStateToDict(state);
  return d;
}

std::map<std::string, at::Tensor> DictToTensorMap(const py::handle& dict) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [key, value] : py::cast<py::dict>(dict)) {
    tensors[key.cast<std::string>()] = value.cast<at::Tensor>();
  }
  return tensors;
}

// A Python class's instance, let go under the GIL. Which methods it has is read
// once (under the GIL), so that a missing one costs no GIL round trip.
class PythonObject {
 public:
  // REQUIRES: the GIL is held.
  explicit PythonObject(py::object instance) : instance_(std::move(instance)) {
    for (py::handle name : py::module_::import("builtins").attr("dir")(instance_)) {
      attributes_.insert(name.cast<std::string>());
    }
  }
  PythonObject(const PythonObject&) = delete;
  PythonObject& operator=(const PythonObject&) = delete;
  ~PythonObject() {
    py::gil_scoped_acquire gil;
    instance_ = py::object();
  }
  const py::object& get() const { return instance_; }
  bool Has(const std::string& method) const { return attributes_.count(method) > 0; }

 private:
  py::object instance_;
  std::set<std::string> attributes_;
};

// A class held by a registry entry's factory; let go under the GIL.
std::shared_ptr<py::object> Hold(py::object cls) {
  return std::shared_ptr<py::object>(new py::object(std::move(cls)), [](py::object* held) {
    py::gil_scoped_acquire gil;
    delete held;
  });
}

// The plugin's options (a Struct) as keyword arguments for its class.
absl::StatusOr<py::dict> Kwargs(const google::protobuf::Message& options) {
  std::string json;
  const auto printed = google::protobuf::util::MessageToJsonString(options, &json);
  if (!printed.ok()) return absl::InvalidArgumentError(std::string(printed.message()));
  return py::cast<py::dict>(py::module_::import("json").attr("loads")(json));
}

// An instance of `cls` built from `options`; a constructor that raises (an unknown
// or bad option) is the options' error.
absl::StatusOr<py::object> Instantiate(const std::string& who, const py::object& cls,
                                       const google::protobuf::Message& options) {
  FL_ASSIGN_OR_RETURN(py::dict kwargs, Kwargs(options));
  try {
    return cls(**kwargs);
  } catch (const py::error_already_set& e) {
    return absl::InvalidArgumentError(absl::StrCat("options: ", who, ": ", Traceback(e)));
  }
}

template <typename T>
T ClassAttribute(const py::object& instance, const char* name, T fallback) {
  return py::hasattr(instance, name) ? instance.attr(name).cast<T>() : fallback;
}

absl::StatusOr<DpSum::Role> DpRole(const std::string& role) {
  if (role == "update_sum") return DpSum::Role::kUpdateSum;
  if (role == "squared_norm_sum") return DpSum::Role::kSquaredNormSum;
  if (role == "weight_total") return DpSum::Role::kWeightTotal;
  if (role == "count") return DpSum::Role::kCount;
  return absl::InvalidArgumentError(absl::StrCat(
      "dp_sums: role \"", role,
      "\" is not one of update_sum, squared_norm_sum, weight_total, count"));
}

absl::StatusOr<AggregatorProperties> ReadProperties(const py::object& instance) {
  AggregatorProperties p;
  p.order_invariant = ClassAttribute(instance, "order_invariant", p.order_invariant);
  p.single_client_identity =
      ClassAttribute(instance, "single_client_identity", p.single_client_identity);
  p.uses_proxy = ClassAttribute(instance, "uses_proxy", p.uses_proxy);
  p.client_hooks = ClassAttribute(instance, "client_hooks", p.client_hooks);
  p.step_aware = ClassAttribute(instance, "step_aware", p.step_aware);
  p.needs_local_sgd = ClassAttribute(instance, "needs_local_sgd", p.needs_local_sgd);
  p.sums_only = ClassAttribute(instance, "sums_only", p.sums_only);
  using PrefixRole = std::pair<std::string, std::string>;
  for (const auto& [prefix, role] :
       ClassAttribute(instance, "dp_sums", std::vector<PrefixRole>{})) {
    FL_ASSIGN_OR_RETURN(DpSum::Role parsed, DpRole(role));
    p.dp_sums.push_back({prefix, parsed});
  }
  return p;
}

// What the server lends for one call: a namespace with the context's fields and
// `diagnostics` / `summary` dicts (and `evaluation_model`) for the method to fill.
py::object ServerContextToPython(const ServerContext& context) {
  py::dict f;
  f["round"] = context.round;
  f["device"] = context.device.str();
  f["round_seed"] = context.round_seed;
  f["num_clients"] = context.num_clients;
  f["num_examples"] = context.num_examples;
  f["client_momentum"] = context.client_momentum;
  f["expected_cohort_size"] = context.expected_cohort_size;
  f["poisson_sampling"] = context.poisson_sampling;
  f["planned_rounds"] = context.planned_rounds;
  if (context.proxy != nullptr) {
    py::dict proxy;
    proxy["x"] = context.proxy->x;
    proxy["y"] = context.proxy->y;
    f["proxy"] = Namespace(proxy);
  } else {
    f["proxy"] = py::none();
  }
  f["diagnostics"] = py::cast(context.diagnostics);
  py::dict summary;
  py::object loads = py::module_::import("json").attr("loads");
  for (const auto& [key, json] : context.summary) summary[key.c_str()] = loads(json);
  f["summary"] = summary;
  f["evaluation_model"] = py::none();
  return Namespace(f);
}

absl::Status ServerContextFromPython(const py::object& ns, const ModelState& global,
                                     ServerContext& context) {
  for (const auto& [key, value] : py::cast<py::dict>(ns.attr("diagnostics"))) {
    context.diagnostics[key.cast<std::string>()] = value.cast<double>();
  }
  py::object dumps = py::module_::import("json").attr("dumps");
  for (const auto& [key, value] : py::cast<py::dict>(ns.attr("summary"))) {
    context.summary[key.cast<std::string>()] = dumps(value).cast<std::string>();
  }
  py::object evaluation = ns.attr("evaluation_model");
  if (!evaluation.is_none()) {
    FL_ASSIGN_OR_RETURN(context.evaluation_model,
                        ModelStateFromDict(evaluation, global, "context.evaluation_model"));
  }
  return absl::OkStatus();
}

py::object UpdateToPython(const ClientUpdate& update) {
  py::dict f;
  f["client_id"] = update.client_id;
  f["delta"] = ModelStateToDict(update.delta);
  f["num_examples"] = update.num_examples;
  f["local_steps"] = update.local_steps;
  f["planned_steps"] = update.planned_steps;
  f["extras"] = ExtrasToDict(update.extras);
  f["metrics"] = py::cast(update.metrics);
  f["bytes_sent"] = update.bytes_sent;
  return Namespace(f);
}

// A hook in a RoundPlan: a name, or (name, options as a dict in the hook options'
// JSON mapping).
absl::StatusOr<HookRequest> HookFromPython(const py::handle& item) {
  HookRequest request;
  if (py::isinstance<py::str>(item)) {
    request.name = item.cast<std::string>();
    return request;
  }
  auto [name, options] = item.cast<std::pair<std::string, py::dict>>();
  request.name = name;
  const auto* entry = Registry<ClientHook>::Global().Find(name);
  if (entry == nullptr) return Registry<ClientHook>::Global().UnknownNameError(name);
  std::unique_ptr<google::protobuf::Message> message(entry->default_options().New());
  const std::string json = py::module_::import("json").attr("dumps")(options).cast<std::string>();
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, message.get());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("hook \"", name, "\" options: ", std::string(parsed.message())));
  }
  request.options.PackFrom(*message);
  return request;
}

absl::StatusOr<RoundPlan> PlanFromPython(const py::object& result) {
  RoundPlan plan;
  if (result.is_none()) return plan;
  py::dict dict = py::cast<py::dict>(result);
  for (const auto& [key, value] : dict) {
    const std::string field = key.cast<std::string>();
    if (field == "hooks") {
      for (py::handle item : value) {
        FL_ASSIGN_OR_RETURN(HookRequest request, HookFromPython(item));
        plan.hooks.push_back(std::move(request));
      }
    } else if (field == "broadcast") {
      for (const auto& [name, tensors] : py::cast<py::dict>(value)) {
        std::vector<ModelState::Entry> entries;
        for (const auto& [tensor_name, tensor] : py::cast<py::dict>(tensors)) {
          entries.push_back({tensor_name.cast<std::string>(), tensor.cast<at::Tensor>(), false});
        }
        plan.broadcast[name.cast<std::string>()] = ModelState(std::move(entries));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "the plan's key \"", field, "\" is not one of \"hooks\", \"broadcast\""));
    }
  }
  return plan;
}

class PythonAggregator : public Aggregator {
 public:
  PythonAggregator(std::string who, py::object instance, AggregatorProperties properties)
      : who_(std::move(who)), instance_(std::move(instance)), properties_(std::move(properties)) {}

  AggregatorProperties properties() const override { return properties_; }

  absl::StatusOr<RoundPlan> Configure(const ModelState& global, ServerContext& context) override {
    FL_RETURN_IF_ERROR(failed_);
    global_ = global;
    if (!instance_.Has("configure")) return RoundPlan();
    py::gil_scoped_acquire gil;
    return Guarded(who_, "configure", [&]() -> absl::StatusOr<RoundPlan> {
      py::object ns = ServerContextToPython(context);
      py::object plan = instance_.get().attr("configure")(ModelStateToDict(global), ns);
      FL_RETURN_IF_ERROR(ServerContextFromPython(ns, global, context));
      return PlanFromPython(plan);
    });
  }

  // An exception is the plugin's bug, not the update's: the round's remaining
  // updates are refused with it and Finalize reports it, which ends the run. Once
  // a method has raised, every later call fails with that error.
  // An update of another layout than the round's model is refused here, so the
  // class need not check.
  absl::Status Accumulate(ClientUpdate update, ServerContext& context) override {
    if (!failed_.ok()) return failed_;
    FL_RETURN_IF_ERROR(global_.CheckSameLayout(update.delta));
    py::gil_scoped_acquire gil;
    KeepFirstError(Guarded(who_, "accumulate", [&]() -> absl::Status {
      py::object ns = ServerContextToPython(context);
      instance_.get().attr("accumulate")(UpdateToPython(update), ns);
      return ServerContextFromPython(ns, update.delta, context);
    }));
    return failed_;
  }

  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext& context) override {
    FL_RETURN_IF_ERROR(failed_);
    py::gil_scoped_acquire gil;
    return Guarded(who_, "finalize", [&]() -> absl::StatusOr<ModelState> {
      py::object ns = ServerContextToPython(context);
      py::object next = instance_.get().attr("finalize")(ModelStateToDict(global), ns);
      FL_RETURN_IF_ERROR(ServerContextFromPython(ns, global, context));
      return ModelStateFromDict(next, global, "finalize's result");
    });
  }

  std::optional<std::map<std::string, at::Tensor>> PartialSums() const override {
    if (!instance_.Has("partial_sums")) return std::nullopt;
    py::gil_scoped_acquire gil;
    std::optional<std::map<std::string, at::Tensor>> sums;
    KeepFirstError(Guarded(who_, "partial_sums", [&]() -> absl::Status {
      py::object result = instance_.get().attr("partial_sums")();
      if (!result.is_none()) sums = DictToTensorMap(result);
      return absl::OkStatus();
    }));
    return sums;
  }

  absl::Status MergePartialSums(std::map<std::string, at::Tensor> sums) override {
    if (!instance_.Has("merge_partial_sums")) return Aggregator::MergePartialSums(std::move(sums));
    // Sums of another layout than this process's own are refused here.
    FL_RETURN_IF_ERROR(aggregators::CheckMergeable(*this, !global_.empty(), sums));
    py::gil_scoped_acquire gil;
    return Guarded(who_, "merge_partial_sums", [&]() -> absl::Status {
      instance_.get().attr("merge_partial_sums")(py::cast(sums));
      return absl::OkStatus();
    });
  }

  std::map<std::string, at::Tensor> SaveState() const override {
    if (!instance_.Has("save_state")) return {};
    py::gil_scoped_acquire gil;
    std::map<std::string, at::Tensor> state;
    KeepFirstError(Guarded(who_, "save_state", [&]() -> absl::Status {
      state = DictToTensorMap(instance_.get().attr("save_state")());
      return absl::OkStatus();
    }));
    return state;
  }

  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    if (!instance_.Has("restore_state")) return Aggregator::RestoreState(state);
    py::gil_scoped_acquire gil;
    return Guarded(who_, "restore_state", [&]() -> absl::Status {
      instance_.get().attr("restore_state")(py::cast(state));
      return absl::OkStatus();
    });
  }

 private:
  // Const methods (PartialSums, SaveState) cannot return an error: theirs is
  // logged at once (a checkpoint written now lacks the state) and returned by the
  // next call that can.
  void KeepFirstError(const absl::Status& status) const {
    if (status.ok() || !failed_.ok()) return;
    LOG(ERROR) << status;
    failed_ = status;
  }

  const std::string who_;
  PythonObject instance_;
  const AggregatorProperties properties_;
  ModelState global_;  // this round's, sharing its tensors
  mutable absl::Status failed_;  // the first exception; see KeepFirstError
};

// The hook's view of a client's round, kept for the round's calls: the live
// parameters (autograd flows through loss_term), the global model, the
// broadcast, the hook's own state and the client's data.
py::object HookContextToPython(const HookContext& context) {
  py::dict f;
  f["client_id"] = context.client_id;
  f["round"] = context.round;
  py::dict parameters;
  for (const auto& item : context.model->named_parameters()) {
    parameters[item.key().c_str()] = item.value();
  }
  f["model"] = parameters;
  f["global_model"] =
      context.global != nullptr ? py::object(ModelStateToDict(*context.global)) : py::none();
  f["broadcast"] =
      context.broadcast != nullptr ? py::object(ExtrasToDict(*context.broadcast)) : py::dict();
  f["state"] = context.state != nullptr ? py::cast(*context.state) : py::dict();
  if (context.examples != nullptr) {
    f["x"] = context.examples->x;
    f["y"] = context.examples->y;
  }
  if (context.train_indices != nullptr) {
    f["train_indices"] = at::tensor(*context.train_indices, at::kLong);
  }
  f["seed"] = context.seed;
  f["learning_rate"] = context.learning_rate;
  f["batch_size"] = context.batch_size;
  return Namespace(f);
}

class PythonClientHook : public ClientHook {
 public:
  PythonClientHook(std::string who, py::object instance, bool planned_only)
      : who_(std::move(who)), instance_(std::move(instance)), planned_only_(planned_only) {}

  ~PythonClientHook() override {
    py::gil_scoped_acquire gil;
    ns_ = py::object();
  }

  bool planned_only() const override { return planned_only_; }

  absl::Status BeforeTraining(HookContext& context) override {
    py::gil_scoped_acquire gil;
    return Guarded(who_, "before_training", [&]() -> absl::Status {
      ns_ = HookContextToPython(context);
      if (instance_.Has("before_training")) instance_.get().attr("before_training")(ns_);
      return KeepState(context);
    });
  }

  // Called every local step, which cannot fail: an exception is kept for
  // AfterTraining to report, and no further term is added.
  at::Tensor LossTerm(HookContext& context) override {
    if (!failed_.ok() || !instance_.Has("loss_term")) return at::Tensor();
    py::gil_scoped_acquire gil;
    at::Tensor term;
    failed_ = Guarded(who_, "loss_term", [&]() -> absl::Status {
      py::object result = instance_.get().attr("loss_term")(ns_);
      if (!result.is_none()) term = result.cast<at::Tensor>();
      return absl::OkStatus();
    });
    return term;
  }

  absl::Status AfterTraining(HookContext& context, ClientUpdate& update) override {
    FL_RETURN_IF_ERROR(failed_);
    if (!instance_.Has("after_training")) return absl::OkStatus();
    py::gil_scoped_acquire gil;
    return Guarded(who_, "after_training", [&]() -> absl::Status {
      py::object extras = instance_.get().attr("after_training")(ns_, UpdateToPython(update));
      FL_RETURN_IF_ERROR(KeepState(context));
      if (extras.is_none()) return absl::OkStatus();
      ExtraStates added;
      for (const auto& [name, tensors] : py::cast<py::dict>(extras)) {
        std::vector<ModelState::Entry> entries;
        for (const auto& [tensor_name, tensor] : py::cast<py::dict>(tensors)) {
          entries.push_back({tensor_name.cast<std::string>(), tensor.cast<at::Tensor>(), false});
        }
        added[name.cast<std::string>()] = ModelState(std::move(entries));
      }
      update.bytes_sent += NumBytes(added);
      for (auto& [name, state] : added) update.extras[name] = std::move(state);
      return absl::OkStatus();
    });
  }

 private:
  // What the method left in ns.state becomes the hook's state on this client.
  absl::Status KeepState(HookContext& context) {
    if (context.state != nullptr) *context.state = DictToTensorMap(ns_.attr("state"));
    return absl::OkStatus();
  }

  const std::string who_;
  PythonObject instance_;
  const bool planned_only_;
  py::object ns_;
  absl::Status failed_;
};

template <typename Interface, typename Create>
absl::Status Register(const std::string& name, py::object cls, const std::string& file, int line,
                      Create create) {
  std::shared_ptr<py::object> held = Hold(std::move(cls));
  return Registry<Interface>::Global().AddAtRunTime(
      {name, &registry_internal::DefaultOptions<google::protobuf::Struct>,
       [name, held, create](const google::protobuf::Message& options,
                            const typename Interface::CreateArgs&)
           -> absl::StatusOr<std::unique_ptr<Interface>> {
         py::gil_scoped_acquire gil;
         return create(name, *held, options);
       },
       file, line});
}

}  // namespace

py::dict ModelStateToDict(const ModelState& state) {
  py::dict d;
  for (const ModelState::Entry& entry : state.entries()) d[entry.name.c_str()] = entry.tensor;
  return d;
}

absl::StatusOr<ModelState> ModelStateFromDict(const py::handle& result, const ModelState& like,
                                              const std::string& what) {
  if (!py::isinstance<py::dict>(result)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " must be a dict of tensors by name, got ",
        py::str(result.get_type()).cast<std::string>()));
  }
  py::dict dict = py::reinterpret_borrow<py::dict>(result);
  std::vector<ModelState::Entry> entries;
  for (const ModelState::Entry& entry : like.entries()) {
    if (!dict.contains(entry.name.c_str())) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has no \"", entry.name, "\""));
    }
    at::Tensor tensor = dict[entry.name.c_str()].cast<at::Tensor>();
    if (tensor.sizes() != entry.tensor.sizes() ||
        tensor.scalar_type() != entry.tensor.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, "[\"", entry.name, "\"]: expected ", c10::toString(entry.tensor.scalar_type()),
          " of shape ", c10::str(entry.tensor.sizes()), ", got ",
          c10::toString(tensor.scalar_type()),
          " of shape ", c10::str(tensor.sizes())));
    }
    entries.push_back({entry.name, tensor.to(entry.tensor.device()), entry.is_buffer});
  }
  if (dict.size() != like.size()) {  // every name of `like` was found: the rest are extra
    std::vector<std::string> extra;
    for (const auto& [key, value] : dict) {
      const std::string name = key.cast<std::string>();
      if (std::none_of(like.entries().begin(), like.entries().end(),
                       [&](const ModelState::Entry& e) { return e.name == name; })) {
        extra.push_back(name);
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has tensors the model does not: ", absl::StrJoin(extra, ", ")));
  }
  return ModelState(std::move(entries));
}

absl::Status RegisterPythonAggregator(const std::string& name, py::object cls,
                                      const std::string& file, int line) {
  for (const char* method : {"accumulate", "finalize"}) {
    if (!py::hasattr(cls, method)) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregator \"", name, "\": the class has no ", method, " method"));
    }
  }
  return Register<Aggregator>(
      name, std::move(cls), file, line,
      [](const std::string& name, const py::object& cls, const google::protobuf::Message& options)
          -> absl::StatusOr<std::unique_ptr<Aggregator>> {
        const std::string who = absl::StrCat("python aggregator \"", name, "\"");
        FL_ASSIGN_OR_RETURN(py::object instance, Instantiate(who, cls, options));
        absl::StatusOr<AggregatorProperties> properties =
            Guarded(who, "properties", [&] { return ReadProperties(instance); });
        if (!properties.ok()) return properties.status();
        return std::make_unique<PythonAggregator>(who, std::move(instance), *std::move(properties));
      });
}

absl::Status RegisterPythonClientHook(const std::string& name, py::object cls,
                                      const std::string& file, int line) {
  return Register<ClientHook>(
      name, std::move(cls), file, line,
      [](const std::string& name, const py::object& cls, const google::protobuf::Message& options)
          -> absl::StatusOr<std::unique_ptr<ClientHook>> {
        const std::string who = absl::StrCat("python client hook \"", name, "\"");
        FL_ASSIGN_OR_RETURN(py::object instance, Instantiate(who, cls, options));
        absl::StatusOr<bool> planned_only =
            Guarded(who, "planned_only", [&]() -> absl::StatusOr<bool> {
              return ClassAttribute(instance, "planned_only", false);
            });
        if (!planned_only.ok()) return planned_only.status();
        return std::make_unique<PythonClientHook>(who, std::move(instance), *planned_only);
      });
}

}  // namespace fl::python
