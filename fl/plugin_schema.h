#ifndef FL_PLUGIN_SCHEMA_H_
#define FL_PLUGIN_SCHEMA_H_

// Plugins' option schemas for users: each field's name, type, default and comment,
// from the descriptors of the options message (comments need an fl_proto_docs
// target linked; see fl/proto_docs.h). What `run_experiment --list` prints.

#include <string>

#include "fl/plugin_schema.pb.h"
#include "fl/registry.h"
#include "google/protobuf/message.h"

namespace fl {

// The schema of a plugin named `name` whose options' default instance is `defaults`.
fedkit::PluginSchema DescribePlugin(const std::string& name,
                                    const google::protobuf::Message& defaults);

// Every plugin registered for `Interface`, in name order.
template <typename Interface>
fedkit::PluginKindSchema DescribeKind() {
  fedkit::PluginKindSchema kind;
  kind.set_kind(Interface::kRegistryKind);
  const Registry<Interface>& registry = Registry<Interface>::Global();
  for (const std::string& name : registry.Names()) {
    *kind.add_plugins() = DescribePlugin(name, registry.Find(name)->default_options());
  }
  return kind;
}

// The catalog as text: per kind a heading ("aggregator:"), per plugin a line with
// its name and options type, then its fields indented, each with its type, its
// default where it has one, and its comment below.
std::string FormatCatalog(const fedkit::PluginCatalog& catalog);

// The catalog in protobuf's JSON mapping, indented.
std::string CatalogJson(const fedkit::PluginCatalog& catalog);

}  // namespace fl

#endif  // FL_PLUGIN_SCHEMA_H_
