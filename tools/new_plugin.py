"""Scaffolding for a new plugin: the folder, its BUILD, options proto, plugin and test.

  bazel run //tools:new_plugin -- --kind=aggregator --name=fedfoo

writes aggregators/fedfoo/ (BUILD, fedfoo_options.proto, fedfoo.cc, fedfoo_test.cc),
links //aggregators/fedfoo into the kind's umbrella target and adds "fedfoo" to the
golden list of tools/registry_golden_test.cc, both in order. The generated plugin
compiles, registers itself and passes the shared suites (conformance, composition,
golden list); its own test fails until the expected values in it are filled in by
hand from the paper's equations. `--dry_run` prints what would be written.

Kinds (KINDS below), each with its folder and umbrella:
  aggregator   aggregators/<name>/        //aggregators:all  (fl/aggregator.h)
  hook         aggregators/<name>/        //aggregators:all  (fl/client_hook.h); also
               declares its effects in KnownEffects() of aggregators/composition_test.cc
  partitioner  data/partitioners/<name>/  //data:all         (fl/partitioner.h)
  model        models/<name>/             //models:all       (fl/model.h)
  dataset      data/<name>/               //data:all         (fl/dataset.h)
Each template is the smallest real plugin of its kind (a proximal loss term, an
IID split, a one-hidden-layer MLP, a seeded synthetic classification set), to be
replaced by the method's. Names are lower_snake_case, as registry names are.
"""

import argparse
import os
import re
import sys

# The golden test's list for each kind: (file, the registry's C++ type).
GOLDEN = 'tools/registry_golden_test.cc'


def camel(name):
  return ''.join(part[:1].upper() + part[1:] for part in name.split('_'))


# ---------------------------------------------------------------------------
# aggregator

AGGREGATOR_PROTO = '''syntax = "proto3";

package fedkit.aggregators;

// Options of the "{name}" aggregator (see {name}.cc). Every field's comment says
// what it means, its range and its default: `run_experiment --list` prints them.
message {Camel}Options {{
  // Server learning rate eta: w <- w + eta * (the round's step). Default 1; must be
  // finite and > 0.
  optional double server_lr = 1;
}}
'''

AGGREGATOR_CC = '''// {Camel} (<authors>, "<title>", <venue> <year>, <equation or algorithm>): what
// the server does with the round's updates, in the paper's notation, and where
// the official code differs (both are options then; say which one produced which
// table). As generated, the step is FedAvg's size-weighted mean,
//   w <- w + eta * sum_k (n_k / n) delta_k:
// replace it with the method's.
//
// Shared helpers (aggregators/common/): WeightedMean accumulates sum_k w_k delta_k
// in place (O(P) memory), steps parameters and averages buffers; WeightOf gives
// the size or uniform weight; partial_sums.h turns the accumulation into named sums
// for distributed runs. An accumulation that is a sum over updates returns it from
// PartialSums, so c10d runs all-reduce it instead of gathering every update to one
// process; one that needs every update registers why not
// (FL_CONFORMANCE_REASON in aggregators/common/conformance_reasons.h).
//
//   aggregator {{
//     name: "{name}"
//     options {{ [type.googleapis.com/fedkit.aggregators.{Camel}Options] {{ server_lr: 1.0 }} }}
//   }}

#include <cmath>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "aggregators/common/partial_sums.h"
#include "aggregators/common/weighted_mean.h"
#include "aggregators/{name}/{name}_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "glog/logging.h"

namespace aggregators {{
namespace {{

using ::fedkit::aggregators::{Camel}Options;

class {Camel} : public fl::Aggregator {{
 public:
  explicit {Camel}(double server_lr) : server_lr_(server_lr) {{}}

  // Declare what holds, and what the method needs of the spec: the conformance
  // suite checks each claim (fl/aggregator.h), and validation refuses specs that
  // contradict step_aware or needs_local_sgd.
  fl::AggregatorProperties properties() const override {{
    fl::AggregatorProperties properties;
    properties.order_invariant = true;
    properties.single_client_identity = true;  // eta = 1 by default: w + delta
    // PartialSums exports the whole accumulation: c10d all-reduces it and secure
    // aggregation can run it. Drop this if the method's step needs every update.
    properties.sums_only = true;
    return properties;
  }}

  absl::StatusOr<fl::RoundPlan> Configure(const fl::ModelState& global,
                                          fl::ServerContext& context) override {{
    global_ = global;
    mean_.Reset();
    return fl::RoundPlan();
  }}

  absl::Status Accumulate(fl::ClientUpdate update, fl::ServerContext& context) override {{
    return mean_.Add(update.delta, WeightOf(update, ClientWeighting::kNumExamples));
  }}

  absl::StatusOr<fl::ModelState> Finalize(const fl::ModelState& global,
                                          fl::ServerContext& context) override {{
    global_.reset();
    FL_ASSIGN_OR_RETURN(fl::ModelState next, mean_.StepFrom(global, server_lr_));
    mean_.Reset();
    return next;
  }}

  std::optional<NamedSums> PartialSums() const override {{
    CHECK(global_.has_value()) << "PartialSums before Configure";
    NamedSums sums;
    mean_.AddPartialSums("", *global_, sums);
    return sums;
  }}

  absl::Status MergePartialSums(NamedSums sums) override {{
    FL_RETURN_IF_ERROR(CheckMergeable(*this, global_.has_value(), sums));
    mean_.MergePartialSums("", *global_, sums);
    return absl::OkStatus();
  }}

 private:
  const double server_lr_;
  WeightedMean mean_;
  // This round's global model: the layout of an empty share's partial sums.
  std::optional<fl::ModelState> global_;
}};

// Every option a user can get wrong is checked here, all at once, each message
// naming its field and the range expected.
absl::StatusOr<std::unique_ptr<fl::Aggregator>> Create{Camel}(const {Camel}Options& options,
                                                            const fl::Aggregator::CreateArgs&) {{
  const double server_lr = options.has_server_lr() ? options.server_lr() : 1.0;
  if (!(server_lr > 0) || !std::isfinite(server_lr)) {{
    return absl::InvalidArgumentError(
        absl::StrCat("options.server_lr: must be finite and > 0, got ", server_lr));
  }}
  return std::make_unique<{Camel}>(server_lr);
}}

FL_REGISTER_PLUGIN(fl::Aggregator, "{name}", {Camel}Options, Create{Camel});

}}  // namespace
}}  // namespace aggregators
'''

AGGREGATOR_TEST = '''// {Camel} against values computed by hand from the paper's equations. The shared
// suites (aggregators:conformance_test, composition_test) already check what every
// aggregator must do; this file checks what only {Camel} does.
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "aggregators/{name}/{name}_options.pb.h"
#include "fl/aggregator.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {{
namespace {{

using ::fedkit::aggregators::{Camel}Options;

// Filled in by hand: a test with this value fails until then.
constexpr double kFillIn = std::numeric_limits<double>::quiet_NaN();

std::unique_ptr<fl::Aggregator> Create({Camel}Options options) {{
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::Aggregator>::Global().Create("{name}", any);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}}

fl::ClientUpdate Update(int64_t id, std::vector<float> delta, int64_t n, int64_t steps) {{
  fl::ClientUpdate update;
  update.client_id = id;
  update.delta = fl::ModelState({{{{"w", at::tensor(delta), false}}}});
  update.num_examples = n;
  update.local_steps = steps;
  update.planned_steps = steps;
  return update;
}}

// Global w = (1, 2); client 0 (n = 1, 2 local steps) delta (4, 0); client 1 (n = 3,
// 4 local steps) delta (0, -4). Work the method's equations by hand on these
// (write the steps here, as aggregators/fedavg/fedavg_test.cc does) and fill in
// the expected w.
TEST({Camel}Test, OneRoundAgainstHandComputation) {{
  auto aggregator = Create({Camel}Options());
  ASSERT_NE(aggregator, nullptr);
  fl::ServerContext context;
  context.round = 1;
  const fl::ModelState global({{{{"w", at::tensor({{1.0f, 2.0f}}), false}}}});
  ASSERT_TRUE(aggregator->Configure(global, context).ok());
  ASSERT_TRUE(aggregator->Accumulate(Update(0, {{4, 0}}, 1, 2), context).ok());
  ASSERT_TRUE(aggregator->Accumulate(Update(1, {{0, -4}}, 3, 4), context).ok());
  auto next = aggregator->Finalize(global, context);
  ASSERT_TRUE(next.ok()) << next.status();
  const double expected[] = {{kFillIn, kFillIn}};
  for (int i = 0; i < 2; ++i) {{
    EXPECT_NEAR(next->tensor(0)[i].item<double>(), expected[i], 1e-6)
        << "w[" << i << "]: fill in the value worked by hand";
  }}
}}

TEST({Camel}Test, RejectsBadOptionsNamingTheField) {{
  {Camel}Options options;
  options.set_server_lr(std::numeric_limits<double>::infinity());
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::Aggregator>::Global().Create("{name}", any);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(std::string(created.status().message()),
              ::testing::HasSubstr("options.server_lr: must be finite and > 0, got inf"));
}}

}}  // namespace
}}  // namespace aggregators
'''

# Every kind's BUILD starts so: the macros, and the options proto beside the plugin.
BUILD_HEAD = '''load("//fl:build_defs.bzl", "fl_cc_proto", "fl_plugin_library")

package(default_visibility = ["//visibility:public"])

fl_cc_proto(
    name = "{name}_options",
    srcs = ["{name}_options.proto"],
)

'''

AGGREGATOR_BUILD = BUILD_HEAD + '''fl_plugin_library(
    name = "{name}",
    srcs = ["{name}.cc"],
    deps = [
        ":{name}_options",
        "//aggregators/common:partial_sums",
        "//aggregators/common:weighted_mean",
        "//fl:interfaces",
        "//fl:registry",
        "//fl:status",
        "@libtorch",
        "@system_libs//:absl",
        "@system_libs//:glog",
    ],
)

cc_test(
    name = "{name}_test",
    srcs = ["{name}_test.cc"],
    linkstatic = True,
    deps = [
        ":{name}",
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "@libtorch",
        "@system_libs//:gtest_main",
    ],
)
'''

# ---------------------------------------------------------------------------
# hook (client hook)

HOOK_PROTO = '''syntax = "proto3";

package fedkit.aggregators;

// Options of the "{name}" client hook (see {name}.cc). Every field's comment says
// what it means, its range and its default: `run_experiment --list` prints them.
message {Camel}Options {{
  // Weight mu of the loss term (mu / 2) ||w - w_global||^2 added at every local
  // step. Default 0.1; must be finite and > 0.
  optional double mu = 1;
}}
'''

HOOK_CC = '''// {Camel} (<authors>, "<title>", <venue> <year>, <equation or algorithm>): what
// each client does besides plain local training, in the paper's notation. As
// generated, the hook adds FedProx's proximal term, which pulls local training
// towards the round's global model w_t,
//   h_k(w) = F_k(w) + (mu / 2) ||w - w_t||^2:
// replace it with the method's.
//
// A hook may also act before training (hold examples out of
// context.train_indices; keep per-client tensors in context.state, kept only when
// the server accepts the update) and after it (add extras to the update). Declare
// whatever it does in KnownEffects() of aggregators/composition_test.cc (the
// scaffold declared this loss term there): HookEffectsTest looks for every
// declared effect in real runs, so a hook that silently does nothing fails.
//
// A spec adds it to every client; an aggregator that needs it names it in
// AggregatorProperties::client_hooks and plans it in its RoundPlan instead.
//
//   client {{ hooks {{ name: "{name}"
//                    options {{ [type.googleapis.com/fedkit.aggregators.{Camel}Options] {{ mu: 0.1 }} }} }} }}

#include <cmath>
#include <memory>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "aggregators/{name}/{name}_options.pb.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/registry.h"

namespace aggregators {{
namespace {{

using ::fedkit::aggregators::{Camel}Options;

constexpr double kDefaultMu = 0.1;

// One object per client and round (fl/client_hook.h), so members are this
// round's only; what must outlive the round belongs in context.state.
class {Camel}Hook : public fl::ClientHook {{
 public:
  explicit {Camel}Hook(double mu) : mu_(mu) {{}}

  // Before training the replica still holds w_t: keep its parameters (what
  // autograd differentiates) and a detached copy of w_t to pull towards.
  absl::Status BeforeTraining(fl::HookContext& context) override {{
    parameters_ = context.model->parameters();
    anchors_.clear();
    for (const auto& entry : context.global->entries()) {{
      if (!entry.is_buffer) anchors_.push_back(entry.tensor.detach());
    }}
    if (anchors_.size() != parameters_.size()) {{
      return absl::InvalidArgumentError(absl::StrCat("the global model has ", anchors_.size(),
                                                     " parameters, the local one ",
                                                     parameters_.size()));
    }}
    return absl::OkStatus();
  }}

  at::Tensor LossTerm(fl::HookContext& context) override {{
    if (parameters_.empty()) return at::Tensor();  // adds nothing
    at::Tensor sum = at::zeros({{}}, parameters_.front().options());
    for (size_t i = 0; i < parameters_.size(); ++i) {{
      sum = sum + (parameters_[i] - anchors_[i]).pow(2).sum();
    }}
    return sum * (mu_ / 2);
  }}

 private:
  const double mu_;
  std::vector<at::Tensor> parameters_;
  std::vector<at::Tensor> anchors_;
}};

// Every option a user can get wrong is checked here, the message naming its field
// and the range expected.
absl::StatusOr<std::unique_ptr<fl::ClientHook>> Create{Camel}Hook(
    const {Camel}Options& options, const fl::ClientHook::CreateArgs&) {{
  const double mu = options.has_mu() ? options.mu() : kDefaultMu;
  if (!(mu > 0) || !std::isfinite(mu)) {{
    return absl::InvalidArgumentError(
        absl::StrCat("options.mu: must be finite and > 0, got ", mu));
  }}
  return std::make_unique<{Camel}Hook>(mu);
}}

FL_REGISTER_PLUGIN(fl::ClientHook, "{name}", {Camel}Options, Create{Camel}Hook);

}}  // namespace
}}  // namespace aggregators
'''

HOOK_TEST = '''// The {name} client hook against values computed by hand from the paper's
// equations. The shared suites (aggregators:hook_conformance_test, the HookEffects
// tests of composition_test) already check what every hook must do; this file
// checks what only {Camel} does.
#include <limits>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "aggregators/{name}/{name}_options.pb.h"
#include "fl/client_hook.h"
#include "fl/model.h"
#include "fl/model_state.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace aggregators {{
namespace {{

using ::fedkit::aggregators::{Camel}Options;

// Filled in by hand: a test with this value fails until then.
constexpr double kFillIn = std::numeric_limits<double>::quiet_NaN();

std::unique_ptr<fl::ClientHook> Create({Camel}Options options) {{
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::ClientHook>::Global().Create("{name}", any);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : nullptr;
}}

// The smallest model a hook can see: one parameter w.
class OneParameter : public fl::Model {{
 public:
  explicit OneParameter(at::Tensor w) : w_(register_parameter("w", std::move(w))) {{}}
  at::Tensor Forward(const at::Tensor& x) override {{ return x * w_; }}

 private:
  at::Tensor w_;
}};

// mu = 0.5, local w = (1, 2), global w_t = (0, 4). Work the method's loss term by
// hand on these (write the steps here) and fill in the expected value.
TEST({Camel}Test, LossTermAgainstHandComputation) {{
  {Camel}Options options;
  options.set_mu(0.5);
  auto hook = Create(options);
  ASSERT_NE(hook, nullptr);
  OneParameter model(at::tensor({{1.0f, 2.0f}}));
  const fl::ModelState global({{{{"w", at::tensor({{0.0f, 4.0f}}), false}}}});
  fl::HookContext context;
  context.model = &model;
  context.global = &global;
  ASSERT_TRUE(hook->BeforeTraining(context).ok());
  const at::Tensor loss = hook->LossTerm(context);
  ASSERT_TRUE(loss.defined());
  const double expected = kFillIn;
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6) << "fill in the value worked by hand";
}}

TEST({Camel}Test, RejectsBadOptionsNamingTheField) {{
  {Camel}Options options;
  options.set_mu(-1);
  google::protobuf::Any any;
  any.PackFrom(options);
  auto created = fl::Registry<fl::ClientHook>::Global().Create("{name}", any);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(std::string(created.status().message()),
              ::testing::HasSubstr("options.mu: must be finite and > 0, got -1"));
}}

}}  // namespace
}}  // namespace aggregators
'''

HOOK_BUILD = BUILD_HEAD + '''# The "{name}" client hook.
fl_plugin_library(
    name = "{name}",
    srcs = ["{name}.cc"],
    deps = [
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "@libtorch",
        "@system_libs//:absl",
    ],
)

cc_test(
    name = "{name}_test",
    srcs = ["{name}_test.cc"],
    linkstatic = True,
    deps = [
        ":{name}",
        ":{name}_options",
        "//fl:interfaces",
        "//fl:model_state",
        "//fl:registry",
        "@libtorch",
        "@system_libs//:gtest_main",
    ],
)
'''

# What composition_test's HookEffectsTest looks for: the template's loss term.
HOOK_EFFECTS = '''    // The loss term (mu / 2) ||w - w_t||^2 of aggregators/{name}/{name}.cc: declare
    // here whatever else the hook comes to do (extras, held-out examples, state).
    (*effects)["{name}"].pulls_to_global = true;'''


# ---------------------------------------------------------------------------
# partitioner

PARTITIONER_PROTO = '''syntax = "proto3";

package fedkit.data;

// Options of the "{name}" partitioner (see {name}.cc). Every field's comment says
// what it means, its range and its default: `run_experiment --list` prints them.
message {Camel}Options {{
  // Fewest training examples a client may get: a split that would give any client
  // fewer is refused. Default 1; must be >= 1.
  optional int64 min_examples = 1;
}}
'''

PARTITIONER_CC = '''// {Camel} partition (<authors>, "<title>", <venue> <year>, <section>): how the
// paper splits the training set over clients, from labels (and owner ids) only.
// As generated, it is the IID split: shuffle, then deal contiguous shares of
// floor(n (k + 1) / K) - floor(n k / K) examples: replace it with the method's.
//
//   partition {{
//     name: "{name}"
//     num_clients: 100
//     options {{ [type.googleapis.com/fedkit.data.{Camel}Options] {{ min_examples: 1 }} }}
//   }}

#include <algorithm>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "data/partitioners/{name}/{name}_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"

namespace data {{
namespace {{

using ::fedkit::data::{Camel}Options;

class {Camel}Partitioner : public fl::Partitioner {{
 public:
  explicit {Camel}Partitioner(int64_t min_examples) : min_examples_(min_examples) {{}}

  // Draws only from `rng` (seeded from the spec), so a seed gives one split.
  absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(
      const fl::PartitionInput& input, int num_clients, std::mt19937_64& rng) const override {{
    const auto n = static_cast<int64_t>(input.labels.size());
    // The smallest share is floor(n / K): refuse a split below the floor asked for.
    if (num_clients < 1 || n / num_clients < min_examples_) {{
      return absl::InvalidArgumentError(
          absl::StrCat(num_clients, " clients of ", n, " training examples: fewer than ",
                       "options.min_examples = ", min_examples_, " each"));
    }}
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<int64_t>> shares(num_clients);
    for (int k = 0; k < num_clients; ++k) {{
      shares[k].assign(order.begin() + n * k / num_clients,
                       order.begin() + n * (k + 1) / num_clients);
      std::sort(shares[k].begin(), shares[k].end());  // reads the data in order
    }}
    return shares;
  }}

 private:
  const int64_t min_examples_;
}};

// Every option a user can get wrong is checked here, the message naming its field
// and the range expected.
absl::StatusOr<std::unique_ptr<fl::Partitioner>> Create{Camel}(
    const {Camel}Options& options, const fl::Partitioner::CreateArgs&) {{
  const int64_t min_examples = options.has_min_examples() ? options.min_examples() : 1;
  if (min_examples < 1) {{
    return absl::InvalidArgumentError(
        absl::StrCat("options.min_examples: must be >= 1, got ", min_examples));
  }}
  return std::make_unique<{Camel}Partitioner>(min_examples);
}}

FL_REGISTER_PLUGIN(fl::Partitioner, "{name}", {Camel}Options, Create{Camel});

}}  // namespace
}}  // namespace data
'''

PARTITIONER_TEST = '''// The {name} partitioner against splits worked out by hand from the paper.
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "data/partitioners/{name}/{name}_options.pb.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {{
namespace {{

using ::fedkit::data::{Camel}Options;

// Filled in by hand: a test with this value fails until then.
constexpr double kFillIn = std::numeric_limits<double>::quiet_NaN();

absl::StatusOr<std::unique_ptr<fl::Partitioner>> Create({Camel}Options options) {{
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("{name}", any);
}}

// Ten examples, labels 0, 1, 2, 0, 1, 2, ...; three clients. Work out from the
// paper how many examples (and of which labels) each client gets, and fill in.
TEST({Camel}Test, SharesAgainstHandComputation) {{
  std::vector<int64_t> labels(10);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = i % 3;
  auto partitioner = Create({Camel}Options());
  ASSERT_TRUE(partitioner.ok()) << partitioner.status();
  std::mt19937_64 rng(1);
  auto shares = (*partitioner)->Partition({{labels, 3}}, 3, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  ASSERT_EQ(shares->size(), 3u);
  const double expected_sizes[] = {{kFillIn, kFillIn, kFillIn}};
  std::set<int64_t> seen;
  for (int k = 0; k < 3; ++k) {{
    EXPECT_EQ(static_cast<double>((*shares)[k].size()), expected_sizes[k])
        << "client " << k << ": fill in the size worked by hand";
    for (int64_t i : (*shares)[k]) EXPECT_TRUE(seen.insert(i).second) << i << " dealt twice";
  }}
}}

TEST({Camel}Test, SameSeedSameSplit) {{
  std::vector<int64_t> labels(50, 0);
  auto partitioner = Create({Camel}Options());
  ASSERT_TRUE(partitioner.ok()) << partitioner.status();
  std::mt19937_64 a(9), b(9);
  EXPECT_EQ(*(*partitioner)->Partition({{labels, 1}}, 7, a),
            *(*partitioner)->Partition({{labels, 1}}, 7, b));
}}

TEST({Camel}Test, RejectsBadOptionsNamingTheField) {{
  {Camel}Options options;
  options.set_min_examples(0);
  auto partitioner = Create(options);
  ASSERT_FALSE(partitioner.ok());
  EXPECT_THAT(std::string(partitioner.status().message()),
              ::testing::HasSubstr("options.min_examples: must be >= 1, got 0"));
}}

}}  // namespace
}}  // namespace data
'''

PARTITIONER_BUILD = BUILD_HEAD + '''fl_plugin_library(
    name = "{name}",
    srcs = ["{name}.cc"],
    deps = [
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "@system_libs//:absl",
    ],
)

cc_test(
    name = "{name}_test",
    srcs = ["{name}_test.cc"],
    linkstatic = True,
    deps = [
        ":{name}",
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "@system_libs//:gtest_main",
    ],
)
'''


# ---------------------------------------------------------------------------
# model

MODEL_PROTO = '''syntax = "proto3";

package fedkit.models;

// Options of the "{name}" model (see {name}.cc). Every field's comment says what
// it means, its range and its default: `run_experiment --list` prints them.
message {Camel}Options {{
  // Units of the hidden layer. Default 32; must be >= 1.
  optional int32 hidden = 1;
}}
'''

MODEL_CC = '''// {Camel} (<authors>, "<title>", <venue> <year>, <table or appendix>): the
// network the paper trains, layer by layer, and where the official code differs.
// As generated it is a one-hidden-layer perceptron on the flattened example,
//   logits = W2 relu(W1 x + b1) + b2:
// replace it with the paper's. Methods that work in a layer's input space
// (MA-Echo) also need LayerInputs (fl/model.h; models/mlp has one).
//
//   model {{
//     name: "{name}"
//     options {{ [type.googleapis.com/fedkit.models.{Camel}Options] {{ hidden: 32 }} }}
//   }}

#include <functional>
#include <memory>
#include <numeric>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/common/model_args.h"
#include "models/{name}/{name}_options.pb.h"

namespace models {{
namespace {{

using ::fedkit::models::{Camel}Options;

class {Camel} : public fl::Model {{
 public:
  // Registered modules get their ModelState names from these ("hidden.weight"):
  // renaming one changes checkpoints and every per-layer option that names it.
  {Camel}(int64_t inputs, int64_t hidden, int64_t classes)
      : hidden_(register_module("hidden", torch::nn::Linear(inputs, hidden))),
        output_(register_module("output", torch::nn::Linear(hidden, classes))) {{}}

  // Logits: the softmax lives in the cross-entropy loss.
  at::Tensor Forward(const at::Tensor& x) override {{
    return output_->forward(at::relu(hidden_->forward(x.flatten(1))));
  }}

 private:
  torch::nn::Linear hidden_;
  torch::nn::Linear output_;
}};

// Every problem with the options or the dataset's shape, all at once, each
// message naming its field and the range expected. Cheap and side-effect free:
// the framework builds many instances.
absl::StatusOr<std::unique_ptr<fl::Model>> Create{Camel}(const {Camel}Options& options,
                                                       const fl::Model::CreateArgs& args) {{
  fl::ErrorList errors;
  const int64_t hidden = options.has_hidden() ? options.hidden() : 32;
  if (hidden < 1) errors.Add("options.hidden", absl::StrCat("must be >= 1, got ", hidden));
  bool positive = !args.input_shape.empty();
  for (int64_t d : args.input_shape) positive = positive && d >= 1;
  if (!positive) {{
    errors.Add("input_shape",
               absl::StrCat("must be one or more positive sizes (e.g. {{1, 28, 28}}), got ",
                            ShapeString(args.input_shape)));
  }}
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  const int64_t inputs = std::accumulate(args.input_shape.begin(), args.input_shape.end(),
                                         int64_t{{1}}, std::multiplies<int64_t>());
  return MakeModel<{Camel}>(inputs, hidden, args.num_classes);
}}

FL_REGISTER_PLUGIN(fl::Model, "{name}", {Camel}Options, Create{Camel});

}}  // namespace
}}  // namespace models
'''

MODEL_TEST = '''// The {name} model against the paper's architecture, counted by hand.
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/common/model_test_util.h"
#include "models/{name}/{name}_options.pb.h"

namespace models {{
namespace {{

using ::fedkit::models::{Camel}Options;

// Filled in by hand: a test with this value fails until then.
constexpr double kFillIn = std::numeric_limits<double>::quiet_NaN();

{Camel}Options Options(int hidden) {{
  {Camel}Options options;
  options.set_hidden(hidden);
  return options;
}}

// 28x28 images, 10 classes, hidden 5: count the paper's parameters layer by layer
// (write the sum here, as models/logreg/logreg_test.cc does) and fill it in.
TEST({Camel}Test, ParameterCountAgainstHandComputation) {{
  auto model = CreateModel("{name}", Options(5), {{1, 28, 28}}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  const double expected = kFillIn;
  EXPECT_EQ(static_cast<double>(fl::ModelState::FromModule(**model).NumParameters()), expected)
      << "fill in the count worked by hand";
}}

TEST({Camel}Test, TrainStep) {{
  torch::manual_seed(0);
  auto model = CreateModel("{name}", Options(8), {{1, 28, 28}}, 10);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpectTrainStep(**model, at::randn({{4, 1, 28, 28}}), 10);
}}

TEST({Camel}Test, RejectsBadOptionsNamingTheField) {{
  auto model = CreateModel("{name}", Options(0), {{1, 28, 28}}, 10);
  ASSERT_FALSE(model.ok());
  EXPECT_THAT(std::string(model.status().message()),
              ::testing::HasSubstr("options.hidden: must be >= 1, got 0"));
}}

}}  // namespace
}}  // namespace models
'''

MODEL_BUILD = BUILD_HEAD + '''fl_plugin_library(
    name = "{name}",
    srcs = ["{name}.cc"],
    deps = [
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "//fl:status",
        "//models/common:model_args",
        "@libtorch",
        "@system_libs//:absl",
    ],
)

cc_test(
    name = "{name}_test",
    srcs = ["{name}_test.cc"],
    linkstatic = True,
    deps = [
        ":{name}",
        ":{name}_options",
        "//fl:model_state",
        "//models/common:model_test_util",
        "@libtorch",
        "@system_libs//:gtest_main",
    ],
)
'''


# ---------------------------------------------------------------------------
# dataset

DATASET_PROTO = '''syntax = "proto3";

package fedkit.data;

// Options of the "{name}" dataset (see {name}.cc). Every field's comment says what
// it means, its range and its default: `run_experiment --list` prints them.
message {Camel}Options {{
  // Training examples. Default 1000; must be >= 1.
  optional int64 train_size = 1;
  // Test examples. Default 200; must be >= 1.
  optional int64 test_size = 2;
  // Features of each example (its input shape is {{num_features}}). Default 20;
  // must be >= 1.
  optional int32 num_features = 3;
  // Classes: example i of each split has label i mod num_classes. Default 10;
  // must be >= 2.
  optional int32 num_classes = 4;
  // Seed of the generator: the same seed gives the same data. Default 0.
  uint64 seed = 5;
}}
'''

DATASET_CC = '''// {Camel} (<authors>, "<title>", <venue> <year>, <section>): where the data
// comes from, how it is split into train and test and normalised, and where the
// official code differs. As generated it needs no files: a seeded synthetic
// classification set, example i of each split with label y = i mod C and input
//   x ~ N(m_y, I),  class means m_c with entries ~ N(0, 1) (drawn first):
// replace it with the paper's. A dataset read from files checks them in
// CheckAvailable (cheap, names what is missing) and reads them in Load (see
// data/mnist and data/dataset_files.h).
//
//   dataset {{
//     name: "{name}"
//     options {{ [type.googleapis.com/fedkit.data.{Camel}Options] {{ train_size: 1000 seed: 1 }} }}
//   }}

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "data/{name}/{name}_options.pb.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/registry.h"
#include "fl/status_macros.h"

namespace data {{
namespace {{

using ::fedkit::data::{Camel}Options;

struct Config {{
  int64_t train_size;
  int64_t test_size;
  int64_t num_features;
  int64_t num_classes;
  uint64_t seed;
}};

class {Camel} : public fl::Dataset {{
 public:
  explicit {Camel}(const Config& config) : config_(config) {{}}

  // What the model is built for, before anything is loaded.
  fl::DatasetInfo info() const override {{ return {{{{config_.num_features}}, config_.num_classes}}; }}

  absl::Status CheckAvailable() const override {{ return absl::OkStatus(); }}  // no files

  // std::mt19937_64 rather than LibTorch's generator, so that a seed gives the
  // same numbers on every device and LibTorch version.
  absl::StatusOr<fl::DatasetSplits> Load() const override {{
    std::mt19937_64 rng(config_.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> means(config_.num_classes * config_.num_features);
    for (float& m : means) m = normal(rng);
    auto draw = [&](int64_t size) {{
      std::vector<float> x(size * config_.num_features);
      std::vector<int64_t> y(size);
      for (int64_t i = 0; i < size; ++i) {{
        y[i] = i % config_.num_classes;
        for (int64_t j = 0; j < config_.num_features; ++j) {{
          x[i * config_.num_features + j] = means[y[i] * config_.num_features + j] + normal(rng);
        }}
      }}
      return fl::Examples{{at::tensor(x, at::kFloat).reshape({{size, config_.num_features}}),
                          at::tensor(y, at::kLong)}};
    }};
    fl::DatasetSplits splits;
    splits.train = draw(config_.train_size);
    splits.test = draw(config_.test_size);
    return splits;  // no natural split: train_owners stays undefined
  }}

 private:
  const Config config_;
}};

// Every problem with the options, all at once, each message naming its field and
// the range expected.
absl::StatusOr<std::unique_ptr<fl::Dataset>> Create{Camel}(const {Camel}Options& options,
                                                         const fl::Dataset::CreateArgs&) {{
  Config config;
  config.train_size = options.has_train_size() ? options.train_size() : 1000;
  config.test_size = options.has_test_size() ? options.test_size() : 200;
  config.num_features = options.has_num_features() ? options.num_features() : 20;
  config.num_classes = options.has_num_classes() ? options.num_classes() : 10;
  config.seed = options.seed();
  fl::ErrorList errors;
  if (config.train_size < 1) {{
    errors.Add("options.train_size", absl::StrCat("must be >= 1, got ", config.train_size));
  }}
  if (config.test_size < 1) {{
    errors.Add("options.test_size", absl::StrCat("must be >= 1, got ", config.test_size));
  }}
  if (config.num_features < 1) {{
    errors.Add("options.num_features", absl::StrCat("must be >= 1, got ", config.num_features));
  }}
  if (config.num_classes < 2) {{
    errors.Add("options.num_classes", absl::StrCat("must be >= 2, got ", config.num_classes));
  }}
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return std::make_unique<{Camel}>(config);
}}

FL_REGISTER_PLUGIN(fl::Dataset, "{name}", {Camel}Options, Create{Camel});

}}  // namespace
}}  // namespace data
'''

DATASET_TEST = '''// The {name} dataset against values worked out by hand from the paper.
#include <limits>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "data/{name}/{name}_options.pb.h"
#include "fl/dataset.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {{
namespace {{

using ::fedkit::data::{Camel}Options;

// Filled in by hand: a test with this value fails until then.
constexpr double kFillIn = std::numeric_limits<double>::quiet_NaN();

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(const {Camel}Options& options) {{
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("{name}", any);
}}

fl::DatasetSplits Load(const {Camel}Options& options) {{
  auto dataset = Create(options);
  EXPECT_TRUE(dataset.ok()) << dataset.status();
  EXPECT_TRUE((*dataset)->CheckAvailable().ok());
  auto splits = (*dataset)->Load();
  EXPECT_TRUE(splits.ok()) << splits.status();
  return *std::move(splits);
}}

// Ten training examples of three classes: work out from the paper how many of
// each class the training split holds, and fill in.
TEST({Camel}Test, ClassCountsAgainstHandComputation) {{
  {Camel}Options options;
  options.set_train_size(10);
  options.set_num_classes(3);
  const fl::DatasetSplits splits = Load(options);
  const at::Tensor counts = at::bincount(splits.train.y, {{}}, 3);
  const double expected[] = {{kFillIn, kFillIn, kFillIn}};
  for (int c = 0; c < 3; ++c) {{
    EXPECT_EQ(counts[c].item<double>(), expected[c]) << "class " << c
                                                     << ": fill in the count worked by hand";
  }}
}}

TEST({Camel}Test, ShapesTypesAndSeed) {{
  {Camel}Options options;
  options.set_num_features(6);
  options.set_seed(3);
  const fl::DatasetSplits splits = Load(options);
  EXPECT_EQ(splits.train.x.sizes().vec(), (std::vector<int64_t>{{1000, 6}}));
  EXPECT_EQ(splits.test.x.sizes().vec(), (std::vector<int64_t>{{200, 6}}));
  EXPECT_EQ(splits.train.x.scalar_type(), at::kFloat);
  EXPECT_EQ(splits.train.y.scalar_type(), at::kLong);
  EXPECT_GE(splits.train.y.min().item<int64_t>(), 0);
  EXPECT_LT(splits.train.y.max().item<int64_t>(), 10);
  EXPECT_TRUE(at::equal(Load(options).train.x, splits.train.x)) << "same seed, same data";
}}

TEST({Camel}Test, RejectsBadOptionsNamingTheField) {{
  {Camel}Options options;
  options.set_num_classes(1);
  auto dataset = Create(options);
  ASSERT_FALSE(dataset.ok());
  EXPECT_THAT(std::string(dataset.status().message()),
              ::testing::HasSubstr("options.num_classes: must be >= 2, got 1"));
}}

}}  // namespace
}}  // namespace data
'''

DATASET_BUILD = BUILD_HEAD + '''fl_plugin_library(
    name = "{name}",
    srcs = ["{name}.cc"],
    deps = [
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "//fl:status",
        "@libtorch",
        "@system_libs//:absl",
    ],
)

cc_test(
    name = "{name}_test",
    srcs = ["{name}_test.cc"],
    linkstatic = True,
    deps = [
        ":{name}",
        ":{name}_options",
        "//fl:interfaces",
        "//fl:registry",
        "@libtorch",
        "@system_libs//:gtest_main",
    ],
)
'''


KINDS = {
    'aggregator': {
        'folder': 'aggregators/{name}',
        'files': {
            'BUILD': AGGREGATOR_BUILD,
            '{name}_options.proto': AGGREGATOR_PROTO,
            '{name}.cc': AGGREGATOR_CC,
            '{name}_test.cc': AGGREGATOR_TEST,
        },
        'umbrella': 'aggregators/BUILD',
        'label': '//aggregators/{name}',
        'golden': 'fl::Aggregator',
        'suites': ['//aggregators:conformance_test', '//aggregators:composition_test'],
    },
    # Client hooks live with the aggregators (the client half of a method).
    'hook': {
        'folder': 'aggregators/{name}',
        'files': {
            'BUILD': HOOK_BUILD,
            '{name}_options.proto': HOOK_PROTO,
            '{name}.cc': HOOK_CC,
            '{name}_test.cc': HOOK_TEST,
        },
        'umbrella': 'aggregators/BUILD',
        'label': '//aggregators/{name}',
        'golden': 'fl::ClientHook',
        # composition_test's HookEffectsTest fails for a hook that declares nothing.
        'effects': HOOK_EFFECTS,
        'suites': ['//aggregators:hook_conformance_test', '//aggregators:composition_test'],
    },
    'partitioner': {
        'folder': 'data/partitioners/{name}',
        'files': {
            'BUILD': PARTITIONER_BUILD,
            '{name}_options.proto': PARTITIONER_PROTO,
            '{name}.cc': PARTITIONER_CC,
            '{name}_test.cc': PARTITIONER_TEST,
        },
        'umbrella': 'data/BUILD',
        'label': '//data/partitioners/{name}',
        'golden': 'fl::Partitioner',
        'suites': ['//tools:run_experiment_test'],
    },
    'model': {
        'folder': 'models/{name}',
        'files': {
            'BUILD': MODEL_BUILD,
            '{name}_options.proto': MODEL_PROTO,
            '{name}.cc': MODEL_CC,
            '{name}_test.cc': MODEL_TEST,
        },
        'umbrella': 'models/BUILD',
        'label': '//models/{name}',
        'golden': 'fl::Model',
        'suites': ['//tools:run_experiment_test'],
    },
    'dataset': {
        'folder': 'data/{name}',
        'files': {
            'BUILD': DATASET_BUILD,
            '{name}_options.proto': DATASET_PROTO,
            '{name}.cc': DATASET_CC,
            '{name}_test.cc': DATASET_TEST,
        },
        'umbrella': 'data/BUILD',
        'label': '//data/{name}',
        'golden': 'fl::Dataset',
        'suites': ['//tools:run_experiment_test'],
    },
}



def insert_sorted(lines, first, last, new_line, key):
  """Inserts new_line among lines[first:last] before the first whose key is larger."""
  for i in range(first, last):
    if key(lines[i]) > key(new_line):
      lines.insert(i, new_line)
      return
  lines.insert(last, new_line)


def add_to_umbrella(root, path, label):
  """Adds `label` to the deps of the `all` target in `path`, in order."""
  full = os.path.join(root, path)
  lines = open(full).read().split('\n')
  start = next(i for i, l in enumerate(lines) if l.strip() == 'name = "all",')
  deps = next(i for i in range(start, len(lines)) if lines[i].strip() == 'deps = [')
  end = next(i for i in range(deps, len(lines)) if lines[i].strip() == '],')
  quoted = f'"{label}",'
  if any(l.strip() == quoted for l in lines[deps + 1:end]):
    raise SystemExit(f'{path}: {label} is already in :all')
  indent = re.match(r'\s*', lines[deps + 1]).group(0) if end > deps + 1 else '        '
  insert_sorted(lines, deps + 1, end, indent + quoted, key=lambda l: l.strip())
  return full, '\n'.join(lines)


def add_to_golden(root, registry_type, name):
  """Adds "name" to the ElementsAre(...) list of `registry_type`'s names, in order."""
  full = os.path.join(root, GOLDEN)
  text = open(full).read()
  anchor = f'fl::Registry<{registry_type}>::Global().Names()'
  at = text.index(anchor)
  open_paren = text.index('ElementsAre(', at) + len('ElementsAre(')
  close_paren = text.index(')', open_paren)
  names = re.findall(r'"([^"]+)"', text[open_paren:close_paren])
  if name in names:
    raise SystemExit(f'{GOLDEN}: "{name}" is already in the {registry_type} list')
  names = sorted(names + [name])
  # One name a line, indented 4 past `ElementsAre(` (clang-format's continuation).
  line_start = text.rindex('\n', 0, open_paren) + 1
  pad = ' ' * (open_paren - len('ElementsAre(') - line_start + 4)
  body = ('\n' + pad).join(f'"{n}",' for n in names)[:-1]
  return full, text[:open_paren] + '\n' + pad + body + text[close_paren:]


# The hooks' declared effects, looked for by composition_test's HookEffectsTest.
COMPOSITION = 'aggregators/composition_test.cc'


def add_to_known_effects(root, name, entry):
  """Adds `entry` (a paragraph of C++) to KnownEffects() in COMPOSITION, in order.

  KnownEffects() is a run of paragraphs (blank-line separated), each about one hook,
  named in its first `(*effects)["..."]`; the new one goes before the first whose
  name sorts after `name`, else last, before `return effects;`.
  """
  full = os.path.join(root, COMPOSITION)
  lines = open(full).read().split('\n')
  start = next(i for i, l in enumerate(lines) if 'KnownEffects() {' in l)
  first = next(i for i in range(start, len(lines)) if 'using State = ' in lines[i]) + 1
  end = next(i for i in range(first, len(lines)) if lines[i].strip() == 'return effects;')
  names = {}
  for i in range(first, end):
    m = re.search(r'\(\*effects\)\["([^"]+)"\]', lines[i])
    if m:
      names.setdefault(m.group(1), i)
  if name in names:
    raise SystemExit(f'{COMPOSITION}: "{name}" already has KnownEffects()')
  at = end
  for other, line in sorted(names.items(), key=lambda item: item[1]):
    if other > name:
      at = line
      while at > first and lines[at - 1].strip():  # the paragraph's leading comment
        at -= 1
      break
  block = entry.split('\n')
  if at == end:  # after the last paragraph: a blank line between
    while lines[at - 1].strip() == '':
      del lines[at - 1]
      at -= 1
    block = [''] + block
  else:
    block = block + ['']
  lines[at:at] = block
  return full, '\n'.join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--kind', required=True, choices=sorted(KINDS))
  parser.add_argument('--name', required=True, help='registry name, lower_snake_case')
  parser.add_argument('--class_name', help='C++ class and options-message stem (default: the '
                      'name in CamelCase, e.g. fed_nova -> FedNova; fednova -> Fednova)')
  parser.add_argument('--root', default=os.environ.get('BUILD_WORKSPACE_DIRECTORY', '.'),
                      help='the repository (default: where bazel run was called)')
  parser.add_argument('--dry_run', action='store_true', help='print, write nothing')
  args = parser.parse_args()

  if not re.fullmatch(r'[a-z][a-z0-9_]*', args.name):
    parser.error(f'--name: must be lower_snake_case ([a-z][a-z0-9_]*), got "{args.name}"')
  kind = KINDS[args.kind]
  class_name = args.class_name or camel(args.name)
  if not re.fullmatch(r'[A-Z][A-Za-z0-9]*', class_name):
    parser.error(f'--class_name: must be CamelCase ([A-Z][A-Za-z0-9]*), got "{class_name}"')
  values = {'name': args.name, 'Camel': class_name}
  folder = kind['folder'].format(**values)
  if os.path.exists(os.path.join(args.root, folder)):
    parser.error(f'--name: {folder} already exists')

  writes = []
  for path, template in kind['files'].items():
    writes.append((os.path.join(args.root, folder, path.format(**values)),
                   template.format(**values)))
  writes.append(add_to_umbrella(args.root, kind['umbrella'], kind['label'].format(**values)))
  writes.append(add_to_golden(args.root, kind['golden'], args.name))
  if 'effects' in kind:
    writes.append(add_to_known_effects(args.root, args.name, kind['effects'].format(**values)))

  for path, text in writes:
    if args.dry_run:
      print(f'--- {path}\n{text}')
      continue
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
      f.write(text)
    print(f'wrote {os.path.relpath(path, args.root)}')
  if not args.dry_run:
    suites = ' '.join(kind['suites'] + ['//tools:registry_golden_test'])
    print(f'\nNext: bazel test //{folder}:{args.name}_test (fails until its expected values are '
          f'filled in), then bazel test {suites}')


if __name__ == '__main__':
  main()
