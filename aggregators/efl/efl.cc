// EFL (Ma et al., "Towards Heterogeneous Clients with Elastic Federated Learning",
// arXiv 2106.09433, Algorithm 1), server half. No public code exists; docs/efl.md
// says which choices the paper leaves open and which option follows which reading.
//
// Each round the server broadcasts the sums U = sum_j u_j and V = sum_j v_j of the
// clients' Fisher diagonals u_j = I_j and v_j = I_j (.) w_j (over the previous
// round's participants, the paper's form, or over the latest of every client seen,
// FedCurv's: client.curvature), and every client minimises its loss plus EFL's
// elastic term through them (the "efl" hook, efl_hook.cc). The server step is the
// `base` aggregator's: by default FedAvg's (the paper's),
//   w <- w + sum_k p_k Delta_k,   p_k = n_k / n over the round's participants,
// or any other's (EFL's clients under FedExP's step: base { name: "fedexp" }). The
// rest of EFL is the simulator's, for any method:
//   - incomplete clients with EFL's weight p_k = E p^k / s_k: client.system and
//     server { incomplete_updates: SCALE };
//   - compression with error feedback: client.upload (sparse ternary ST_q).
// Diagnostic: max_u, the largest entry of the U the next round broadcasts (the
// client clips U where lr * lambda * U would reach 2). With the paper's
// ROUND_PARTICIPANTS the round's sums of u and v are all-reduced in distributed
// runs, with the base's sums when it has them; the updates are gathered to one
// process otherwise (LATEST_PER_CLIENT keeps every client's latest pair).
//
//   aggregator {
//     name: "efl"
//     options { [type.googleapis.com/fedkit.aggregators.EflOptions] { client { lambda: 0.1 } } }
//   }

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregators/common/conformance_reasons.h"
#include "aggregators/efl/efl_options.pb.h"
#include "aggregators/efl/efl_settings.h"
#include "aggregators/common/base_aggregator.h"
#include "aggregators/common/partial_sums.h"
#include "fl/aggregator.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {
namespace {

using TensorsByName = std::map<std::string, at::Tensor>;

// SaveState keys: "U/<parameter>", "V/<parameter>", and with LATEST_PER_CLIENT
// "client/<id>/u/<parameter>", "client/<id>/v/<parameter>".
constexpr char kU[] = "U/";
constexpr char kV[] = "V/";
constexpr char kClient[] = "client/";
constexpr char kBase[] = "base/";  // the base aggregator's own keys follow

class Efl : public fl::Aggregator {
 public:
  Efl(std::unique_ptr<fl::Aggregator> base, fedkit::aggregators::EflOptions options,
      EflSettings settings)
      : base_(std::move(base)), options_(std::move(options)), settings_(settings) {}

  fl::AggregatorProperties properties() const override {
    fl::AggregatorProperties properties = base_->properties();
    properties.client_hooks.push_back("efl");
    properties.dp_sums.clear();  // its Fisher sums' sensitivity is not bounded
    properties.sums_only = properties.sums_only && !settings_.sums_latest_per_client;
    return properties;
  }

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    names_.clear();
    shapes_.clear();
    std::vector<fl::ModelState::Entry> parameters;
    for (const auto& e : global.entries()) {
      if (e.is_buffer) continue;
      names_.push_back(e.name);
      shapes_[e.name] = e.tensor.sizes().vec();
      parameters.push_back(e);
    }
    parameters_ = fl::ModelState(std::move(parameters));
    // Restored state must fit this model.
    FL_RETURN_IF_ERROR(CheckFits(u_, "U"));
    FL_RETURN_IF_ERROR(CheckFits(v_, "V"));
    for (const auto& [client, uv] : latest_) {
      FL_RETURN_IF_ERROR(CheckFits(uv.first, absl::StrCat("client ", client, "'s u")));
      FL_RETURN_IF_ERROR(CheckFits(uv.second, absl::StrCat("client ", client, "'s v")));
    }
    round_u_.clear();
    round_v_.clear();
    FL_ASSIGN_OR_RETURN(fl::RoundPlan plan, base_->Configure(global, context));
    google::protobuf::Any options;
    options.PackFrom(options_.client());
    plan.hooks.push_back({"efl", options});
    if (!u_.empty()) {
      FL_ASSIGN_OR_RETURN(plan.broadcast[kEflU], Ordered(u_));
      FL_ASSIGN_OR_RETURN(plan.broadcast[kEflV], Ordered(v_));
    }
    return plan;
  }

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(TensorsByName u, Extra(update, kEflU));
    FL_ASSIGN_OR_RETURN(TensorsByName v, Extra(update, kEflV));
    const int64_t client = update.client_id;
    FL_RETURN_IF_ERROR(base_->Accumulate(std::move(update), context));
    if (settings_.sums_latest_per_client) {
      latest_[client] = {std::move(u), std::move(v)};
    } else {
      AddTo(round_u_, u);
      AddTo(round_v_, v);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {
    FL_ASSIGN_OR_RETURN(fl::ModelState next, base_->Finalize(global, context));
    if (settings_.sums_latest_per_client) {
      u_.clear();
      v_.clear();
      for (const auto& [client, uv] : latest_) {
        AddTo(u_, uv.first);
        AddTo(v_, uv.second);
      }
    } else {
      u_ = std::move(round_u_);
      v_ = std::move(round_v_);
      round_u_.clear();
      round_v_.clear();
    }
    double max_u = 0.0;
    for (const auto& [name, t] : u_) max_u = std::max(max_u, t.max().item<double>());
    context.diagnostics["max_u"] = max_u;
    parameters_.reset();
    return next;
  }

  // The base's sums and this round's sums of u and v; none when the sums cover
  // every client's latest (u, v), which the merging process must hold one by one,
  // or when the base has none.
  std::optional<NamedSums> PartialSums() const override {
    if (settings_.sums_latest_per_client) return std::nullopt;
    std::optional<NamedSums> base = base_->PartialSums();
    if (!base.has_value()) return std::nullopt;
    CHECK(parameters_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    AddPrefixed(kBaseSums, *base, sums);
    for (const auto& [prefix, round_sum] : {std::pair(kU, &round_u_), std::pair(kV, &round_v_)}) {
      for (const auto& e : parameters_->entries()) {
        auto it = round_sum->find(e.name);
        sums[prefix + e.name] = it != round_sum->end() ? it->second : at::zeros_like(e.tensor);
      }
    }
    return sums;
  }

  absl::Status MergePartialSums(NamedSums sums) override {
    FL_RETURN_IF_ERROR(CheckMergeable(*this, parameters_.has_value(), sums));
    FL_RETURN_IF_ERROR(base_->MergePartialSums(WithoutPrefix(kBaseSums, sums)));
    round_u_ = WithoutPrefix(kU, sums);
    round_v_ = WithoutPrefix(kV, sums);
    return absl::OkStatus();
  }

  std::map<std::string, at::Tensor> SaveState() const override {
    std::map<std::string, at::Tensor> state;
    for (const auto& [key, t] : base_->SaveState()) state[kBase + key] = t;
    for (const auto& [name, t] : u_) state[kU + name] = t.clone();
    for (const auto& [name, t] : v_) state[kV + name] = t.clone();
    for (const auto& [client, uv] : latest_) {
      for (const auto& [name, t] : uv.first) state[absl::StrCat(kClient, client, "/u/", name)] = t.clone();
      for (const auto& [name, t] : uv.second) state[absl::StrCat(kClient, client, "/v/", name)] = t.clone();
    }
    return state;
  }

  absl::Status RestoreState(const std::map<std::string, at::Tensor>& state) override {
    TensorsByName u, v;
    std::map<int64_t, std::pair<TensorsByName, TensorsByName>> latest;
    std::map<std::string, at::Tensor> base_state;
    for (const auto& [key, tensor] : state) {
      if (absl::StartsWith(key, kBase)) {
        base_state[key.substr(sizeof(kBase) - 1)] = tensor;
        continue;
      }
      if (!tensor.defined() || !at::isFloatingType(tensor.scalar_type())) {
        return absl::InvalidArgumentError(
            absl::StrCat("state: \"", key, "\" is not a floating-point tensor"));
      }
      const at::Tensor copy = tensor.detach().clone();
      if (absl::StartsWith(key, kU) && key.size() > 2) {
        u[key.substr(2)] = copy;
      } else if (absl::StartsWith(key, kV) && key.size() > 2) {
        v[key.substr(2)] = copy;
      } else if (absl::StartsWith(key, kClient)) {
        const std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 3));
        int64_t client = 0;
        if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &client) ||
            (parts[2] != "u" && parts[2] != "v")) {
          return absl::InvalidArgumentError(absl::StrCat("state: unexpected key \"", key, "\""));
        }
        auto& uv = latest[client];
        (parts[2] == "u" ? uv.first : uv.second)[parts[3]] = copy;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "state: unexpected key \"", key,
            "\"; EFL keeps \"U/\", \"V/\", \"client/\" and \"base/\" keys"));
      }
    }
    FL_RETURN_IF_ERROR(base_->RestoreState(base_state));
    u_ = std::move(u);
    v_ = std::move(v);
    latest_ = std::move(latest);
    return absl::OkStatus();
  }

 private:
  // The update's extra `name` by parameter name, checked against the model's.
  absl::StatusOr<TensorsByName> Extra(const fl::ClientUpdate& update, const char* name) const {
    auto it = update.extras.find(name);
    if (it == update.extras.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the update lacks the extra \"", name, "\" (the efl client hook's Fisher terms)"));
    }
    if (it->second.size() != names_.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the extra \"", name, "\" has ",
                                                     it->second.size(), " tensors, the model ",
                                                     names_.size(), " parameters"));
    }
    TensorsByName tensors;
    size_t i = 0;
    for (const auto& e : it->second.entries()) {
      if (e.name != names_[i++]) {
        return absl::InvalidArgumentError(absl::StrCat("the extra \"", name, "\" has \"", e.name,
                                                       "\" where the model has \"",
                                                       names_[i - 1], "\""));
      }
      tensors[e.name] = e.tensor;
    }
    return tensors;
  }

  // Every tensor of `tensors` is one of the model's parameters, of its shape.
  absl::Status CheckFits(const TensorsByName& tensors, const std::string& what) const {
    for (const auto& [name, t] : tensors) {
      auto it = shapes_.find(name);
      if (it == shapes_.end() || t.sizes().vec() != it->second) {
        return absl::FailedPreconditionError(absl::StrCat(
            "EFL's ", what, " has \"", name, "\" of shape ", c10::str(t.sizes()),
            ", which is not a parameter of this model"));
      }
    }
    return absl::OkStatus();
  }

  static void AddTo(TensorsByName& sum, const TensorsByName& x) {
    for (const auto& [name, t] : x) {
      auto it = sum.find(name);
      if (it == sum.end()) {
        sum[name] = t.clone();
      } else {
        it->second.add_(t);
      }
    }
  }

  // `tensors` in the model's parameter order.
  absl::StatusOr<fl::ModelState> Ordered(const TensorsByName& tensors) const {
    std::vector<fl::ModelState::Entry> entries;
    for (const std::string& name : names_) {
      auto it = tensors.find(name);
      if (it == tensors.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("EFL's sums have no \"", name, "\" (restored from another model?)"));
      }
      entries.push_back({name, it->second, false});
    }
    return fl::ModelState(std::move(entries));
  }

  std::unique_ptr<fl::Aggregator> base_;
  const fedkit::aggregators::EflOptions options_;
  const EflSettings settings_;
  std::vector<std::string> names_;     // the model's parameters, in order
  std::map<std::string, std::vector<int64_t>> shapes_;  // and their shapes
  // This round's global parameters (sharing the server's storage): the layout of
  // the partial sums of a process that accumulated nothing.
  std::optional<fl::ModelState> parameters_;
  TensorsByName u_, v_;                // what the next round broadcasts
  TensorsByName round_u_, round_v_;    // this round's participants' sums
  std::map<int64_t, std::pair<TensorsByName, TensorsByName>> latest_;  // client -> (u, v)
};

absl::StatusOr<std::unique_ptr<fl::Aggregator>> CreateEfl(
    const fedkit::aggregators::EflOptions& options, const fl::Aggregator::CreateArgs&) {
  fl::ErrorList errors;
  absl::StatusOr<EflSettings> settings = ResolveEflHook(options.client(), "options.client");
  if (!settings.ok()) errors.AddStatus("", settings.status());
  std::unique_ptr<fl::Aggregator> base = CreateBaseAggregator(options.base(), "efl", errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<Efl>(std::move(base), options, *settings);
}

FL_REGISTER_PLUGIN(fl::Aggregator, "efl", fedkit::aggregators::EflOptions, CreateEfl);
FL_CONFORMANCE_REASON("efl", kNoPartialSums,
                      "with LATEST_PER_CLIENT the broadcast sums hold every client's latest "
                      "(u, v), kept per client across rounds; otherwise it has its base's "
                      "sums when the base has them");

}  // namespace
}  // namespace aggregators
