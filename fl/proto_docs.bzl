"""The comments of every .proto file a target links, embedded in a binary.

`fl_proto_docs(name, deps)` makes a cc_library (alwayslink) holding one
FileDescriptorSet with source info (field comments) of every .proto file of the
fl_cc_proto libraries reachable from `deps` (each carries an fl_proto_sources
marker naming its .proto files). It registers the set at start-up with
fl/proto_docs.h, which answers "what is this field's comment?" from it. Link it only
into what prints schemas (the runner's --list): the descriptors every binary already
has lack comments, and adding this to every binary would relink them all.
"""

FlProtoSourcesInfo = provider(fields = {"sources": "depset of .proto source files"})

_CollectedProtosInfo = provider(fields = {"sources": "depset of .proto source files"})

def _fl_proto_sources_impl(ctx):
    # An empty CcInfo: as a dep of the generated-code cc_library it adds nothing to
    # any compile or link, so it changes no action of the targets that use it.
    return [CcInfo(), FlProtoSourcesInfo(sources = depset(ctx.files.srcs))]

fl_proto_sources = rule(
    implementation = _fl_proto_sources_impl,
    attrs = {"srcs": attr.label_list(allow_files = [".proto"])},
    doc = "Marks a cc_library of generated proto code with its .proto files (fl_cc_proto).",
)

def _proto_sources_aspect_impl(target, ctx):
    transitive = []
    if FlProtoSourcesInfo in target:
        transitive.append(target[FlProtoSourcesInfo].sources)
    for dep in getattr(ctx.rule.attr, "deps", []):
        if _CollectedProtosInfo in dep:
            transitive.append(dep[_CollectedProtosInfo].sources)
    return [_CollectedProtosInfo(sources = depset(transitive = transitive))]

_proto_sources_aspect = aspect(
    implementation = _proto_sources_aspect_impl,
    attr_aspects = ["deps"],
)

def _descriptor_set_impl(ctx):
    sources = depset(transitive = [d[_CollectedProtosInfo].sources for d in ctx.attr.deps]).to_list()
    if not sources:
        fail("%s: no .proto files reachable from deps" % ctx.label)
    out = ctx.actions.declare_file(ctx.label.name + ".descriptor_set")
    ctx.actions.run_shell(
        inputs = sources,
        outputs = [out],
        command = "/usr/bin/protoc -I. --include_imports --include_source_info " +
                  "--descriptor_set_out=%s %s" % (out.path, " ".join([f.path for f in sources])),
        mnemonic = "ProtoDescriptorSet",
        progress_message = "Collecting the comments of %d .proto files" % len(sources),
    )
    return [DefaultInfo(files = depset([out]))]

_descriptor_set = rule(
    implementation = _descriptor_set_impl,
    attrs = {"deps": attr.label_list(aspects = [_proto_sources_aspect])},
)

def fl_proto_docs(name, deps, visibility = None):
    """A cc_library embedding the commented descriptors of every .proto under deps.

    Args:
      name: the cc_library.
      deps: targets whose .proto files (through deps and srcs) are described.
      visibility: of the cc_library.
    """
    _descriptor_set(name = name + "_set", deps = deps)
    native.genrule(
        name = name + "_cc",
        srcs = [name + "_set"],
        outs = [name + "_embedded.cc"],
        # od (coreutils) rather than xxd, which a fresh machine may lack.
        cmd = "(echo '#include \"fl/proto_docs.h\"'; " +
              "echo 'namespace { const unsigned char kSet[] = {'; " +
              "od -An -v -tx1 $< | sed -e 's/ \\([0-9a-f][0-9a-f]\\)/0x\\1,/g'; " +
              "echo '}; const bool kRegistered = fl::RegisterDescriptorSet(kSet, sizeof(kSet)); }') > $@",
    )
    native.cc_library(
        name = name,
        srcs = [name + "_embedded.cc"],
        deps = ["//fl:proto_docs"],
        alwayslink = True,
        visibility = visibility,
    )
