#include "tools/sweep/sweep_spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "fl/errors.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"
#include "tools/sweep/experiment_check.h"
#include "tools/sweep/metrics.h"

namespace sweep {
namespace {

namespace fs = std::filesystem;
using fedkit::sweep::SweepSpec;

constexpr int kDefaultJobs = 2;

absl::StatusOr<SweepSpec> ParseSweepFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read sweep file ", path));
  std::stringstream text;
  text << in.rdbuf();
  SweepSpec spec;
  FL_RETURN_IF_ERROR(fl::MergeTextFormat(text.str(), path, spec));
  return spec;
}

bool IsValidName(absl::string_view name) {
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return !name.empty();
}

// A fragment's own errors (syntax, unknown fields), with `source` naming it; a
// fragment that sets the seed is one too, since the sweep's seeds must decide it.
void CheckFragment(absl::string_view fragment, const std::string& source, absl::string_view prefix,
                   fl::ErrorList& errors) {
  absl::StatusOr<fedkit::ExperimentSpec> parsed = fl::ParseSpec(fragment, source);
  if (!parsed.ok()) {
    errors.AddStatus(prefix, parsed.status());
  } else if (parsed->seed() != 0) {
    errors.Add(absl::StrCat(prefix, source), "sets seed; the sweep's seeds field chooses them");
  }
}

void CheckMetrics(SweepSpec& spec, fl::ErrorList& errors) {
  if (spec.metrics().empty()) errors.Add("metrics", "at least one is required");
  std::map<std::string, int> names;
  for (int i = 0; i < spec.metrics_size(); ++i) {
    Metric& metric = *spec.mutable_metrics(i);
    const std::string path = absl::StrCat("metrics[", i, "]");
    if (metric.kind() == Metric::KIND_UNSPECIFIED) {
      errors.Add(path + ".kind", "required: FINAL, BEST, LAST_K_MEAN, ROUNDS_TO or SUM");
      continue;
    }
    if (metric.has_k() && metric.kind() != Metric::LAST_K_MEAN) {
      errors.Add(path + ".k", "only LAST_K_MEAN takes k");
    }
    if (metric.has_k() && metric.k() < 1) {
      errors.Add(path + ".k", absl::StrCat("must be >= 1, got ", metric.k()));
    }
    if (metric.kind() == Metric::ROUNDS_TO && !metric.has_target()) {
      errors.Add(path + ".target", "ROUNDS_TO needs the value to reach, e.g. target: 0.85");
    }
    if (metric.has_target() && metric.kind() != Metric::ROUNDS_TO) {
      errors.Add(path + ".target", "only ROUNDS_TO takes a target");
    }
    if (!metric.reached_at().empty() && metric.kind() != Metric::ROUNDS_TO) {
      errors.Add(path + ".reached_at", "only ROUNDS_TO takes reached_at");
    } else if (!metric.reached_at().empty() && !IsProgressColumn(metric.reached_at())) {
      errors.Add(path + ".reached_at",
                 absl::StrCat("\"", metric.reached_at(), "\" is not a metrics.csv column it can "
                              "read; one of ", ProgressColumnList()));
    }
    // ROUNDS_TO counts rounds, unless it reads another column (reached_at).
    const bool counts_rounds = metric.kind() == Metric::ROUNDS_TO && metric.reached_at().empty();
    if (metric.has_scale() &&
        (counts_rounds || metric.scale() == 0 || !std::isfinite(metric.scale()))) {
      errors.Add(path + ".scale",
                 counts_rounds
                     ? std::string("ROUNDS_TO counts rounds and takes no scale (unless it "
                                   "has reached_at)")
                     : absl::StrCat("must be a finite number other than 0, got ", metric.scale()));
    }
    if (metric.has_target() && !std::isfinite(metric.target())) {
      errors.Add(path + ".target", absl::StrCat("must be a finite number, got ", metric.target()));
    }
    if (!metric.one_shot_row().empty() &&
        metric.one_shot_clients() != Metric::ONE_SHOT_CLIENTS_UNSPECIFIED) {
      errors.Add(path + ".one_shot_clients",
                 "a metric reads one aggregate row (one_shot_row) or the client rows, not both");
    }
    if (IsOneShot(metric) && metric.kind() != Metric::FINAL) {
      errors.Add(path + ".kind", absl::StrCat("one_shot_row and one_shot_clients take FINAL (a "
                                              "one-shot run has one value), got ",
                                              Metric::Kind_Name(metric.kind())));
    }
    FillDefaults(metric);
    auto [it, inserted] = names.emplace(MetricName(metric), i);
    if (!inserted) {
      errors.Add(path, absl::StrCat("the same as metrics[", it->second, "] (", it->first, ")"));
    }
  }
}

// Names (valid, unique), labels (default: the name) and the baseline.
void CheckVariants(SweepSpec& spec, fl::ErrorList& errors) {
  if (spec.variants().empty()) errors.Add("variants", "at least one is required");
  std::map<std::string, int> names;
  for (int i = 0; i < spec.variants_size(); ++i) {
    Variant& variant = *spec.mutable_variants(i);
    const std::string field = absl::StrCat("variants[", i, "].name");
    if (!IsValidName(variant.name())) {
      errors.Add(field, absl::StrCat("\"", variant.name(),
                                     "\": required, of letters, digits, '_', '.' and '-' only"));
    } else if (auto [it, inserted] = names.emplace(variant.name(), i); !inserted) {
      errors.Add(field, absl::StrCat("\"", variant.name(), "\" is also variants[", it->second,
                                     "]'s name"));
    }
    if (variant.label().empty()) variant.set_label(variant.name());
  }
  std::vector<std::string> known;
  for (const Variant& variant : spec.variants()) known.push_back(variant.name());
  const auto check_baseline = [&](const std::string& field, const std::string& name) {
    if (!names.count(name)) {
      errors.Add(
          field,
          absl::StrCat("\"", name, "\" is not a variant; variants: ", absl::StrJoin(known, ", ")));
    }
  };
  if (spec.baseline().empty()) {
    errors.Add("baseline", "required: the name of the variant the others are compared to");
  } else {
    check_baseline("baseline", spec.baseline());
  }
  for (int i = 0; i < spec.variants_size(); ++i) {
    const std::string& baseline = spec.variants(i).baseline();
    if (!baseline.empty()) check_baseline(absl::StrCat("variants[", i, "].baseline"), baseline);
  }
}

// Each variant's references: a metric of the sweep, named by its label (empty:
// the first metric's, filled in), at most one per metric, and a finite value. The
// labels are filled in by CheckMetrics, which must run first.
void CheckReferences(SweepSpec& spec, fl::ErrorList& errors) {
  std::map<std::string, std::vector<int>> metrics;  // label -> its metrics
  std::vector<std::string> labels;                  // quoted: labels may hold commas
  for (int m = 0; m < spec.metrics_size(); ++m) {
    const std::string& label = spec.metrics(m).label();
    if (label.empty()) continue;  // a metric without a kind, reported already
    if (metrics[label].empty()) labels.push_back(absl::StrCat("\"", label, "\""));
    metrics[label].push_back(m);
  }
  for (int i = 0; i < spec.variants_size(); ++i) {
    Variant& variant = *spec.mutable_variants(i);
    std::map<std::string, int> seen;  // metric label -> the reference giving it
    for (int r = 0; r < variant.references_size(); ++r) {
      Variant::Reference& reference = *variant.mutable_references(r);
      const std::string path = absl::StrCat("variants[", i, "].references[", r, "]");
      if (!reference.has_value()) {
        errors.Add(path + ".value", "required: the number to show, in the table's units");
      } else if (!std::isfinite(reference.value())) {
        errors.Add(path + ".value",
                   absl::StrCat("must be a finite number, got ", reference.value()));
      }
      if (reference.metric().empty() && !spec.metrics().empty()) {
        reference.set_metric(spec.metrics(0).label());
      }
      // Still empty: no first metric to default to (reported already).
      if (reference.metric().empty()) continue;
      const std::string field = path + ".metric";
      auto it = metrics.find(reference.metric());
      if (it == metrics.end()) {
        errors.Add(field, absl::StrCat("\"", reference.metric(), "\" is not a metric's label; ",
                                       "labels: ", absl::StrJoin(labels, ", ")));
      } else if (it->second.size() > 1) {
        // Two columns under one heading: which one the reference goes with is
        // anyone's guess.
        errors.Add(field, absl::StrCat("\"", reference.metric(), "\" labels metrics[",
                                       it->second[0], "] and metrics[", it->second[1],
                                       "]; give them different labels"));
      } else if (auto [previous, inserted] = seen.emplace(reference.metric(), r); !inserted) {
        errors.Add(field, absl::StrCat("\"", reference.metric(), "\" is also references[",
                                       previous->second, "]'s metric"));
      }
    }
  }
  if (spec.reference_label().empty()) spec.set_reference_label("reference");
}

void CheckSeeds(const SweepSpec& spec, fl::ErrorList& errors) {
  if (spec.seeds().empty()) errors.Add("seeds", "at least one is required");
  std::map<uint64_t, int> seeds;
  for (int i = 0; i < spec.seeds_size(); ++i) {
    if (auto [it, inserted] = seeds.emplace(spec.seeds(i), i); !inserted) {
      errors.Add(absl::StrCat("seeds[", i, "]"),
                 absl::StrCat(spec.seeds(i), " is also seeds[", it->second, "]"));
    }
  }
}

// Each variant's fragment, then (when it and the base parse) its spec as the
// runner will build it, and that it is one-shot when a metric reads one_shot.csv.
// The seed does not change what is valid: the first one.
void CheckVariantSpecs(const Sweep& sweep, bool base_ok, fl::ErrorList& errors) {
  const SweepSpec& spec = sweep.spec;
  for (int i = 0; i < spec.variants_size(); ++i) {
    const Variant& variant = spec.variants(i);
    const std::string prefix = absl::StrCat("variant \"", variant.name(), "\": ");
    const size_t errors_before = errors.errors().size();
    CheckFragment(variant.set(), absl::StrCat("variants[", i, "].set"), prefix, errors);
    if (!base_ok || errors.errors().size() != errors_before) continue;
    const uint64_t seed = spec.seeds().empty() ? 0 : spec.seeds(0);
    absl::StatusOr<fedkit::ExperimentSpec> resolved = RunSpec(sweep, variant, seed);
    if (!resolved.ok()) {
      errors.AddStatus(prefix, resolved.status());
      continue;
    }
    errors.AddStatus(prefix, CheckExperiment(*resolved));
    if (resolved->server().one_shot()) continue;
    for (int m = 0; m < spec.metrics_size(); ++m) {
      if (IsOneShot(spec.metrics(m))) {
        errors.Add(absl::StrCat(prefix, "metrics[", m, "]"),
                   "reads one_shot.csv, which only a one-shot run (server { one_shot: true }) "
                   "writes");
      }
    }
  }
}

// The file's name without its extensions: "fmnist" for fmnist.sweep.textproto.
std::string Stem(const fs::path& file) {
  const std::string name = file.filename().string();
  absl::string_view stem = name;
  for (absl::string_view suffix : {".sweep.textproto", ".textproto", ".txtpb"}) {
    if (absl::ConsumeSuffix(&stem, suffix)) break;
  }
  return std::string(stem);
}

// Where results go: --out, else the file's `out` (relative to its folder), else
// results/<file name without its extensions> beside the file.
std::string OutDir(const SweepSpec& spec, const fs::path& file, const SweepFlags& flags) {
  if (!flags.out.empty()) return fs::path(flags.out).lexically_normal().string();
  if (!spec.out().empty()) return (file.parent_path() / spec.out()).lexically_normal().string();
  return (file.parent_path() / "results" / Stem(file)).lexically_normal().string();
}

}  // namespace

absl::StatusOr<Sweep> LoadSweep(const std::string& path, const SweepFlags& flags) {
  absl::StatusOr<SweepSpec> parsed = ParseSweepFile(path);
  if (!parsed.ok()) return parsed.status();

  Sweep sweep;
  sweep.spec = *std::move(parsed);
  SweepSpec& spec = sweep.spec;
  const fs::path file = fs::absolute(path);
  fl::ErrorList errors;

  bool base_ok = false;
  if (spec.base_spec().empty()) {
    errors.Add("base_spec", "required: the ExperimentSpec every run starts from");
  } else {
    sweep.base_spec_path = (file.parent_path() / spec.base_spec()).lexically_normal().string();
    absl::StatusOr<fedkit::ExperimentSpec> base = fl::LoadSpecFile(sweep.base_spec_path);
    if (base.ok()) {
      sweep.base = *std::move(base);
      base_ok = true;
    } else {
      errors.AddStatus("base_spec: ", base.status());
    }
  }
  const size_t errors_before_set = errors.errors().size();
  CheckFragment(spec.set(), "set", "", errors);
  const bool set_ok = errors.errors().size() == errors_before_set;

  CheckVariants(spec, errors);
  CheckSeeds(spec, errors);
  CheckMetrics(spec, errors);
  CheckReferences(spec, errors);

  sweep.jobs = flags.jobs.value_or(spec.has_jobs() ? spec.jobs() : kDefaultJobs);
  if (sweep.jobs < 1) {
    errors.Add(flags.jobs.has_value() ? "--jobs" : "jobs",
               absl::StrCat("must be >= 1, got ", sweep.jobs));
  }
  if (spec.has_threads_per_job()) {
    if (spec.threads_per_job() < 1) {
      errors.Add("threads_per_job", absl::StrCat("must be >= 1, got ", spec.threads_per_job()));
    }
    sweep.threads_per_job = spec.threads_per_job();
  } else if (sweep.jobs > 1) {
    // Parallel runs that each size their pools to the whole machine oversubscribe it.
    sweep.threads_per_job = 1;
  }

  if (spec.title().empty()) spec.set_title(Stem(file));
  if (spec.curve_column().empty()) spec.set_curve_column("test_accuracy");
  if (spec.curve_x_column().empty()) {
    spec.set_curve_x_column("round");
  } else if (spec.curve_x_column() != "round" && !IsProgressColumn(spec.curve_x_column())) {
    errors.Add("curve_x_column", absl::StrCat("\"", spec.curve_x_column(),
                                              "\" is not round or a metrics.csv column it can "
                                              "draw against: ",
                                              ProgressColumnList()));
  }
  for (int i = 0; i < spec.diagnostics_size(); ++i) {
    if (spec.diagnostics(i).empty()) errors.Add(absl::StrCat("diagnostics[", i, "]"), "empty");
  }
  sweep.out = OutDir(spec, file, flags);

  CheckVariantSpecs(sweep, /*base_ok=*/base_ok && set_ok, errors);
  if (!errors.empty()) return errors.ToStatus();
  return sweep;
}

std::string RunOverride(const Sweep& sweep, const Variant& variant, uint64_t seed) {
  std::vector<std::string> parts = {absl::StrCat("seed: ", seed)};
  for (const std::string& fragment : {sweep.spec.set(), variant.set()}) {
    absl::string_view trimmed = absl::StripAsciiWhitespace(fragment);
    if (!trimmed.empty()) parts.emplace_back(trimmed);
  }
  if (sweep.threads_per_job.has_value()) {
    parts.push_back(
        absl::StrCat("simulation { workers: 1 threads_per_worker: ", *sweep.threads_per_job, " }"));
  }
  return absl::StrJoin(parts, " ");
}

absl::StatusOr<fedkit::ExperimentSpec> RunSpec(const Sweep& sweep, const Variant& variant,
                                               uint64_t seed) {
  fedkit::ExperimentSpec spec = sweep.base;
  absl::Status status = fl::ApplyOverride(RunOverride(sweep, variant, seed), spec);
  if (!status.ok()) return status;
  return spec;
}

}  // namespace sweep
