#ifndef FL_PROTO_DOCS_H_
#define FL_PROTO_DOCS_H_

// The comments written beside messages, fields and enum values in the .proto
// files, for schemas printed to users (run_experiment --list). Compiled-in
// descriptors carry no comments; a binary that links an fl_proto_docs target
// (fl/proto_docs.bzl) registers a descriptor set with source info at start-up, and
// these functions read it. Without one they return "".

#include <cstddef>
#include <string>

#include "google/protobuf/descriptor.h"

namespace fl {

// Registers a serialized FileDescriptorSet; `data` must outlive the program (it
// is a static array). Returns true, to initialise a static. Called before main:
// stores the pointer only, parsing waits for the first lookup.
bool RegisterDescriptorSet(const unsigned char* data, std::size_t size);

// The comment above `field` in its .proto file (the one after it on the same line
// when there is none above), without comment markers or surrounding blank lines.
std::string FieldComment(const google::protobuf::FieldDescriptor& field);
std::string MessageComment(const google::protobuf::Descriptor& message);
std::string EnumComment(const google::protobuf::EnumDescriptor& type);
std::string EnumValueComment(const google::protobuf::EnumValueDescriptor& value);

}  // namespace fl

#endif  // FL_PROTO_DOCS_H_
