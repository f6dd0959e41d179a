#include "aggregators/common/base_aggregator.h"

#include "absl/strings/str_cat.h"
#include "fl/registry.h"

namespace aggregators {

std::unique_ptr<fl::Aggregator> CreateBaseAggregator(const fedkit::PluginSpec& base,
                                                     const std::string& wrapper,
                                                     fl::ErrorList& errors) {
  const std::string name = base.name().empty() ? "fedavg" : base.name();
  const auto& registry = fl::Registry<fl::Aggregator>::Global();
  if (name == wrapper) {
    errors.Add("options.base.name", absl::StrCat("\"", wrapper, "\" cannot wrap itself"));
    return nullptr;
  }
  if (registry.Find(name) == nullptr) {
    errors.Add("options.base.name", registry.UnknownNameError(name).message());
    return nullptr;
  }
  absl::StatusOr<std::unique_ptr<fl::Aggregator>> created = registry.Create(name, base.options());
  if (!created.ok()) {
    errors.AddStatus("options.base.", created.status());
    return nullptr;
  }
  return *std::move(created);
}

}  // namespace aggregators
