"""Repository rules exposing Debian's system libraries and LibTorch to Bazel offline.

Each library becomes one cc_library whose link flags come from pkg-config, so the
flags track what Debian actually ships (Abseil alone is ~60 archives).
"""

# target name -> pkg-config modules
_PKG_CONFIG_LIBS = {
    "absl": [
        "absl_status",
        "absl_statusor",
        "absl_strings",
        "absl_str_format",
        "absl_synchronization",
        "absl_flags",
        "absl_flags_parse",
        "absl_time",
        "absl_random_random",
        "absl_hash",
        "absl_raw_hash_set",
    ],
    "glog": ["libglog"],
    "protobuf": ["protobuf"],
    "gtest": ["gtest", "gmock"],
    "gtest_main": ["gtest_main", "gmock"],
    "benchmark": ["benchmark"],
    "benchmark_main": ["benchmark_main"],
    "zlib": ["zlib"],
    "lemon": ["lemon"],
    "crypto": ["libcrypto"],  # OpenSSL: secure aggregation's X25519, HKDF, ChaCha20
    "grpc": ["grpc++"],  # deployment across machines (fl/deploy)
}

# Debian libraries that ship no pkg-config file: target name -> link flags.
_LINK_ONLY_LIBS = {
    "alglib": ["-lalglib"],  # libalglib-dev; headers under /usr/include/libalglib
    "boost_crc": [],  # libboost-dev's header-only boost/crc.hpp: TensorBoard records' CRC-32C
}

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules)
    if result.return_code != 0:
        fail("pkg-config %s %s failed (run tools/setup.sh to install the Debian packages): %s" %
             (flag, " ".join(modules), result.stderr))
    return [f for f in result.stdout.strip().split(" ") if f]

def _system_libs_impl(ctx):
    build = ['package(default_visibility = ["//visibility:public"])\n']
    for name, modules in _PKG_CONFIG_LIBS.items():
        if name == "benchmark_main" and ctx.execute(["pkg-config", "--exists", "benchmark_main"]).return_code != 0:
            # Debian 12 ships benchmark_main as a library without its own .pc file.
            defines, linkopts = [], ["-lbenchmark_main"] + _pkg_config(ctx, "--libs", ["benchmark"])
        else:
            cflags = _pkg_config(ctx, "--cflags", modules)
            defines = [f[2:] for f in cflags if f.startswith("-D")]
            linkopts = _pkg_config(ctx, "--libs", modules)
        build.append("""
cc_library(
    name = "{name}",
    defines = {defines},
    linkopts = {linkopts},
)
""".format(name = name, defines = repr(defines), linkopts = repr(linkopts)))
    for name, linkopts in _LINK_ONLY_LIBS.items():
        build.append("""
cc_library(
    name = "{name}",
    linkopts = {linkopts},
)
""".format(name = name, linkopts = repr(linkopts)))
    ctx.file("BUILD", "".join(build))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

system_libs_repository = repository_rule(
    implementation = _system_libs_impl,
    local = True,
)

def _libtorch_impl(ctx):
    root = ctx.os.environ.get("LIBTORCH_PATH", "/usr").rstrip("/") or "/"
    api = root + "/include/torch/csrc/api/include"
    if not ctx.path(api + "/torch/torch.h").exists:
        fail("LibTorch not found: %s/torch/torch.h is missing. Install Debian's libtorch-dev " % api +
             "(tools/setup.sh does) or set LIBTORCH_PATH to a folder holding include/ and lib/.")
    ctx.symlink(api, "api_include")
    includes = ["api_include"]
    hdrs = ['"api_include/**"']
    if root != "/usr":
        # Outside /usr the core headers (ATen, c10, torch) are not on the default search path.
        ctx.symlink(root + "/include", "include")
        includes.append("include")
        hdrs.append('"include/**"')

    libdir = root + "/lib"
    if root == "/usr":
        libdir = "/usr/lib/" + ctx.execute(["gcc", "-print-multiarch"]).stdout.strip()
    libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
    cuda = ctx.path(libdir + "/libtorch_cuda.so").exists
    if cuda:
        # Nothing references libtorch_cuda directly; --no-as-needed keeps its kernels registered.
        libs = ["-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-Wl,--as-needed"] + libs
    linkopts = ["-L" + libdir, "-Wl,-rpath," + libdir] + libs + ["-lpthread"]

    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# LibTorch from {root} (CUDA: {cuda}).
cc_library(
    name = "libtorch",
    hdrs = glob([{hdrs}], allow_empty = True),
    includes = {includes},
    linkopts = {linkopts},
)
""".format(
        root = root,
        cuda = cuda,
        hdrs = ", ".join(hdrs),
        includes = repr(includes),
        linkopts = repr(linkopts),
    ))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

libtorch_repository = repository_rule(
    implementation = _libtorch_impl,
    environ = ["LIBTORCH_PATH"],
    local = True,
)

def _python_impl(ctx):
    python = "/usr/bin/python3"
    if not ctx.path(python).exists:
        fail("%s is missing: the Python module is built for Debian's python3 (tools/setup.sh)" % python)
    query = ctx.execute([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"])
    include = query.stdout.strip()
    if query.return_code != 0 or not ctx.path(include + "/Python.h").exists:
        fail("Python.h not found under %s: install python3-dev (tools/setup.sh does)" % include)
    if not ctx.path("/usr/include/pybind11/pybind11.h").exists:
        fail("pybind11 not found: install pybind11-dev (tools/setup.sh does)")
    ctx.symlink(include, "python_include")
    ctx.symlink("/usr/include/pybind11", "pybind11_include/pybind11")
    libdir = "/usr/lib/" + ctx.execute(["gcc", "-print-multiarch"]).stdout.strip()
    version = ctx.execute([python, "-c", "import sysconfig; print(sysconfig.get_config_var('LDVERSION'))"]).stdout.strip()
    if not ctx.path("%s/libpython%s.so" % (libdir, version)).exists:
        fail("libpython%s.so not found in %s: install python3-dev (tools/setup.sh does)" % (version, libdir))
    ctx.file("BUILD", """
package(default_visibility = ["//visibility:public"])

# Debian's Python 3 headers ({include}), pybind11, and LibTorch's Python bindings
# (libtorch_python, which python3-torch's torch._C uses too): what an extension
# module needs to hand tensors to Python's torch without copies.
cc_library(
    name = "pybind11",
    hdrs = glob(["python_include/**", "pybind11_include/**"]),
    includes = ["python_include", "pybind11_include"],
    linkopts = ["-L{libdir}", "-Wl,-rpath,{libdir}", "-ltorch_python"],
)

# libpython itself, for a C++ program that runs Python inside it (a test that
# drives Python plugins through the C++ suites).
cc_library(
    name = "embed",
    linkopts = ["-L{libdir}", "-lpython{version}"],
    deps = [":pybind11"],
)
""".format(include = include, libdir = libdir, version = version))
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)

python_repository = repository_rule(
    implementation = _python_impl,
    local = True,
)
