"""fl_experiment: a text-proto spec as a `bazel run` target plus a validation test."""

def fl_experiment(name, spec = None, tags = []):
    """Declares `bazel run //experiments:<name>` and `<name>_spec_test`.

    The run target trains the spec (extra arguments go to the runner, e.g.
    `-- --set='server { rounds: 3 }' --output_dir=/tmp/x`); results go to
    results/<spec name> under the folder bazel was run from unless the spec or
    --output_dir says otherwise. The test only parses and validates the spec and
    its plugins, so a typo in any experiment fails `bazel test //...`.

    Args:
      name: target name.
      spec: the .textproto file; default `<name>.textproto`.
      tags: for the run target (e.g. ["manual"] for long reproductions).
    """
    spec = spec or name + ".textproto"
    native.sh_binary(
        name = name,
        srcs = ["//experiments:run_spec.sh"],
        args = ["$(location %s)" % spec],
        data = [spec, "//tools:run_experiment"],
        tags = tags,
    )
    native.sh_test(
        name = name + "_spec_test",
        srcs = ["//experiments:run_spec.sh"],
        args = ["$(location %s)" % spec, "--validate_only"],
        data = [spec, "//tools:run_experiment"],
        size = "small",
    )
