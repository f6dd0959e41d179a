#ifndef FL_REGISTRY_H_
#define FL_REGISTRY_H_

// One registry type for every kind of plugin: aggregators, client hooks,
// partitioners, models and datasets. A plugin registers itself in its own .cc:
//
//   absl::StatusOr<std::unique_ptr<Aggregator>> CreateFedAvg(
//       const FedAvgOptions& options, const Aggregator::CreateArgs& args);
//   FL_REGISTER_PLUGIN(Aggregator, "fedavg", FedAvgOptions, CreateFedAvg);
//
// and its cc_library is an fl_plugin_library (alwayslink), so linking the target
// is all it takes to make the name available. Registration only stores a few
// pointers and strings in a function-local static: no torch, flag or logging work
// before main.
//
// REQUIRES: `Interface` declares `static constexpr char kRegistryKind[]` (used in
// messages, e.g. "aggregator") and a `CreateArgs` type passed to every factory.

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/any.pb.h"
#include "google/protobuf/message.h"

namespace fl {

template <typename Interface>
class Registry {
 public:
  using CreateArgs = typename Interface::CreateArgs;
  // A function pointer for C++ plugins; a closure over the class for plugins
  // registered at run time (Python's).
  using Factory = std::function<absl::StatusOr<std::unique_ptr<Interface>>(
      const google::protobuf::Message& options, const CreateArgs& args)>;

  struct Entry {
    std::string name;
    // The options message's default instance; also names its type.
    const google::protobuf::Message& (*default_options)();
    Factory factory;
    std::string file;
    int line;
    // Registered while the program runs (AddAtRunTime) rather than at start-up.
    bool run_time = false;
  };

  static Registry& Global() {
    static Registry* const registry = new Registry;
    return *registry;
  }

  // Adds an entry; a duplicate name is a programmer error that aborts at start-up
  // naming both registration sites. Returns true so it can initialise a static.
  bool Add(Entry entry) {
    auto it = entries_.find(entry.name);
    if (it != entries_.end()) {
      // Runs before main: plain stderr, glog may not be initialised yet.
      std::fprintf(stderr, "%s \"%s\" registered twice: at %s:%d and at %s:%d\n",
                   Interface::kRegistryKind, entry.name.c_str(), it->second.file.c_str(),
                   it->second.line, entry.file.c_str(), entry.line);
      std::abort();
    }
    std::string name = entry.name;
    entries_.emplace(std::move(name), std::move(entry));
    return true;
  }

  // Adds an entry while the program runs (a Python plugin). A name taken by a
  // start-up plugin is AlreadyExists; one taken by an earlier run-time entry is
  // replaced (a notebook cell run again). Not for use while an experiment runs:
  // Find's pointers would see the entry change.
  absl::Status AddAtRunTime(Entry entry) {
    entry.run_time = true;
    auto it = entries_.find(entry.name);
    if (it == entries_.end()) {
      std::string name = entry.name;
      entries_.emplace(std::move(name), std::move(entry));
      return absl::OkStatus();
    }
    if (!it->second.run_time) {
      return absl::AlreadyExistsError(absl::StrCat(
          Interface::kRegistryKind, " \"", entry.name, "\" is already registered at ",
          it->second.file, ":", it->second.line, "; choose another name"));
    }
    it->second = std::move(entry);
    return absl::OkStatus();
  }

  // Sorted names of every registered plugin of this kind.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

  // nullptr when `name` is not registered.
  const Entry* Find(absl::string_view name) const {
    auto it = entries_.find(std::string(name));
    return it == entries_.end() ? nullptr : &it->second;
  }

  // NotFound naming the known plugins, e.g.
  // `aggregator "fedavgg" is not registered; known: fedavg, fedprox`.
  absl::Status UnknownNameError(absl::string_view name) const {
    std::vector<std::string> names = Names();
    return absl::NotFoundError(absl::StrCat(
        Interface::kRegistryKind, " \"", name, "\" is not registered; known: ",
        names.empty() ? "(none)" : absl::StrJoin(names, ", ")));
  }

  // Unpacks `options` into the plugin's own options type. An empty Any means the
  // defaults; an Any of another type is an error naming both types.
  absl::StatusOr<std::unique_ptr<google::protobuf::Message>> UnpackOptions(
      absl::string_view name, const google::protobuf::Any& options) const {
    const Entry* entry = Find(name);
    if (entry == nullptr) return UnknownNameError(name);
    const google::protobuf::Message& prototype = entry->default_options();
    std::unique_ptr<google::protobuf::Message> unpacked(prototype.New());
    if (options.type_url().empty() && options.value().empty()) return unpacked;
    const std::string& expected = prototype.GetDescriptor()->full_name();
    absl::string_view url = options.type_url();
    absl::string_view given = url.substr(url.rfind('/') + 1);
    if (given != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("options: ", Interface::kRegistryKind, " \"", name, "\" takes ",
                       expected, ", got ", given.empty() ? "(no type)" : given));
    }
    if (!options.UnpackTo(unpacked.get())) {
      return absl::InvalidArgumentError(
          absl::StrCat("options: could not decode ", expected));
    }
    return unpacked;
  }

  // Looks up `name`, type-checks `options` and calls the plugin's factory, which
  // validates the option values.
  absl::StatusOr<std::unique_ptr<Interface>> Create(absl::string_view name,
                                                    const google::protobuf::Any& options,
                                                    const CreateArgs& args = {}) const {
    auto unpacked = UnpackOptions(name, options);
    if (!unpacked.ok()) return unpacked.status();
    return Find(name)->factory(**unpacked, args);
  }

 private:
  Registry() = default;
  std::map<std::string, Entry> entries_;
};

namespace registry_internal {

template <typename Interface, typename Options,
          absl::StatusOr<std::unique_ptr<Interface>> (*kFactory)(
              const Options&, const typename Interface::CreateArgs&)>
absl::StatusOr<std::unique_ptr<Interface>> TypedFactory(
    const google::protobuf::Message& options, const typename Interface::CreateArgs& args) {
  return kFactory(static_cast<const Options&>(options), args);
}

template <typename Options>
const google::protobuf::Message& DefaultOptions() {
  return Options::default_instance();
}

}  // namespace registry_internal
}  // namespace fl

#define FL_REGISTRY_CONCAT_INNER(a, b) a##b
#define FL_REGISTRY_CONCAT(a, b) FL_REGISTRY_CONCAT_INNER(a, b)

// Registers `factory` (absl::StatusOr<std::unique_ptr<Interface>>(const Options&,
// const Interface::CreateArgs&)) under the snake_case `key`.
#define FL_REGISTER_PLUGIN(Interface, key, Options, factory)                          \
  [[maybe_unused]] static const bool FL_REGISTRY_CONCAT(fl_registered_, __LINE__) =   \
      ::fl::Registry<Interface>::Global().Add(                                        \
          {key, &::fl::registry_internal::DefaultOptions<Options>,                    \
           &::fl::registry_internal::TypedFactory<Interface, Options, &factory>,      \
           __FILE__, __LINE__})

#endif  // FL_REGISTRY_H_
